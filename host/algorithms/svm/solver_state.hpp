// What the pair SMO (smo.cpp) and the batched working-set solver
// (batch_solver.cpp) share: the dual state and its index sets, the maximal
// violating pair, shrinking (Narasimhan et al. 2014 eq. 10), gradient reconstruction
// (Narasimhan et al. 2014 Algorithm 6), the stopping control around them, and the
// objective and rho of the result. Internal to host/algorithms/svm.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <limits>
#include <vector>

#include "accel/svm.hpp"

namespace accel::svm_detail {

using clock_type = std::chrono::steady_clock;
inline double since(clock_type::time_point t) {
  return std::chrono::duration<double>(clock_type::now() - t).count();
}

// Below this many active samples the O(m) loops stay on one thread: a
// parallel region costs more than it saves, and idle OpenMP workers spin
// against the threads of the kernel launch that follows.
constexpr std::int64_t kParallelMin = 1 << 15;

struct State {
  const std::vector<std::int8_t>& y;
  const std::vector<double>& p;
  std::vector<double> alpha, G;
  double Cp, Cn;
  bool nu;
  std::vector<std::int32_t> active;
  // The multipliers and gradient at the last point where every gradient was
  // exact (the start, or the last reconstruction): reconstruction starts
  // from there.
  std::vector<double> alpha_ref, G_ref;

