// SMO for one binary C-SVC problem (seeds/001 Algorithms 1, 3, 5, 6).
//
// Each step takes the maximal violating pair (Keerthi et al.'s modification
// 2: i_up = argmin gamma over I_up, i_low = argmax gamma over I_low), or
// LIBSVM's second-order choice of i_low, moves the two multipliers
// analytically within [0, C] keeping y'a = 0, and updates the gradient of
// every active sample from the two kernel rows: the O(active) hot loop.
//
// Stopping: beta_low - beta_up <= eps, which is the seed's
// beta_up + 2*epsilon >= beta_low with LIBSVM's -e as 2*epsilon, so the same
// -e means the same accuracy as svm-train.
//
// Shrinking removes bounded samples that cannot be part of a violating pair
// (seed eq. 10). When the shrunk problem looks solved the gradient of every
// removed sample is rebuilt from the support vectors (Algorithm 6) and
// optimality is tested on all samples, so shrinking never changes the answer
// beyond eps. The first such test happens at 10*eps (the seed's 20*epsilon),
// later ones at eps.
#include <omp.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <limits>
#include <numeric>

#include "accel/svm.hpp"

namespace accel {
namespace {

using clock_type = std::chrono::steady_clock;
double since(clock_type::time_point t) { return std::chrono::duration<double>(clock_type::now() - t).count(); }

// Below this many active samples the O(m) loops stay on one thread: a
// parallel region costs more than it saves, and idle OpenMP workers spin
// against the threads of the kernel launch that follows.
constexpr std::int64_t kParallelMin = 1 << 15;
// Bytes of kernel values one reconstruction launch may produce.
constexpr std::int64_t kReconstructBytes = 64ll << 20;

struct State {
  const std::vector<std::int8_t>& y;
  std::vector<double> alpha, G;
  double C;
  std::vector<std::int32_t> active;

