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

// The classes of a training set: labels in model order, each row's class,
// the rows of each class and each class's factor of C.
struct Classes {
  std::vector<int> labels;
  std::vector<int> of_row;
  std::vector<std::vector<std::int32_t>> rows;
  std::vector<double> weight;
  int k() const { return static_cast<int>(labels.size()); }
};

// Labels in order of first appearance (LIBSVM's), or ascending.
void find_labels(const LabeledCsr& data, const SvmParams& params, Classes& c) {
  const std::int64_t n = data.x.rows;
  c.of_row.resize(n);
  for (std::int64_t r = 0; r < n; ++r) {
    const double l = data.labels[r];
    if (l != std::floor(l) || std::abs(l) > 2147483647.0)
      throw InputError(row_where(data, r) + ": label " + std::to_string(l) + " is not an integer class (C-SVC)");
    const int li = static_cast<int>(l);
    auto it = std::find(c.labels.begin(), c.labels.end(), li);
    if (it == c.labels.end()) {
      c.labels.push_back(li);
      it = c.labels.end() - 1;
    }
    c.of_row[r] = static_cast<int>(it - c.labels.begin());
  }
  if (c.labels.size() < 2)
    throw InputError((data.source.empty() ? std::string("data") : data.source) + ": only one class (label " +
                     std::to_string(c.labels.empty() ? 0 : c.labels[0]) + "); C-SVC needs at least two");
  if (params.sorted_classes) {
    std::vector<int> sorted = c.labels;
    std::sort(sorted.begin(), sorted.end());
    for (auto& x : c.of_row)
      x = static_cast<int>(std::lower_bound(sorted.begin(), sorted.end(), c.labels[x]) - sorted.begin());
    c.labels = std::move(sorted);
  } else if (c.labels.size() == 2 && c.labels[0] == -1 && c.labels[1] == 1) {
    std::swap(c.labels[0], c.labels[1]);
    for (auto& x : c.of_row) x = 1 - x;
  }
}

Classes classes_of(const LabeledCsr& data, const SvmParams& params) {
  Classes c;
  find_labels(data, params, c);
  const int k = c.k();
  c.rows.resize(k);
  for (std::int64_t r = 0; r < data.x.rows; ++r) c.rows[c.of_row[r]].push_back(static_cast<std::int32_t>(r));
  c.weight.assign(k, 1.0);
  for (const auto& [label, w] : params.weights) {
    const auto it = std::find(c.labels.begin(), c.labels.end(), label);
    if (it == c.labels.end())
      std::fprintf(stderr, "WARNING: class label %d specified in weight is not found\n", label);
    else
      c.weight[it - c.labels.begin()] *= w;
  }
  if (params.type == SvmType::NuSvc)
    for (int a = 0; a < k; ++a)
      for (int b = a + 1; b < k; ++b) {
        const double na = double(c.rows[a].size()), nb = double(c.rows[b].size());
        if (params.nu * (na + nb) / 2 > std::min(na, nb))
          throw InputError("-n " + std::to_string(params.nu) + ": specified nu is infeasible (classes " +
                           std::to_string(c.labels[a]) + " and " + std::to_string(c.labels[b]) + ")");
      }
  return c;
}

// Pair (a, b)'s rows: two classes train on the data as it is (no copy);
// more take the rows of the pair, class a first, into `sub`.
struct PairRows {
  CsrMatrix sub;
  std::vector<std::int8_t> y;
  std::vector<std::int32_t> orig;
};

void pair_rows(const LabeledCsr& data, const Classes& c, int a, int b, PairRows& p) {
  if (c.k() == 2) {
    const std::int64_t n = data.x.rows;
    p.y.resize(n);
    p.orig.resize(n);
    for (std::int64_t r = 0; r < n; ++r) {
      p.y[r] = c.of_row[r] == 0 ? 1 : -1;
      p.orig[r] = static_cast<std::int32_t>(r);
    }
    return;
  }
  for (const int cl : {a, b})
    for (const std::int32_t r : c.rows[cl]) {
      p.sub.add_row_from(data.x, r);
      p.y.push_back(cl == a ? 1 : -1);
      p.orig.push_back(r);
    }
  p.sub.cols = data.x.cols;
}

