// C-SVC and nu-SVC over any number of classes: one-against-one, as LIBSVM
// does it.
// Classes are ordered by first appearance in the training data (with LIBSVM's
// exception: a two-class problem labelled -1 first and +1 second puts +1
// first); each pair (a, b), a before b, is a binary problem with class a as
// +1 on the rows of the two classes. The model keeps every row that is a
// support vector of any pair, grouped by class, with one coefficient row per
// other class (LIBSVM's layout), so prediction is a vote of the pairs.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <map>

#include "accel/error.hpp"
#include "svm_types.hpp"

namespace accel::svm_detail {
namespace {

// The dual problem of pair (a, b) over its rows (y = +1 for class a).
// C-SVC: C weighted per class. nu-SVC (LIBSVM's solve_nu_svc): each side
// starts with nu*l/2 of multiplier mass, bounds 1, Solver_NU.
DualProblem pair_problem(const SvmParams& params, const std::vector<std::int8_t>& y, double wa, double wb) {
  if (params.type == SvmType::CSvc) {
    DualProblem pb = DualProblem::c_svc(y, params.C);
    pb.Cp = params.C * wa;
    pb.Cn = params.C * wb;
    return pb;
  }
  DualProblem pb;
  pb.y = y;
  pb.p.assign(y.size(), 0.0);
  pb.nu = true;
  const double l = static_cast<double>(y.size());
  double sum_pos = params.nu * l / 2, sum_neg = params.nu * l / 2;
  pb.alpha0.resize(y.size());
  for (std::size_t i = 0; i < y.size(); ++i) {
    double& sum = y[i] > 0 ? sum_pos : sum_neg;
    pb.alpha0[i] = std::min(1.0, sum);
    sum -= pb.alpha0[i];
  }
  return pb;
}

}  // namespace

SvmModel train_classifier(const LabeledCsr& data, const SvmParams& params, const std::vector<Device*>& devices,
                          SvmTrainReport& rep) {
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
  if (params.sorted_classes) {
    std::vector<int> sorted = labels;
    std::sort(sorted.begin(), sorted.end());
    for (auto& c : cls) c = static_cast<int>(std::lower_bound(sorted.begin(), sorted.end(), labels[c]) - sorted.begin());
    labels = std::move(sorted);
  } else if (labels.size() == 2 && labels[0] == -1 && labels[1] == 1) {
    std::swap(labels[0], labels[1]);
    for (auto& c : cls) c = 1 - c;
  }
  const int k = static_cast<int>(labels.size());
  std::vector<std::vector<std::int32_t>> rows_of(k);
  for (std::int64_t r = 0; r < n; ++r) rows_of[cls[r]].push_back(static_cast<std::int32_t>(r));
  std::vector<double> weight(k, 1.0);
  for (const auto& [label, w] : params.weights) {
    const auto it = std::find(labels.begin(), labels.end(), label);
    if (it == labels.end())
      std::fprintf(stderr, "WARNING: class label %d specified in weight is not found\n", label);
    else
      weight[it - labels.begin()] *= w;
  }
  if (params.type == SvmType::NuSvc)
    for (int a = 0; a < k; ++a)
      for (int b = a + 1; b < k; ++b) {
        const double na = double(rows_of[a].size()), nb = double(rows_of[b].size());
        if (params.nu * (na + nb) / 2 > std::min(na, nb))
          throw InputError("-n " + std::to_string(params.nu) + ": specified nu is infeasible (classes " +
                           std::to_string(labels[a]) + " and " + std::to_string(labels[b]) + ")");
      }

  // alpha of row r in pair p, kept sparse: only support vectors matter.
  std::vector<std::map<std::int32_t, double>> pair_alpha;
  std::vector<double> rho, prob_a, prob_b;
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
      DualProblem pb = pair_problem(params, y, weight[a], weight[b]);
      pb.rows = orig;
      if (params.probability) {
        const auto [A, B] = pair_probability(data, orig, y, params, params.C * weight[a], params.C * weight[b], devices);
        prob_a.push_back(A);
        prob_b.push_back(B);
      }
      BinarySolution sol = solve_binary(pb, params, kr, rep.times);
      if (params.type == SvmType::NuSvc) {  // LIBSVM scales the nu solution by 1/r
        const double r = sol.stats.r;
        for (double& al : sol.alpha) al /= r;
        sol.stats.rho /= r;
        sol.stats.obj /= r * r;
      }
      sol.stats.class_a = labels[a];
      sol.stats.class_b = labels[b];
      rep.problems.push_back(sol.stats);
      if (params.on_problem) params.on_problem(sol.stats);
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
  model.probA = prob_a;
  model.probB = prob_b;
  model.n_sv.assign(k, 0);
  std::vector<std::int64_t> pos(n, -1);
  for (int c = 0; c < k; ++c)
    for (const std::int32_t r : rows_of[c])
      if (is_sv[r]) {
        pos[r] = model.sv.rows;
        model.sv.add_row_from(data.x, r);
        model.sv_rows.push_back(r);
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
  return model;
}

std::vector<double> vote(const SvmModel& model, const std::vector<double>& dec) {
  const int k = static_cast<int>(model.labels.size());
  const std::size_t pairs = static_cast<std::size_t>(k) * (k - 1) / 2, rows = pairs ? dec.size() / pairs : 0;
  std::vector<double> out(rows);
  for (std::size_t t = 0; t < rows; ++t) {
    std::vector<int> votes(k, 0);
    int p = 0;
    for (int a = 0; a < k; ++a)
      for (int b = a + 1; b < k; ++b, ++p) ++votes[dec[t * pairs + p] > 0 ? a : b];
    out[t] = model.labels[std::max_element(votes.begin(), votes.end()) - votes.begin()];
  }
  return out;
}

}  // namespace accel::svm_detail
