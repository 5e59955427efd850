// The batched solver's pieces of one round (batch_solver.hpp): choosing the
// working set from the candidates of I_up and I_low, and solving the
// q-sized subproblem on its kernel block by SMO, to a local tolerance of
// max(eps, gap/100) (ThunderSVM's is gap/10). Also the working-set size q
// and solve_binary's choice of solver.
#include <omp.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>

#include "accel/interrupt.hpp"
#include "solver_state.hpp"

namespace accel {
namespace svm_detail {
namespace {

constexpr std::int64_t kMinWs = 64, kMaxWs = 512;
// A subproblem is solved until its own gap is this fraction of the gap it
// started with (or eps). ThunderSVM stops at 0.1; solving further costs
// host time on the q x q block only and saves rounds, each of which costs
// q/2 kernel rows.
constexpr double kLocalTolerance = 0.01;

// The n best samples of `cand` by `better`, best first.
template <class Better>
void take_best(std::vector<std::pair<double, std::int32_t>>& cand, std::size_t n, Better better) {
  n = std::min(n, cand.size());
  std::nth_element(cand.begin(), cand.begin() + n, cand.end(), better);
  cand.resize(n);
  std::sort(cand.begin(), cand.end(), better);
}

}  // namespace

void best_up(Candidates& cand, std::size_t n) {
  take_best(cand, n, [](const auto& a, const auto& b) { return a.first > b.first || (a.first == b.first && a.second < b.second); });
}

void best_low(Candidates& cand, std::size_t n) {
  take_best(cand, n, [](const auto& a, const auto& b) { return a.first < b.first || (a.first == b.first && a.second < b.second); });
}

std::vector<std::int32_t> assemble_ws(const Candidates& up, const Candidates& low, const Extremes& e, std::size_t q,
                                      std::size_t fresh, const std::vector<std::int32_t>& prev,
                                      const std::function<bool(std::int32_t)>& kept_ok,
                                      const std::function<bool(std::int32_t)>& is_free, std::vector<char>& in_ws) {
  std::vector<std::int32_t> ws;
  ws.reserve(q);
  for (const std::int32_t k : {e.i, e.j})
    if (k >= 0 && !in_ws[k] && ws.size() < q) {
      ws.push_back(k);
      in_ws[k] = 1;
    }
  std::size_t u = 0, l = 0;
  auto add_new = [&](std::size_t limit) {
    while (ws.size() < limit && (u < up.size() || l < low.size())) {
      for (const Candidates* side : {&up, &low}) {
        std::size_t& at = side == &up ? u : l;
        while (at < side->size() && in_ws[(*side)[at].second]) ++at;
        if (at < side->size() && ws.size() < limit) {
          ws.push_back((*side)[at].second);
          in_ws[ws.back()] = 1;
        }
      }
    }
  };
  add_new(fresh);
  for (const bool free_pass : {true, false})
    for (const std::int32_t k : prev) {
      if (ws.size() >= q) break;
      if (in_ws[k] || !kept_ok(k)) continue;
      if (is_free(k) != free_pass) continue;
      ws.push_back(k);
      in_ws[k] = 1;
    }
  add_new(q);
  for (const std::int32_t k : ws) in_ws[k] = 0;
  return ws;
}

namespace {

// The default case -- one class of pairs, first-order selection -- with
// the gradient update of a step and the search for the next pair in one
// pass over flat arrays. It picks the pairs extremes() picks (the first of
// equal values) and updates G by the same expression, so its result is the
// general loop's to the bit, in much less time, and a fit runs a great
// many local steps.
std::int64_t solve_first_order(State& ls, const std::vector<float>& Kws, const std::vector<double>& diag,
                               std::int64_t max_steps, double eps) {
  const std::int64_t q = static_cast<std::int64_t>(ls.y.size());
  std::vector<double> yd(q);
  std::vector<std::uint8_t> up(q), low(q);
  for (std::int64_t b = 0; b < q; ++b) {
    yd[b] = ls.y[b];
    up[b] = ls.in_up(b);
    low[b] = ls.in_low(b);
  }
  double* G = ls.G.data();
  auto scan = [&](double& gmax, std::int32_t& i, double& gmin, std::int32_t& j) {
    gmax = -std::numeric_limits<double>::infinity();
    gmin = std::numeric_limits<double>::infinity();
    i = j = -1;
    for (std::int64_t b = 0; b < q; ++b) {
      const double v = -yd[b] * G[b];
      if (up[b] && v > gmax) gmax = v, i = static_cast<std::int32_t>(b);
      if (low[b] && v < gmin) gmin = v, j = static_cast<std::int32_t>(b);
    }
  };
  double gmax, gmin, local_eps = eps;
  std::int32_t i, j;
  scan(gmax, i, gmin, j);
  std::int64_t steps = 0;
  for (; steps < max_steps; ++steps) {
    if (i < 0 || j < 0) break;
    if (steps == 0) local_eps = std::max(eps, kLocalTolerance * (gmax - gmin));
    if (gmax - gmin <= local_eps) break;
    const float* Ki = Kws.data() + i * q;
    const float* Kj = Kws.data() + j * q;
    const double t = pair_step(ls, i, j, diag[i], diag[j], Ki[j]);
    for (const std::int32_t k : {i, j}) {
      up[k] = ls.in_up(k);
      low[k] = ls.in_low(k);
    }
    gmax = -std::numeric_limits<double>::infinity();
    gmin = std::numeric_limits<double>::infinity();
    i = j = -1;
    for (std::int64_t b = 0; b < q; ++b) {
      G[b] += yd[b] * t * (double(Ki[b]) - double(Kj[b]));
      const double v = -yd[b] * G[b];
      if (up[b] && v > gmax) gmax = v, i = static_cast<std::int32_t>(b);
      if (low[b] && v < gmin) gmin = v, j = static_cast<std::int32_t>(b);
    }
  }
  return steps;
}

}  // namespace

std::int64_t solve_subproblem(State& ls, const std::vector<float>& Kws, const std::vector<double>& diag,
                              const SvmParams& params) {
  const std::int64_t q = static_cast<std::int64_t>(ls.y.size());
  if (!ls.nu && params.wss != WorkingSet::SecondOrder)
    return solve_first_order(ls, Kws, diag, std::max<std::int64_t>(1000, 10 * q), params.eps);
  const std::int64_t max_steps = std::max<std::int64_t>(1000, 10 * q);
  double local_eps = params.eps;
  std::int64_t steps = 0;
  for (; steps < max_steps; ++steps) {
    const Extremes e = working_extremes(ls);
    if (e.i < 0 || e.j < 0) break;
    if (steps == 0) local_eps = std::max(params.eps, kLocalTolerance * (e.gmax - e.gmin));
    if (e.gmax - e.gmin <= local_eps) break;
    const std::int32_t i = e.i;
    std::int32_t j = e.j;
    const float* Ki = Kws.data() + i * q;
    if (params.wss == WorkingSet::SecondOrder)
      if (const std::int64_t b = second_order_j(ls, i, e.gmax, Ki, [&](std::int64_t k) { return diag[k]; }); b >= 0)
        j = static_cast<std::int32_t>(b);
    const float* Kj = Kws.data() + j * q;
    const double t = pair_step(ls, i, j, diag[i], diag[j], Ki[j]);
    for (std::int64_t b = 0; b < q; ++b) ls.G[b] += ls.y[b] * t * (double(Ki[b]) - double(Kj[b]));
  }
  return steps;
}

}  // namespace svm_detail

using namespace svm_detail;

std::int64_t batch_ws_size(const SvmParams& params, std::int64_t n) {
  std::int64_t q = params.ws_size;
  if (q <= 0) {
    // The power of two nearest (in ratio) to the full rows the cache holds,
    // within [64, 512]: a round's rows then live in the cache's budget.
    // Larger sets mean fewer rounds but more rows computed in all, which
    // past 512 no longer pays.
    const double fit = std::max(0.0, params.cache_mb) * 1048576.0 / (4.0 * std::max<std::int64_t>(1, n));
    q = kMinWs;
    while (q * 2 <= kMaxWs && fit >= q * 1.4142) q *= 2;
  }
  return std::max<std::int64_t>(2, std::min(q, n));
}

BinarySolution solve_binary(const DualProblem& pb, const SvmParams& params, KernelRows& kr, SvmTimes& times) {
  return params.solver == Solver::Pair ? solve_pair(pb, params, kr, times) : solve_batch(pb, params, kr, times);
}

BinarySolution solve_binary(const std::vector<std::int8_t>& y, const SvmParams& params, KernelRows& kr,
                            SvmTimes& times) {
  return solve_binary(DualProblem::c_svc(y, params.C), params, kr, times);
}

DualProblem DualProblem::c_svc(const std::vector<std::int8_t>& y, double C) {
  DualProblem pb;
  pb.y = y;
  pb.p.assign(y.size(), -1.0);
  pb.Cp = pb.Cn = C;
  return pb;
}

}  // namespace accel
