// C-SVC over any number of classes: one-against-one, as LIBSVM does it.
// Classes are ordered by first appearance in the training data (with LIBSVM's
// exception: a two-class problem labelled -1 first and +1 second puts +1
// first); each pair (a, b), a before b, is a binary problem with class a as
// +1 on the rows of the two classes. The model keeps every row that is a
// support vector of any pair, grouped by class, with one coefficient row per
// other class (LIBSVM's layout), so prediction is a vote of the pairs.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <map>

#include "accel/error.hpp"
#include "accel/svm.hpp"

namespace accel {
namespace {

std::string row_where(const LabeledCsr& d, std::size_t r) {
  const std::string src = d.source.empty() ? std::string("data") : d.source;
  return r < d.lines.size() ? src + ":" + std::to_string(d.lines[r]) : src + ": row " + std::to_string(r + 1);
}

}  // namespace

SvmModel svm_train(const LabeledCsr& data, const SvmParams& params_in, const std::vector<Device*>& devices,
                   SvmTrainReport* report) {
  const auto t_start = std::chrono::steady_clock::now();
  SvmParams params = params_in;
  if (params.gamma == 0) params.gamma = data.x.cols > 0 ? 1.0 / double(data.x.cols) : 1.0;
  if (!(params.C > 0)) throw InputError("svm: C = " + std::to_string(params.C) + " must be > 0");
  if (!(params.eps > 0)) throw InputError("svm: eps = " + std::to_string(params.eps) + " must be > 0");
  if (params.cache_mb < 0) throw InputError("svm: cache size must be >= 0 MB");
  if (params.kernel == KernelType::Polynomial && params.degree < 0)
    throw InputError("svm: degree " + std::to_string(params.degree) + " must be >= 0");

  const std::int64_t n = data.x.rows;
  std::vector<int> labels;
  std::vector<int> cls(n);
  for (std::int64_t r = 0; r < n; ++r) {
    const double l = data.labels[r];
    if (l != std::floor(l) || std::abs(l) > 2147483647.0)
      throw InputError(row_where(data, r) + ": label " + std::to_string(l) + " is not an integer class (C-SVC)");
    const int li = static_cast<int>(l);
    auto it = std::find(labels.begin(), labels.end(), li);
    if (it == labels.end()) {
      labels.push_back(li);
      it = labels.end() - 1;
    }
    cls[r] = static_cast<int>(it - labels.begin());
  }
  if (labels.size() < 2)
    throw InputError((data.source.empty() ? std::string("data") : data.source) + ": only one class (label " +
                     std::to_string(labels.empty() ? 0 : labels[0]) + "); C-SVC needs at least two");
  if (labels.size() == 2 && labels[0] == -1 && labels[1] == 1) {
    std::swap(labels[0], labels[1]);
    for (auto& c : cls) c = 1 - c;
  }
  const int k = static_cast<int>(labels.size());
  std::vector<std::vector<std::int32_t>> rows_of(k);
  for (std::int64_t r = 0; r < n; ++r) rows_of[cls[r]].push_back(static_cast<std::int32_t>(r));

  // alpha of row r in pair p, kept sparse: only support vectors matter.
  std::vector<std::map<std::int32_t, double>> pair_alpha;
  std::vector<double> rho;
  SvmTrainReport rep;
  for (int a = 0; a < k; ++a)
    for (int b = a + 1; b < k; ++b) {
      // Two classes train on the data as it is (no copy); more take the
      // rows of each pair, class a first.
      CsrMatrix sub;
      std::vector<std::int8_t> y;
      std::vector<std::int32_t> orig;
      if (k == 2) {
        y.resize(n);
        orig.resize(n);
        for (std::int64_t r = 0; r < n; ++r) {
          y[r] = cls[r] == 0 ? 1 : -1;
          orig[r] = static_cast<std::int32_t>(r);
        }
      } else {
        for (int c : {a, b})
          for (const std::int32_t r : rows_of[c]) {
            sub.add_row_from(data.x, r);
            y.push_back(c == a ? 1 : -1);
            orig.push_back(r);
          }
        sub.cols = data.x.cols;
      }
      KernelRows kr(k == 2 ? data.x : sub, params, devices);
      BinarySolution sol = solve_binary(y, params, kr, rep.times);
      sol.stats.class_a = labels[a];
      sol.stats.class_b = labels[b];
      rep.problems.push_back(sol.stats);
      std::map<std::int32_t, double> nz;
      for (std::size_t t = 0; t < orig.size(); ++t)
        if (sol.alpha[t] > 0) nz[orig[t]] = sol.alpha[t];
      pair_alpha.push_back(std::move(nz));
      rho.push_back(sol.stats.rho);
    }

  // Rows that are a support vector anywhere, grouped by class.
  std::vector<char> is_sv(n, 0);
  for (const auto& m : pair_alpha)
    for (const auto& [r, al] : m) is_sv[r] = 1;
  SvmModel model;
  model.params = params;
  model.labels = labels;
  model.rho = rho;
  model.n_sv.assign(k, 0);
  std::vector<std::int64_t> pos(n, -1);
  for (int c = 0; c < k; ++c)
    for (const std::int32_t r : rows_of[c])
      if (is_sv[r]) {
        pos[r] = model.sv.rows;
        model.sv.add_row_from(data.x, r);
        ++model.n_sv[c];
      }
  model.sv.cols = data.x.cols;
  model.coef.assign(k - 1, std::vector<double>(model.sv.rows, 0.0));
  int p = 0;
  for (int a = 0; a < k; ++a)
    for (int b = a + 1; b < k; ++b, ++p)
      for (const auto& [r, al] : pair_alpha[p]) {
        // Class a's vectors keep their pair-(a,b) coefficient in row b-1,
        // class b's in row a: LIBSVM's layout.
        if (cls[r] == a) model.coef[b - 1][pos[r]] = al;
        else model.coef[a][pos[r]] = -al;
      }
  rep.times.total = std::chrono::duration<double>(std::chrono::steady_clock::now() - t_start).count();
  if (report) *report = std::move(rep);
  return model;
}

std::vector<double> svm_predict(const SvmModel& model, const CsrMatrix& x, const std::vector<Device*>& devices) {
  const int k = static_cast<int>(model.labels.size());
  const std::int64_t nsv = model.sv.rows;
  std::vector<double> out(x.rows);
  if (x.rows == 0) return out;
  if (k < 2 || nsv == 0) {
    std::fill(out.begin(), out.end(), k > 0 ? model.labels[0] : 0);
    return out;
  }
  // One matrix holding the support vectors and then the rows to predict, so
  // that csr_kernel_rows computes K(row, sv) with rows as queries.
  CsrMatrix all = model.sv;
  for (std::int64_t i = 0; i < x.rows; ++i) all.add_row_from(x, i);
  all.cols = std::max(model.sv.cols, x.cols);
  SvmParams p = model.params;
  p.cache_mb = 0;
  KernelRows kr(all, p, devices);
  std::vector<std::int32_t> targets(nsv);
  for (std::int64_t s = 0; s < nsv; ++s) targets[s] = static_cast<std::int32_t>(s);
  std::vector<std::int64_t> start(k + 1, 0);
  for (int c = 0; c < k; ++c) start[c + 1] = start[c] + model.n_sv[c];

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
      std::vector<int> votes(k, 0);
      int p_idx = 0;
      for (int a = 0; a < k; ++a)
        for (int b = a + 1; b < k; ++b, ++p_idx) {
          double sum = 0;
          for (std::int64_t s = start[a]; s < start[a + 1]; ++s) sum += model.coef[b - 1][s] * K[s];
          for (std::int64_t s = start[b]; s < start[b + 1]; ++s) sum += model.coef[a][s] * K[s];
          sum -= model.rho[p_idx];
          ++votes[sum > 0 ? a : b];
        }
      int best = 0;
      for (int c = 1; c < k; ++c)
        if (votes[c] > votes[best]) best = c;
      out[r0 + t] = model.labels[best];
    }
  }
  return out;
}

}  // namespace accel
