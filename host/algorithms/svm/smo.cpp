// SMO for one binary C-SVC problem (Narasimhan et al. 2014 Algorithms 1, 3, 5, 6).
//
// Each step takes the maximal violating pair (Keerthi et al.'s modification
// 2: i_up = argmin gamma over I_up, i_low = argmax gamma over I_low), or
// LIBSVM's second-order choice of i_low, moves the two multipliers
// analytically within [0, C] keeping y'a = 0, and updates the gradient of
// every active sample from the two kernel rows: the O(active) hot loop.
//
// Stopping, shrinking and reconstruction are solver_state.cpp's; the
// batched solver (batch_solver.cpp) shares them.
#include <algorithm>
#include <cstdio>

#include "accel/interrupt.hpp"
#include "solver_state.hpp"

namespace accel {
namespace svm_detail {

// Rows worth computing in the same pass as a miss: the runners-up of this
// selection, and the first-order partner of i (second-order selection
// often returns to it).
std::vector<std::int32_t> prefetch(const Extremes& e) {
  std::vector<std::int32_t> out;
  for (const std::int32_t k : {e.j, e.i2, e.j2})
    if (k >= 0) out.push_back(k);
  return out;
}

}  // namespace svm_detail

using namespace svm_detail;

BinarySolution solve_pair(const DualProblem& pb, const SvmParams& params, KernelRows& kr, SvmTimes& times) {
  const auto t_start = clock_type::now();
  const auto& y = pb.y;
  const std::int64_t n = static_cast<std::int64_t>(y.size());
  State s(pb);
  kr.set_active(s.active);
  if (!pb.alpha0.empty()) add_initial_gradient(s, kr);
  const std::int64_t computed0 = kr.computed(), hits0 = kr.hits(), misses0 = kr.misses(), prefetched0 = kr.prefetched(),
                     used0 = kr.prefetch_used();
  Control ctl(params, n, true, pb.nu);
  const std::int64_t max_iter = std::max<std::int64_t>(10000000, n > INT32_MAX / 100 ? INT32_MAX : 100 * n);

  BinaryStats st;
  st.n = n;
  st.min_active = n;
  std::int64_t iter = 0;
  while (iter < max_iter) {
    if ((iter & 255) == 0) interruption_point();
    if (ctl.maybe_shrink(s, 1, st, times)) kr.set_active(s.active);
    auto t0 = clock_type::now();
    const Extremes e = working_extremes(s);
    times.select += since(t0);
    bool restored;
    if (ctl.done(s, e, kr, st, times, restored)) break;
    if (e.i < 0 || e.j < 0 || restored) continue;

    // Working pair and its two kernel rows.
    std::int32_t i = e.i, j = e.j;
    std::int64_t bj = e.bj;
    const float *Ki, *Kj;
    if (params.wss == WorkingSet::SecondOrder) {
      t0 = clock_type::now();
      Ki = kr.rows({i}, prefetch(e))[0];
      times.kernel += since(t0);
      t0 = clock_type::now();
      if (const std::int64_t b = second_order_j(s, i, e.gmax, Ki, [&](std::int64_t k) { return kr.diag(k); }); b >= 0) {
        bj = b;
        j = s.active[b];
      }
      times.select += since(t0);
      t0 = clock_type::now();
      Kj = kr.rows({j})[0];
      times.kernel += since(t0);
    } else {
      t0 = clock_type::now();
      const auto r = kr.rows({i, j}, prefetch(e));
      Ki = r[0];
      Kj = r[1];
      times.kernel += since(t0);
    }

    t0 = clock_type::now();
    const double t = pair_step(s, i, j, kr.diag(i), kr.diag(j), Ki[bj]);
    const std::int64_t m = static_cast<std::int64_t>(s.active.size());
    const std::int32_t* act = s.active.data();
    double* G = s.G.data();
    const std::int8_t* yy = y.data();
#pragma omp parallel for schedule(static) if (m >= kParallelMin)
    for (std::int64_t b = 0; b < m; ++b) {
      const std::int32_t k = act[b];
      G[k] += yy[k] * t * (double(Ki[b]) - double(Kj[b]));
    }
    times.update += since(t0);
    ++iter;
  }
  if (iter >= max_iter) std::fprintf(stderr, "svm: reached the iteration limit %lld\n", static_cast<long long>(max_iter));

  finish(s, st);
  st.shrink = ctl.heuristic().name;
  st.iterations = iter;
  st.rounds = iter;
  st.cache_hits = kr.hits() - hits0;
  st.prefetched = kr.prefetched() - prefetched0;
  st.prefetch_used = kr.prefetch_used() - used0;
  st.cache_misses = kr.misses() - misses0;
  st.kernel_values = kr.computed() - computed0;
  times.total += since(t_start);
  return {std::move(s.alpha), st};
}

}  // namespace accel
