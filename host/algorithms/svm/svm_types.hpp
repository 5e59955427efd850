// The training drivers behind svm_train, one per family of LIBSVM's -s
// types, and the prediction rules. Internal to host/algorithms/svm.
#pragma once

#include <string>
#include <vector>

#include "accel/svm.hpp"

namespace accel::svm_detail {

// "file:line" of a data row, for error messages.
std::string row_where(const LabeledCsr& d, std::size_t r);

// C-SVC and nu-SVC, one-against-one (multiclass.cpp).
Task<SvmModel> train_classifier(const LabeledCsr& data, const SvmParams& params, const std::vector<Device*>& devices,
                                SvmTrainReport& rep, SvmObserver& observer);
// The classes' vote from each row's pair decisions (dec[t * pairs + p]).
std::vector<double> vote(const SvmModel& model, const std::vector<double>& dec);

// One-class SVM, epsilon-SVR and nu-SVR: one dual problem (single.cpp).
Task<SvmModel> train_single(const LabeledCsr& data, const SvmParams& params, const std::vector<Device*>& devices,
                            SvmTrainReport& rep, SvmObserver& observer);

// Decision values of the rows of x: k(k-1)/2 per row for classification
// (LIBSVM's pair order), one otherwise (sum coef K - rho).
std::vector<double> decision_values(const SvmModel& model, const CsrMatrix& x, const std::vector<Device*>& devices);

// Probability estimates (probability.cpp).
std::pair<double, double> platt_fit(const std::vector<double>& f, const std::vector<double>& y);
// Platt's (A, B) of one class pair from a 5-fold cross validation on its rows.
std::pair<double, double> pair_probability(const LabeledCsr& data, const std::vector<std::int32_t>& rows,
                                           const std::vector<std::int8_t>& y, const SvmParams& params, double Cp,
                                           double Cn, const std::vector<Device*>& devices);
// The Laplace scale of regression residuals from a 5-fold cross validation.
double regression_sigma(const LabeledCsr& data, const SvmParams& params, const std::vector<Device*>& devices);
// One probability per class (the model's label order) from a row's pair
// decisions.
std::vector<double> class_probabilities(const SvmModel& model, const double* dec);
std::vector<double> couple_pairs(const std::vector<std::vector<double>>& r);

}  // namespace accel::svm_detail