  bool in_up(std::int64_t k) const { return y[k] > 0 ? alpha[k] < C : alpha[k] > 0; }
  bool in_low(std::int64_t k) const { return y[k] > 0 ? alpha[k] > 0 : alpha[k] < C; }
  double v(std::int64_t k) const { return -y[k] * G[k]; }  // -gamma_k
};

// Samples are named by index k; kernel rows are compact over the active
// list, so a sample's value in a row is at its slot b (active[b] == k).
struct Extremes {
  double gmax = -std::numeric_limits<double>::infinity();  // max -gamma over I_up  (= -beta_up)
  double gmin = std::numeric_limits<double>::infinity();   // min -gamma over I_low (= -beta_low)
  std::int32_t i = -1, j = -1;    // samples
  std::int64_t bi = -1, bj = -1;  // their slots
  std::int32_t i2 = -1, j2 = -1;  // runners-up: likely picks of the next steps
};

Extremes extremes(const State& s) {
  Extremes e;
  double g2max = e.gmax, g2min = e.gmin;
  const std::int64_t m = static_cast<std::int64_t>(s.active.size());
  for (std::int64_t b = 0; b < m; ++b) {
    const std::int32_t k = s.active[b];
    const double v = s.v(k);
    if (s.in_up(k) && v > g2max) {
      if (v > e.gmax) {
        g2max = e.gmax;
        e.i2 = e.i;
        e.gmax = v;
        e.i = k;
        e.bi = b;
      } else {
        g2max = v;
        e.i2 = k;
      }
    }
    if (s.in_low(k) && v < g2min) {
      if (v < e.gmin) {
        g2min = e.gmin;
        e.j2 = e.j;
        e.gmin = v;
        e.j = k;
        e.bj = b;
      } else {
        g2min = v;
        e.j2 = k;
      }
    }
  }
  return e;
}

// LIBSVM's second-order rule for the second index: among I_low samples that
// violate with i, the one whose pair step decreases the objective most.
// Returns its slot, or -1.
std::int64_t second_order_j(const State& s, std::int32_t i, double gmax, const float* Ki, const KernelRows& kr) {
  const double Kii = kr.diag(i);
  std::int64_t best = -1;
  double best_obj = std::numeric_limits<double>::infinity();
  const std::int64_t m = static_cast<std::int64_t>(s.active.size());
  for (std::int64_t slot = 0; slot < m; ++slot) {
    const std::int32_t t = s.active[slot];
    if (!s.in_low(t)) continue;
    const double b = gmax - s.v(t);
    if (b <= 0) continue;
    double a = Kii + kr.diag(t) - 2.0 * Ki[slot];
    if (a <= 0) a = 1e-12;
    const double obj = -(b * b) / a;
    if (obj < best_obj) {
      best_obj = obj;
      best = slot;
    }
  }
  return best;
}

// Seed eq. 10, in -gamma terms: a sample only in I_low with -gamma above
// every I_up value, or only in I_up with -gamma below every I_low value, can
// form no violating pair.
void shrink(State& s, const Extremes& e) {
  std::size_t w = 0;
  for (const std::int32_t k : s.active) {
    const bool up = s.in_up(k), low = s.in_low(k);
    const double v = s.v(k);
    const bool out = (low && !up && v > e.gmax) || (up && !low && v < e.gmin);
    if (!out) s.active[w++] = k;
  }
  s.active.resize(w);
}

// Algorithm 6: gradient of every shrunk sample from all support vectors,
// G_k = y_k sum_j y_j a_j K(x_j, x_k) - 1. The values are computed in
// batches of many support vectors (the kernel's matrix-product path) and
// handed to the cache, whose rows of these samples then cover every sample.
void reconstruct(State& s, KernelRows& kr) {
  const std::int64_t n = static_cast<std::int64_t>(s.y.size());
  std::vector<char> is_active(n, 0);
  for (const std::int32_t k : s.active) is_active[k] = 1;
  std::vector<std::int32_t> shrunk, sv;
  for (std::int64_t k = 0; k < n; ++k) {
    if (!is_active[k]) shrunk.push_back(static_cast<std::int32_t>(k));
    if (s.alpha[k] > 0) sv.push_back(static_cast<std::int32_t>(k));
  }
  if (shrunk.empty()) return;
  const std::int64_t m = static_cast<std::int64_t>(shrunk.size());
  std::vector<double> acc(m, 0.0);
  const std::int64_t chunk = std::max<std::int64_t>(1, kReconstructBytes / 4 / m);
  std::vector<float> out;
  for (std::size_t a0 = 0; a0 < sv.size(); a0 += chunk) {
    const std::vector<std::int32_t> q(sv.begin() + a0, sv.begin() + std::min<std::size_t>(sv.size(), a0 + chunk));
    out.resize(q.size() * m);
    kr.compute(q, shrunk, out.data());
    kr.complete_rows(q, shrunk, out.data());
    const std::int64_t nq = static_cast<std::int64_t>(q.size());
#pragma omp parallel for schedule(static) if (m * nq >= kParallelMin)
    for (std::int64_t b = 0; b < m; ++b) {
      double sum = 0;
      for (std::int64_t a = 0; a < nq; ++a) sum += s.y[q[a]] * s.alpha[q[a]] * double(out[a * m + b]);
      acc[b] += sum;
    }
  }
  for (std::int64_t b = 0; b < m; ++b) s.G[shrunk[b]] = s.y[shrunk[b]] * acc[b] - 1.0;
}

// Rows worth computing in the same pass as a miss: the runners-up of this
// selection, and the first-order partner of i (second-order selection
// often returns to it).
std::vector<std::int32_t> prefetch(const Extremes& e) {
  std::vector<std::int32_t> out;
  for (const std::int32_t k : {e.j, e.i2, e.j2})
    if (k >= 0) out.push_back(k);
  return out;
}

}  // namespace

BinarySolution solve_binary(const std::vector<std::int8_t>& y, const SvmParams& params, KernelRows& kr,
                            SvmTimes& times) {
  const auto t_start = clock_type::now();
  const std::int64_t n = static_cast<std::int64_t>(y.size());
  State s{y, std::vector<double>(n, 0.0), std::vector<double>(n, -1.0), params.C, {}};
  s.active.resize(n);
  std::iota(s.active.begin(), s.active.end(), 0);
  kr.set_active(s.active);
  const std::int64_t hits0 = kr.hits(), misses0 = kr.misses(), prefetched0 = kr.prefetched(),
                     used0 = kr.prefetch_used();

  const ShrinkHeuristic& h = params.shrink;
  bool shrinking = h.kind != ShrinkHeuristic::Kind::None;
  const std::int64_t period = h.period(n);
  std::int64_t counter = period;
  bool loose = shrinking;  // first convergence test of a shrinking run at 10*eps
  const std::int64_t max_iter = std::max<std::int64_t>(10000000, n > INT32_MAX / 100 ? INT32_MAX : 100 * n);

  BinaryStats st;
  st.n = n;
  st.min_active = n;
  std::int64_t iter = 0;
  Extremes e;
  while (iter < max_iter) {
    if (shrinking && --counter <= 0) {
      counter = period;
      const auto t0 = clock_type::now();
      const Extremes now = extremes(s);
      const std::size_t before = s.active.size();
      shrink(s, now);
      if (s.active.size() != before) kr.set_active(s.active);
      st.min_active = std::min<std::int64_t>(st.min_active, static_cast<std::int64_t>(s.active.size()));
      times.shrink += since(t0);
    }

    auto t0 = clock_type::now();
    e = extremes(s);
    times.select += since(t0);
    const double tol = loose ? 10 * params.eps : params.eps;
    if (e.i < 0 || e.j < 0 || e.gmax - e.gmin <= tol) {
      if (static_cast<std::int64_t>(s.active.size()) < n) {
        t0 = clock_type::now();
        reconstruct(s, kr);
        s.active.resize(n);
        std::iota(s.active.begin(), s.active.end(), 0);
        kr.set_active(s.active);
        ++st.reconstructions;
        if (h.kind == ShrinkHeuristic::Kind::Single) shrinking = false;
        loose = false;
        counter = period;
        times.reconstruct += since(t0);
        continue;
      }
      if (loose) {
        loose = false;
        continue;
      }
      break;
    }

    // Working pair and its two kernel rows.
    std::int32_t i = e.i, j = e.j;
    std::int64_t bj = e.bj;
    const float *Ki, *Kj;
    if (params.wss == WorkingSet::SecondOrder) {
      t0 = clock_type::now();
      Ki = kr.rows({i}, prefetch(e))[0];
      times.kernel += since(t0);
      t0 = clock_type::now();
      if (const std::int64_t b = second_order_j(s, i, e.gmax, Ki, kr); b >= 0) {
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

    // Analytic step: a_i += y_i t, a_j -= y_j t, t clipped to the box.
    t0 = clock_type::now();
    double a = kr.diag(i) + kr.diag(j) - 2.0 * Ki[bj];
    if (a <= 0) a = 1e-12;
    const double ti_max = y[i] > 0 ? params.C - s.alpha[i] : s.alpha[i];
    const double tj_max = y[j] > 0 ? s.alpha[j] : params.C - s.alpha[j];
    const double t = std::min({(s.v(i) - s.v(j)) / a, ti_max, tj_max});
    // A clipped multiplier is set to its bound exactly, so the bound tests
    // of the index sets never see a value a rounding error away from C.
    s.alpha[i] = t == ti_max ? (y[i] > 0 ? params.C : 0.0) : s.alpha[i] + y[i] * t;
    s.alpha[j] = t == tj_max ? (y[j] > 0 ? 0.0 : params.C) : s.alpha[j] - y[j] * t;

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

  // Objective 1/2 a'Qa - e'a = 1/2 sum a_i (G_i - 1); rho from the free
  // samples, or the middle of [beta_low, beta_up] when none is free.
  double obj = 0, free_sum = 0;
  std::int64_t n_free = 0;
  for (std::int64_t k = 0; k < n; ++k) {
    obj += s.alpha[k] * (s.G[k] - 1.0);
    if (s.alpha[k] > 0) {
      ++st.n_sv;
      if (s.alpha[k] >= params.C) ++st.n_bsv;
      else {
        ++n_free;
        free_sum += y[k] * s.G[k];
      }
    }
  }
  st.obj = obj / 2;
  if (n_free > 0) {
    st.rho = free_sum / n_free;
  } else {
    const Extremes all = extremes(s);
    st.rho = (-all.gmax - all.gmin) / 2;
  }
  st.iterations = iter;
  st.cache_hits = kr.hits() - hits0;
  st.prefetched = kr.prefetched() - prefetched0;
  st.prefetch_used = kr.prefetch_used() - used0;
  st.cache_misses = kr.misses() - misses0;
  times.total += since(t_start);
  return {std::move(s.alpha), st};
}

}  // namespace accel
