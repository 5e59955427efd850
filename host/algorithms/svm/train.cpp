// svm_train, svm_predict and svm_cross_validation for every LIBSVM type:
// parameter checks, the default gamma, and the dispatch to the classifier
// (multiclass.cpp) or the single-problem types (single.cpp).
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <numeric>
#include <random>

#include "accel/error.hpp"
#include "svm_types.hpp"

namespace accel {

bool is_classification(SvmType t) { return t == SvmType::CSvc || t == SvmType::NuSvc; }
bool is_regression(SvmType t) { return t == SvmType::EpsilonSvr || t == SvmType::NuSvr; }

const char* model_type_name(SvmType t) {
  static const char* const names[] = {"c_svc", "nu_svc", "one_class", "epsilon_svr", "nu_svr"};
  return names[static_cast<int>(t)];
}

namespace svm_detail {

std::string row_where(const LabeledCsr& d, std::size_t r) {
  const std::string src = d.source.empty() ? std::string("data") : d.source;
  return r < d.lines.size() ? src + ":" + std::to_string(d.lines[r]) : src + ": row " + std::to_string(r + 1);
}

}  // namespace svm_detail

void check_svm_params(const SvmParams& p) {
  const int t = static_cast<int>(p.type);
  if (t < 0 || t > 4) throw InputError("-s " + std::to_string(t) + ": svm type must be 0..4");
  if (!(p.C > 0) && (p.type == SvmType::CSvc || is_regression(p.type)))
    throw InputError("-c " + std::to_string(p.C) + ": C must be > 0");
  if (!(p.nu > 0 && p.nu <= 1) && (p.type == SvmType::NuSvc || p.type == SvmType::OneClass || p.type == SvmType::NuSvr))
    throw InputError("-n " + std::to_string(p.nu) + ": nu must be in (0, 1]");
  if (!(p.p >= 0) && p.type == SvmType::EpsilonSvr) throw InputError("-p " + std::to_string(p.p) + ": must be >= 0");
  if (!(p.eps > 0)) throw InputError("-e " + std::to_string(p.eps) + ": eps must be > 0");
  if (p.cache_mb < 0) throw InputError("-m " + std::to_string(p.cache_mb) + ": cache size must be >= 0 MB");
  if (p.gamma < 0) throw InputError("-g " + std::to_string(p.gamma) + ": gamma must be >= 0");
  if (p.kernel == KernelType::Polynomial && p.degree < 0)
    throw InputError("-d " + std::to_string(p.degree) + ": degree must be >= 0");
  if (p.probability && p.type == SvmType::OneClass)
    throw InputError("-b 1: one-class SVM has no probability estimates (LIBSVM 3.24 neither)");
  for (const auto& [label, w] : p.weights)
    if (!(w >= 0)) throw InputError("-w" + std::to_string(label) + " " + std::to_string(w) + ": weight must be >= 0");
}

Task<BinarySolution> SvmObserver::solve(const DualProblem& pb, const SvmParams& params, KernelRows& kr,
                                       SvmTimes& times) {
  co_return solve_binary(pb, params, kr, times);
}

Task<SvmModel> svm_train_steps(const LabeledCsr& data, SvmParams params, std::vector<Device*> devices,
                               SvmObserver& observer, SvmTrainReport* report) {
  const auto t_start = std::chrono::steady_clock::now();
  check_svm_params(params);
  if (params.gamma == 0) params.gamma = data.x.cols > 0 ? 1.0 / double(data.x.cols) : 1.0;
  SvmTrainReport rep;
  SvmModel model;
  if (is_classification(params.type))
    model = co_await svm_detail::train_classifier(data, params, devices, rep, observer);
  else
    model = co_await svm_detail::train_single(data, params, devices, rep, observer);
  rep.times.total = std::chrono::duration<double>(std::chrono::steady_clock::now() - t_start).count();
  if (report) *report = std::move(rep);
  co_return model;
}

SvmModel svm_train(const LabeledCsr& data, const SvmParams& params, const std::vector<Device*>& devices,
                   SvmTrainReport* report, SvmObserver* observer) {
  SvmObserver local;
  return run_to_end(svm_train_steps(data, params, devices, observer ? *observer : local, report));
}

namespace svm_detail {

std::vector<double> decision_values(const SvmModel& model, const CsrMatrix& x, const std::vector<Device*>& devices) {
  const bool classify = is_classification(model.params.type);
  const int k = classify ? static_cast<int>(model.labels.size()) : 2;
  const std::int64_t pairs = k * (k - 1) / 2, nsv = model.sv.rows;
  std::vector<double> dec(x.rows * pairs);
  for (std::int64_t t = 0; t < x.rows; ++t)
    for (std::int64_t p = 0; p < pairs; ++p) dec[t * pairs + p] = -model.rho[p];
  if (x.rows == 0 || nsv == 0) return dec;
  // One matrix holding the support vectors and then the rows to predict, so
  // that csr_kernel_rows computes K(row, sv) with rows as queries.
  CsrMatrix all = model.sv;
  for (std::int64_t i = 0; i < x.rows; ++i) all.add_row_from(x, i);
  all.cols = std::max(model.sv.cols, x.cols);
  SvmParams p = model.params;
  p.cache_mb = 0;
  KernelRows kr(all, p, devices);
  kr.set_exact(true);
  std::vector<std::int32_t> targets(nsv);
  std::iota(targets.begin(), targets.end(), 0);
  std::vector<std::int64_t> start(k + 1, 0);
  for (int c = 0; c < k; ++c) start[c + 1] = start[c] + (classify ? model.n_sv[c] : c == 0 ? nsv : 0);
  const std::int64_t batch = std::max<std::int64_t>(1, (64ll << 20) / 4 / nsv);
  std::vector<float> kv;
  for (std::int64_t r0 = 0; r0 < x.rows; r0 += batch) {
    const std::int64_t nb = std::min(batch, x.rows - r0);
    std::vector<std::int32_t> q(nb);
    for (std::int64_t t = 0; t < nb; ++t) q[t] = static_cast<std::int32_t>(nsv + r0 + t);
    kv.resize(nb * nsv);
    kr.compute(q, targets, kv.data());
#pragma omp parallel for schedule(static)
    for (std::int64_t t = 0; t < nb; ++t) {
      const float* K = kv.data() + t * nsv;
      double* d = dec.data() + (r0 + t) * pairs;
      if (!classify) {
        for (std::int64_t s = 0; s < nsv; ++s) d[0] += model.coef[0][s] * K[s];
        continue;
      }
      // Pair (a, b): class a's vectors carry their coefficient in row b-1,
      // class b's in row a (LIBSVM's layout).
      int p_idx = 0;
      for (int a = 0; a < k; ++a)
        for (int b = a + 1; b < k; ++b, ++p_idx) {
          double sum = 0;
          for (std::int64_t s = start[a]; s < start[a + 1]; ++s) sum += model.coef[b - 1][s] * K[s];
          for (std::int64_t s = start[b]; s < start[b + 1]; ++s) sum += model.coef[a][s] * K[s];
          d[p_idx] += sum;
        }
    }
  }
  return dec;
}

}  // namespace svm_detail

std::vector<double> svm_predict(const SvmModel& model, const CsrMatrix& x, const std::vector<Device*>& devices) {
  const std::vector<double> dec = svm_detail::decision_values(model, x, devices);
  if (is_classification(model.params.type)) return svm_detail::vote(model, dec);
  std::vector<double> out(dec);
  if (model.params.type == SvmType::OneClass)
    for (double& v : out) v = v > 0 ? 1 : -1;
  return out;
}

std::vector<double> svm_decision_values(const SvmModel& model, const CsrMatrix& x, const std::vector<Device*>& devices) {
  return svm_detail::decision_values(model, x, devices);
}

ProbabilityPrediction svm_predict_probability(const SvmModel& model, const CsrMatrix& x,
                                              const std::vector<Device*>& devices) {
  const std::size_t k = model.labels.size(), pairs = k * (k - 1) / 2;
  if (!is_classification(model.params.type) || model.probA.size() != pairs || model.probB.size() != pairs)
    throw InputError("the model has no probability estimates (train it with -b 1)");
  const std::vector<double> dec = svm_detail::decision_values(model, x, devices);
  ProbabilityPrediction out;
  out.labels.resize(x.rows);
  out.probabilities.resize(x.rows * k);
  for (std::int64_t t = 0; t < x.rows; ++t) {
    const std::vector<double> p = svm_detail::class_probabilities(model, dec.data() + t * pairs);
    std::copy(p.begin(), p.end(), out.probabilities.begin() + t * k);
    out.labels[t] = model.labels[std::max_element(p.begin(), p.end()) - p.begin()];
  }
  return out;
}

namespace {

LabeledCsr subset(const LabeledCsr& d, const std::vector<std::int32_t>& rows) {
  LabeledCsr s;
  s.source = d.source;
  for (const std::int32_t r : rows) {
    s.x.add_row_from(d.x, r);
    s.labels.push_back(d.labels[r]);
    if (static_cast<std::size_t>(r) < d.lines.size()) s.lines.push_back(d.lines[r]);
  }
  s.x.cols = d.x.cols;
  return s;
}

}  // namespace

std::vector<double> svm_cross_validation(const LabeledCsr& data, const SvmParams& params, int folds,
                                         const std::vector<Device*>& devices) {
  const std::int64_t n = data.x.rows;
  if (folds < 2) throw InputError("-v " + std::to_string(folds) + ": n-fold cross validation needs n >= 2");
  if (folds > n) {
    std::fprintf(stderr, "WARNING: # folds > # data. Will use # folds = # data instead (i.e., leave-one-out cross validation)\n");
    folds = static_cast<int>(n);
  }
  // Rows shuffled by a fixed seed; classification deals each class's rows
  // round the folds in turn (stratified), so every fold sees every class.
  std::mt19937 rng(1);
  std::vector<std::int32_t> order(n);
  std::iota(order.begin(), order.end(), 0);
  std::shuffle(order.begin(), order.end(), rng);
  if (is_classification(params.type))
    std::stable_sort(order.begin(), order.end(),
                     [&](std::int32_t a, std::int32_t b) { return data.labels[a] < data.labels[b]; });
  std::vector<int> fold_of(n);
  for (std::int64_t i = 0; i < n; ++i) fold_of[order[i]] = static_cast<int>(i % folds);
  std::vector<double> out(n);
  for (int f = 0; f < folds; ++f) {
    std::vector<std::int32_t> train, test;
    for (std::int64_t r = 0; r < n; ++r) (fold_of[r] == f ? test : train).push_back(static_cast<std::int32_t>(r));
    const LabeledCsr tr = subset(data, train), te = subset(data, test);
    const SvmModel model = svm_train(tr, params, devices);
    const std::vector<double> pred = svm_predict(model, te.x, devices);
    for (std::size_t t = 0; t < test.size(); ++t) out[test[t]] = pred[t];
  }
  return out;
}

}  // namespace accel
