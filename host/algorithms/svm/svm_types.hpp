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
SvmModel train_classifier(const LabeledCsr& data, const SvmParams& params, const std::vector<Device*>& devices,
                          SvmTrainReport& rep);
// Labels of `rows` rows from their kernel values against the model's
// support vectors (K[t * nsv + s]): the pairs' vote.
std::vector<double> predict_classifier(const SvmModel& model, const float* K, std::int64_t rows, std::int64_t nsv);

// One-class SVM, epsilon-SVR and nu-SVR: one dual problem (single.cpp).
SvmModel train_single(const LabeledCsr& data, const SvmParams& params, const std::vector<Device*>& devices,
                      SvmTrainReport& rep);

}  // namespace accel::svm_detail