  // alpha = a0 (or 0) and G = p: the caller adds Q a0 (add_initial_gradient).
  explicit State(const DualProblem& pb);
  double C(std::int64_t k) const { return y[k] > 0 ? Cp : Cn; }
  bool in_up(std::int64_t k) const { return y[k] > 0 ? alpha[k] < Cp : alpha[k] > 0; }
  bool in_low(std::int64_t k) const { return y[k] > 0 ? alpha[k] > 0 : alpha[k] < Cn; }
  double v(std::int64_t k) const { return -y[k] * G[k]; }  // -gamma_k
};

// acc[b] += sum_a c[a] * rows[a][b] for b < m, in blocks of slots whose
// accumulators stay in L1 while the rows stream through (rows with c = 0
// are skipped).
constexpr std::int64_t kAccumulateBlock = 1024;
void accumulate_rows(const std::vector<const float*>& rows, const std::vector<double>& c, std::int64_t m,
                     double* acc);

// Samples are named by index k; kernel rows are compact over the active
// list, so a sample's value in a row is at its slot b (active[b] == k).
struct Extremes {
  double gmax = -std::numeric_limits<double>::infinity();  // max -gamma over I_up  (= -beta_up)
  double gmin = std::numeric_limits<double>::infinity();   // min -gamma over I_low (= -beta_low)
  std::int32_t i = -1, j = -1;    // samples
  std::int64_t bi = -1, bj = -1;  // their slots
  std::int32_t i2 = -1, j2 = -1;  // runners-up: likely picks of the next steps
};
// Over the active samples with y == sign (0: all of them).
Extremes extremes(const State& s, int sign = 0);
// The pair to work on: the maximal violating pair, or for the nu forms the
// one of the two signs that violates more.
Extremes working_extremes(const State& s);
// G += Q a0 for a nonzero starting point (kernel rows of its support).
void add_initial_gradient(State& s, KernelRows& kr);

// One analytic pair step: a_i += y_i t, a_j -= y_j t with t clipped to the
// box, Kij = K(x_i, x_j). Returns t (0 when the pair cannot move).
double pair_step(State& s, std::int32_t i, std::int32_t j, double Kii, double Kjj, double Kij);

// LIBSVM's second-order rule for the second index: among I_low samples that
// violate with i, the one whose pair step decreases the objective most.
// Ki is i's kernel row over the active slots, diag(k) = K(x_k, x_k).
// Returns its slot, or -1.
template <class Diag>
std::int64_t second_order_j(const State& s, std::int32_t i, double gmax, const float* Ki, Diag diag) {
  const bool same_sign = s.nu;  // the nu forms pair samples of i's sign only
  const double Kii = diag(i);
  std::int64_t best = -1;
  double best_obj = std::numeric_limits<double>::infinity();
  const std::int64_t m = static_cast<std::int64_t>(s.active.size());
  for (std::int64_t slot = 0; slot < m; ++slot) {
    const std::int32_t t = s.active[slot];
    if (!s.in_low(t) || (same_sign && s.y[t] != s.y[i])) continue;
    const double b = gmax - s.v(t);
    if (b <= 0) continue;
    double a = Kii + diag(t) - 2.0 * Ki[slot];
    if (a <= 0) a = 1e-12;
    const double obj = -(b * b) / a;
    if (obj < best_obj) {
      best_obj = obj;
      best = slot;
    }
  }
  return best;
}

// Seed eq. 10 over s.active with the extremes e: drops the samples that can
// form no violating pair.
void shrink(State& s, const Extremes& e);
// acc[b] = sum_a c[a] K(x_sources[a], x_targets[b]) in batches of many
// sources; with `complete` the values also extend the cache's rows.
std::vector<double> kernel_sums(KernelRows& kr, const std::vector<std::int32_t>& sources,
                                const std::vector<double>& c, const std::vector<std::int32_t>& targets,
                                bool complete);
// The same sums added into acc. kernel_sums computes its sources in batches
// of kernel_sums_batch(targets) (64 MiB of kernel values); a caller that
// adds them a batch at a time in order does kernel_sums' arithmetic.
void add_kernel_sums(KernelRows& kr, const std::vector<std::int32_t>& sources, const std::vector<double>& c,
                     const std::vector<std::int32_t>& targets, bool complete, std::vector<double>& acc);
std::size_t kernel_sums_batch(std::int64_t targets);
// Algorithm 6 for every sample outside s.active, from (alpha_ref, G_ref);
// then alpha_ref = alpha, G_ref = G.
void reconstruct(State& s, KernelRows& kr);

// Working-set candidates, (-gamma, sample). best_up keeps the n largest
// (I_up), best_low the n smallest (I_low), best first; ties go to the lower
// sample index, so the best of the union of any split of the samples are
// the best of all of them (the distributed solver merges members' lists).
using Candidates = std::vector<std::pair<double, std::int32_t>>;
void best_up(Candidates& cand, std::size_t n);
void best_low(Candidates& cand, std::size_t n);
// The batched solver's working set of up to q samples: the working pair e,
// then new candidates up to `fresh`, alternately from up and low, then
// samples of the previous set that may be kept (free ones first), then new
// ones again. in_ws: n zeros, left zero.
std::vector<std::int32_t> assemble_ws(const Candidates& up, const Candidates& low, const Extremes& e, std::size_t q,
                                      std::size_t fresh, const std::vector<std::int32_t>& prev,
                                      const std::function<bool(std::int32_t)>& kept_ok,
                                      const std::function<bool(std::int32_t)>& is_free, std::vector<char>& in_ws);
// SMO on a working set alone: ls is a State over its q samples, Kws their
// q x q kernel block. Returns the pair updates made.
std::int64_t solve_subproblem(State& ls, const std::vector<float>& Kws, const std::vector<double>& diag,
                              const SvmParams& params);

// Shrinking schedule and stopping test shared by both solvers. `steps` is
// the number of pair updates since the last call: the Table 3 periods count
// pair updates whether they come one per iteration or many per round.
class Control {
 public:
  // loose_first: the first optimality test of a shrinking run is at 10*eps
  // ([Narasimhan14]'s 20*epsilon), as the pair solver does it; the batched solver
  // tests at eps directly (one reconstruction fewer, the same answer).
  // Shrinking is off for the nu forms (their rule is per sign of y).
  Control(const SvmParams& params, std::int64_t n, bool loose_first, bool nu);
  const ShrinkHeuristic& heuristic() const { return h_; }
  // The schedule alone (the distributed solver applies it across members):
  // true when the shrinking rule is due after `steps` more pair updates.
  bool shrink_due(std::int64_t steps);
  // The stopping test alone: Continue, Reconstruct (the shrunk problem
  // looks solved: rebuild the shrunk gradients, restore every sample, test
  // again), or Done.
  enum class Verdict { Continue, Reconstruct, Done };
  Verdict verdict(const Extremes& e, bool all_active, BinaryStats& st);
  // Applies the shrinking rule when its period has passed; true when the
  // active set changed.
  bool maybe_shrink(State& s, std::int64_t steps, BinaryStats& st, SvmTimes& times);
  // With e the current extremes: true when the problem is solved. When the
  // shrunk problem looks solved, reconstructs the shrunk gradients,
  // restores every sample (kr.set_active) and returns false with
  // `restored` set, so the caller selects again.
  bool done(State& s, const Extremes& e, KernelRows& kr, BinaryStats& st, SvmTimes& times, bool& restored);

 private:
  double eps_;
  ShrinkHeuristic h_;
  std::int64_t n_, period_, counter_;
  bool shrinking_, loose_;
};

// Objective 1/2 a'Qa + p'a, rho (and r for the nu forms), nSV and nBSV of
// the final state, as LIBSVM's calculate_rho computes them.
void finish(const State& s, BinaryStats& st);

}  // namespace accel::svm_detail
