// Probability estimates, as LIBSVM's -b 1 defines them:
//  - classification: for each class pair, decision values from an internal
//    5-fold cross validation are fitted by Platt's sigmoid
//    P(y = +1 | f) = 1 / (1 + exp(A f + B)) (Platt, "Probabilistic Outputs
//    for Support Vector Machines", 1999), minimised by the Newton method
//    with backtracking of Lin, Lin and Weng, "A Note on Platt's Probabilistic
//    Outputs for Support Vector Machines", 2007; at prediction the pairs'
//    probabilities are coupled into one per class by the second method of
//    Wu, Lin and Weng, "Probability Estimates for Multi-class Classification
//    by Pairwise Coupling", JMLR 2004;
//  - regression: the residuals of a 5-fold cross validation give the scale
//    sigma of a Laplace noise model (residuals beyond 5 standard deviations
//    left out).
// The folds are accel's own shuffle (a fixed seed), not LIBSVM's rand(), so
// A, B and sigma match LIBSVM's closely, not digit for digit.
#include <algorithm>
#include <cmath>
#include <numeric>
#include <random>

#include "svm_types.hpp"

namespace accel::svm_detail {
namespace {

constexpr int kProbabilityFolds = 5;

// P(y = +1 | f), evaluated without overflow on either side.
double sigmoid(double f, double A, double B) {
  const double fApB = f * A + B;
  return fApB >= 0 ? std::exp(-fApB) / (1.0 + std::exp(-fApB)) : 1.0 / (1.0 + std::exp(fApB));
}

// The negative log-likelihood of Platt's targets t under (A, B).
double platt_loss(const std::vector<double>& f, const std::vector<double>& t, double A, double B) {
  double loss = 0;
  for (std::size_t i = 0; i < f.size(); ++i) {
    const double fApB = f[i] * A + B;
    loss += fApB >= 0 ? t[i] * fApB + std::log1p(std::exp(-fApB)) : (t[i] - 1) * fApB + std::log1p(std::exp(fApB));
  }
  return loss;
}

LabeledCsr rows_of(const LabeledCsr& d, const std::vector<std::int32_t>& rows, const std::vector<double>& labels) {
  LabeledCsr s;
  s.source = d.source;
  for (std::size_t i = 0; i < rows.size(); ++i) {
    s.x.add_row_from(d.x, rows[i]);
    s.labels.push_back(labels[i]);
  }
  s.x.cols = d.x.cols;
  return s;
}

}  // namespace

std::pair<double, double> platt_fit(const std::vector<double>& f, const std::vector<double>& y) {
  double prior1 = 0, prior0 = 0;
  for (const double v : y) (v > 0 ? prior1 : prior0) += 1;
  // Platt's regularised targets instead of 0/1.
  const double hi = (prior1 + 1) / (prior1 + 2), lo = 1 / (prior0 + 2);
  std::vector<double> t(y.size());
  for (std::size_t i = 0; i < y.size(); ++i) t[i] = y[i] > 0 ? hi : lo;
  double A = 0, B = std::log((prior0 + 1) / (prior1 + 1));
  double loss = platt_loss(f, t, A, B);
  constexpr double kSigma = 1e-12, kMinStep = 1e-10, kTol = 1e-5;
  for (int it = 0; it < 100; ++it) {
    double h11 = kSigma, h22 = kSigma, h21 = 0, g1 = 0, g2 = 0;
    for (std::size_t i = 0; i < f.size(); ++i) {
      const double p = sigmoid(f[i], A, B), q = 1 - p, d2 = p * q, d1 = t[i] - p;
      h11 += f[i] * f[i] * d2;
      h22 += d2;
      h21 += f[i] * d2;
      g1 += f[i] * d1;
      g2 += d1;
    }
    if (std::abs(g1) < kTol && std::abs(g2) < kTol) break;
    const double det = h11 * h22 - h21 * h21;
    const double dA = -(h22 * g1 - h21 * g2) / det, dB = -(-h21 * g1 + h11 * g2) / det;
    const double gd = g1 * dA + g2 * dB;
    double step = 1;
    while (step >= kMinStep) {  // backtracking until the loss drops enough
      const double nA = A + step * dA, nB = B + step * dB, nl = platt_loss(f, t, nA, nB);
      if (nl < loss + 1e-4 * step * gd) {
        A = nA;
        B = nB;
        loss = nl;
        break;
      }
      step /= 2;
    }
    if (step < kMinStep) break;
  }
  return {A, B};
}

std::pair<double, double> pair_probability(const LabeledCsr& data, const std::vector<std::int32_t>& rows,
                                           const std::vector<std::int8_t>& y, const SvmParams& params, double Cp,
                                           double Cn, const std::vector<Device*>& devices) {
  const std::size_t l = rows.size();
  std::vector<std::size_t> perm(l);
  std::iota(perm.begin(), perm.end(), 0);
  std::mt19937 rng(1);
  std::shuffle(perm.begin(), perm.end(), rng);
  SvmParams sub = params;
  sub.probability = false;
  sub.C = 1;
  sub.weights = {{1, Cp}, {-1, Cn}};
  std::vector<double> dec(l), yy(l);
  for (std::size_t i = 0; i < l; ++i) yy[i] = y[i];
  for (int fold = 0; fold < kProbabilityFolds; ++fold) {
    const std::size_t begin = fold * l / kProbabilityFolds, end = (fold + 1) * l / kProbabilityFolds;
    std::vector<std::int32_t> train, test;
    std::vector<double> train_y, test_y;
    int pos = 0, neg = 0;
    for (std::size_t i = 0; i < l; ++i) {
      const bool held = i >= begin && i < end;
      (held ? test : train).push_back(rows[perm[i]]);
      (held ? test_y : train_y).push_back(yy[perm[i]]);
      if (!held) (yy[perm[i]] > 0 ? pos : neg)++;
    }
    std::vector<double> f(test.size());
    if (pos == 0 || neg == 0) {  // one class left: its sign (0 when none)
      std::fill(f.begin(), f.end(), pos > 0 ? 1.0 : neg > 0 ? -1.0 : 0.0);
    } else {
      const SvmModel m = svm_train(rows_of(data, train, train_y), sub, devices);
      const LabeledCsr held = rows_of(data, test, test_y);
      f = decision_values(m, held.x, devices);
      for (double& v : f) v *= m.labels[0];  // decisions for class +1
    }
    for (std::size_t i = begin; i < end; ++i) dec[perm[i]] = f[i - begin];
  }
  return platt_fit(dec, yy);
}

double regression_sigma(const LabeledCsr& data, const SvmParams& params, const std::vector<Device*>& devices) {
  SvmParams sub = params;
  sub.probability = false;
  const std::vector<double> pred = svm_cross_validation(data, sub, kProbabilityFolds, devices);
  const std::size_t l = pred.size();
  std::vector<double> res(l);
  double mae = 0;
  for (std::size_t i = 0; i < l; ++i) {
    res[i] = data.labels[i] - pred[i];
    mae += std::abs(res[i]);
  }
  mae /= double(l);
  const double std_dev = std::sqrt(2 * mae * mae);
  double kept = 0, sum = 0;
  for (const double r : res)
    if (std::abs(r) <= 5 * std_dev) {
      sum += std::abs(r);
      kept += 1;
    }
  return kept > 0 ? sum / kept : mae;
}

std::vector<double> couple_pairs(const std::vector<std::vector<double>>& r) {
  const int k = static_cast<int>(r.size());
  std::vector<std::vector<double>> Q(k, std::vector<double>(k, 0.0));
  for (int t = 0; t < k; ++t)
    for (int j = 0; j < k; ++j)
      if (j != t) {
        Q[t][t] += r[j][t] * r[j][t];
        Q[t][j] = -r[j][t] * r[t][j];
      }
  std::vector<double> p(k, 1.0 / k), Qp(k);
  const double eps = 0.005 / k;
  for (int it = 0; it < std::max(100, k); ++it) {
    double pQp = 0;
    for (int t = 0; t < k; ++t) {
      Qp[t] = 0;
      for (int j = 0; j < k; ++j) Qp[t] += Q[t][j] * p[j];
      pQp += p[t] * Qp[t];
    }
    double worst = 0;
    for (int t = 0; t < k; ++t) worst = std::max(worst, std::abs(Qp[t] - pQp));
    if (worst < eps) break;
    for (int t = 0; t < k; ++t) {  // one coordinate at a time, p kept on the simplex
      const double diff = (-Qp[t] + pQp) / Q[t][t];
      p[t] += diff;
      pQp = (pQp + diff * (diff * Q[t][t] + 2 * Qp[t])) / (1 + diff) / (1 + diff);
      for (int j = 0; j < k; ++j) {
        Qp[j] = (Qp[j] + diff * Q[t][j]) / (1 + diff);
        p[j] /= 1 + diff;
      }
    }
  }
  return p;
}

std::vector<double> class_probabilities(const SvmModel& model, const double* dec) {
  const int k = static_cast<int>(model.labels.size());
  constexpr double kMin = 1e-7;
  std::vector<std::vector<double>> r(k, std::vector<double>(k, 0.0));
  int p = 0;
  for (int a = 0; a < k; ++a)
    for (int b = a + 1; b < k; ++b, ++p) {
      r[a][b] = std::clamp(sigmoid(dec[p], model.probA[p], model.probB[p]), kMin, 1 - kMin);
      r[b][a] = 1 - r[a][b];
    }
  return k == 2 ? std::vector<double>{r[0][1], r[1][0]} : couple_pairs(r);
}

}  // namespace accel::svm_detail