// What the model keeps of each pair's solution.
struct PairResults {
  std::vector<std::map<std::int32_t, double>> alpha;  // row -> alpha, support vectors only
  std::vector<double> rho, prob_a, prob_b;
};

// LIBSVM scales nu-SVC's solution by 1/r; the stats name the pair.
void keep_pair(const SvmParams& params, const Classes& c, int a, int b, const std::vector<std::int32_t>& orig,
               BinarySolution& sol, PairResults& out) {
  if (params.type == SvmType::NuSvc) {
    const double r = sol.stats.r;
    for (double& al : sol.alpha) al /= r;
    sol.stats.rho /= r;
    sol.stats.obj /= r * r;
  }
  sol.stats.class_a = c.labels[a];
  sol.stats.class_b = c.labels[b];
  std::map<std::int32_t, double> nz;
  for (std::size_t t = 0; t < orig.size(); ++t)
    if (sol.alpha[t] > 0) nz[orig[t]] = sol.alpha[t];
  out.alpha.push_back(std::move(nz));
  out.rho.push_back(sol.stats.rho);
}

// Rows that are a support vector anywhere, grouped by class, with LIBSVM's
// coefficient layout: class a's vectors keep their pair-(a,b) coefficient
// in row b-1, class b's in row a.
SvmModel assemble(const LabeledCsr& data, const SvmParams& params, const Classes& c, PairResults& res) {
  const std::int64_t n = data.x.rows;
  const int k = c.k();
  std::vector<char> is_sv(n, 0);
  for (const auto& m : res.alpha)
    for (const auto& [r, al] : m) is_sv[r] = 1;
  SvmModel model;
  model.params = params;
  model.labels = c.labels;
  model.rho = std::move(res.rho);
  model.probA = std::move(res.prob_a);
  model.probB = std::move(res.prob_b);
  model.n_sv.assign(k, 0);
  std::vector<std::int64_t> pos(n, -1);
  for (int cl = 0; cl < k; ++cl)
    for (const std::int32_t r : c.rows[cl])
      if (is_sv[r]) {
        pos[r] = model.sv.rows;
        model.sv.add_row_from(data.x, r);
        model.sv_rows.push_back(r);
        ++model.n_sv[cl];
      }
  model.sv.cols = data.x.cols;
  model.coef.assign(k - 1, std::vector<double>(model.sv.rows, 0.0));
  int p = 0;
  for (int a = 0; a < k; ++a)
    for (int b = a + 1; b < k; ++b, ++p)
      for (const auto& [r, al] : res.alpha[p]) {
        if (c.of_row[r] == a) model.coef[b - 1][pos[r]] = al;
        else model.coef[a][pos[r]] = -al;
      }
  return model;
}

// Pair (a, b): its probability fit (-b 1) and its dual problem, solved by
// the observer.
Task<void> train_pair(const LabeledCsr& data, const SvmParams& params, const std::vector<Device*>& devices,
                      const Classes& c, int a, int b, SvmTrainReport& rep, SvmObserver& observer,
                      PairResults& out) {
  PairRows rows;
  pair_rows(data, c, a, b, rows);
  KernelRows kr(c.k() == 2 ? data.x : rows.sub, params, devices);
  DualProblem pb = pair_problem(params, rows.y, c.weight[a], c.weight[b]);
  pb.rows = rows.orig;
  if (params.probability) {
    const std::pair<double, double> ab =
        pair_probability(data, rows.orig, rows.y, params, params.C * c.weight[a], params.C * c.weight[b], devices);
    out.prob_a.push_back(ab.first);
    out.prob_b.push_back(ab.second);
  }
  BinarySolution sol = co_await observer.solve(pb, params, kr, rep.times);
  keep_pair(params, c, a, b, rows.orig, sol, out);
  rep.problems.push_back(sol.stats);
  observer.solved(sol.stats);
}

}  // namespace

Task<SvmModel> train_classifier(const LabeledCsr& data, const SvmParams& params, const std::vector<Device*>& devices,
                                SvmTrainReport& rep, SvmObserver& observer) {
  const Classes c = classes_of(data, params);
  PairResults res;
  for (int a = 0; a < c.k(); ++a)
    for (int b = a + 1; b < c.k(); ++b) co_await train_pair(data, params, devices, c, a, b, rep, observer, res);
  co_return assemble(data, params, c, res);
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
