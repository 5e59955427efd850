// The dual state, shrinking and reconstruction shared by both SMO solvers.
//
// Stopping: beta_low - beta_up <= eps, which is [Narasimhan14]'s
// beta_up + 2*epsilon >= beta_low with LIBSVM's -e as 2*epsilon, so the same
// -e means the same accuracy as svm-train.
//
// Shrinking removes bounded samples that cannot be part of a violating pair
// (seed eq. 10). When the shrunk problem looks solved the gradient of every
// removed sample is rebuilt from the support vectors (Algorithm 6) and
// optimality is tested on all samples, so shrinking never changes the answer
// beyond eps. The first such test happens at 10*eps ([Narasimhan14]'s 20*epsilon),
// later ones at eps.
#include "solver_state.hpp"

#include <omp.h>

#include <algorithm>
#include <limits>
#include <numeric>

namespace accel::svm_detail {
namespace {

// Bytes of kernel values one reconstruction launch may produce.
constexpr std::int64_t kReconstructBytes = 64ll << 20;

}  // namespace

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

// acc[b] = sum_a c[a] K(x_sources[a], x_targets[b]), computed in batches
// of many sources (the kernel's matrix-product path); with `complete` the
// values also extend the cache's rows of the sources to the targets.
std::size_t kernel_sums_batch(std::int64_t targets) {
  return static_cast<std::size_t>(std::max<std::int64_t>(1, kReconstructBytes / 4 / std::max<std::int64_t>(targets, 1)));
}

std::vector<double> kernel_sums(KernelRows& kr, const std::vector<std::int32_t>& sources,
                                const std::vector<double>& c, const std::vector<std::int32_t>& targets,
                                bool complete) {
  std::vector<double> acc(targets.size(), 0.0);
  add_kernel_sums(kr, sources, c, targets, complete, acc);
  return acc;
}

void add_kernel_sums(KernelRows& kr, const std::vector<std::int32_t>& sources, const std::vector<double>& c,
                     const std::vector<std::int32_t>& targets, bool complete, std::vector<double>& acc) {
  const std::int64_t m = static_cast<std::int64_t>(targets.size());
  if (m == 0) return;
  const std::size_t chunk = kernel_sums_batch(m);
  std::vector<float> out;
  std::vector<const float*> rows;
  for (std::size_t a0 = 0; a0 < sources.size(); a0 += chunk) {
    const std::size_t a1 = std::min(sources.size(), a0 + chunk);
    const std::vector<std::int32_t> q(sources.begin() + a0, sources.begin() + a1);
    out.resize(q.size() * m);
    kr.compute(q, targets, out.data());
    if (complete) kr.complete_rows(q, targets, out.data());
    rows.resize(q.size());
    for (std::size_t a = 0; a < q.size(); ++a) rows[a] = out.data() + a * m;
    accumulate_rows(rows, std::vector<double>(c.begin() + a0, c.begin() + a1), m, acc.data());
  }
}

// Algorithm 6, from the last point where every gradient was exact (the
// start, or the previous reconstruction): G_k = G_ref_k + y_k sum_j y_j
// (a_j - a_ref_j) K(x_j, x_k) for every shrunk k, over the samples j that
// moved since. The first time that is every support vector (a_ref = 0, the
// seed's form); a later one (multi heuristics) pays only for what moved
// after the previous. The values are computed in batches of many samples
// (the kernel's matrix-product path) and handed to the cache, whose rows of
// these samples then cover every sample.
void reconstruct(State& s, KernelRows& kr) {
  const std::int64_t n = static_cast<std::int64_t>(s.y.size());
  std::vector<char> is_active(n, 0);
  for (const std::int32_t k : s.active) is_active[k] = 1;
  std::vector<std::int32_t> shrunk, moved;
  std::vector<double> c;
  for (std::int64_t k = 0; k < n; ++k) {
    if (!is_active[k]) shrunk.push_back(static_cast<std::int32_t>(k));
    if (s.alpha[k] != s.alpha_ref[k]) {
      moved.push_back(static_cast<std::int32_t>(k));
      c.push_back(s.y[k] * (s.alpha[k] - s.alpha_ref[k]));
    }
  }
  if (!shrunk.empty()) {
    const std::vector<double> acc = kernel_sums(kr, moved, c, shrunk, true);
    for (std::size_t b = 0; b < shrunk.size(); ++b) s.G[shrunk[b]] = s.G_ref[shrunk[b]] + s.y[shrunk[b]] * acc[b];
  }
  s.alpha_ref = s.alpha;
  s.G_ref = s.G;
}

State::State(const DualProblem& pb)
    : y(pb.y),
      p(pb.p),
      alpha(pb.alpha0.empty() ? std::vector<double>(pb.y.size(), 0.0) : pb.alpha0),
      G(pb.p),
      Cp(pb.Cp),
      Cn(pb.Cn),
      nu(pb.nu),
      active(pb.y.size()),
      alpha_ref(alpha),
      G_ref(G) {
  std::iota(active.begin(), active.end(), 0);
}

void add_initial_gradient(State& s, KernelRows& kr) {
  std::vector<std::int32_t> support;
  std::vector<double> c;
  for (std::size_t k = 0; k < s.alpha.size(); ++k)
    if (s.alpha[k] != 0) {
      support.push_back(static_cast<std::int32_t>(k));
      c.push_back(s.y[k] * s.alpha[k]);
    }
  const std::vector<double> acc = kernel_sums(kr, support, c, s.active, false);
  for (std::size_t b = 0; b < s.active.size(); ++b) s.G[s.active[b]] += s.y[s.active[b]] * acc[b];
  s.G_ref = s.G;
}

void accumulate_rows(const std::vector<const float*>& rows, const std::vector<double>& c, std::int64_t m,
                     double* acc) {
  const std::int64_t q = static_cast<std::int64_t>(rows.size());
  const std::int64_t blocks = (m + kAccumulateBlock - 1) / kAccumulateBlock;
#pragma omp parallel for schedule(static) if (m * q >= kParallelMin)
  for (std::int64_t blk = 0; blk < blocks; ++blk) {
    const std::int64_t b0 = blk * kAccumulateBlock, nb = std::min(kAccumulateBlock, m - b0);
    double* out = acc + b0;
    for (std::int64_t a = 0; a < q; ++a) {
      if (c[a] == 0) continue;
      const float* r = rows[a] + b0;
      const double ca = c[a];
#pragma omp simd
      for (std::int64_t b = 0; b < nb; ++b) out[b] += ca * double(r[b]);
    }
  }
}

Extremes extremes(const State& s, int sign) {
  Extremes e;
  double g2max = e.gmax, g2min = e.gmin;
  const std::int64_t m = static_cast<std::int64_t>(s.active.size());
  for (std::int64_t b = 0; b < m; ++b) {
    const std::int32_t k = s.active[b];
    if (sign != 0 && s.y[k] != sign) continue;
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

Extremes working_extremes(const State& s) {
  if (!s.nu) return extremes(s);
  const Extremes pos = extremes(s, 1), neg = extremes(s, -1);
  const bool pos_ok = pos.i >= 0 && pos.j >= 0, neg_ok = neg.i >= 0 && neg.j >= 0;
  if (!pos_ok) return neg;
  if (!neg_ok) return pos;
  return pos.gmax - pos.gmin >= neg.gmax - neg.gmin ? pos : neg;
}

double pair_step(State& s, std::int32_t i, std::int32_t j, double Kii, double Kjj, double Kij) {
  const auto& y = s.y;
  double a = Kii + Kjj - 2.0 * Kij;
  if (a <= 0) a = 1e-12;
  const double ti_max = y[i] > 0 ? s.Cp - s.alpha[i] : s.alpha[i];
  const double tj_max = y[j] > 0 ? s.alpha[j] : s.Cn - s.alpha[j];
  const double t = std::min({(s.v(i) - s.v(j)) / a, ti_max, tj_max});
  // A clipped multiplier is set to its bound exactly, so the bound tests
  // of the index sets never see a value a rounding error away from C.
  s.alpha[i] = t == ti_max ? (y[i] > 0 ? s.Cp : 0.0) : s.alpha[i] + y[i] * t;
  s.alpha[j] = t == tj_max ? (y[j] > 0 ? 0.0 : s.Cn) : s.alpha[j] - y[j] * t;
  return t;
}

Control::Control(const SvmParams& params, std::int64_t n, bool loose_first, bool nu)
    : eps_(params.eps),
      h_(nu ? parse_shrink("none") : resolve_shrink(params.shrink, params.cache_mb, n)),
      n_(n),
      period_(h_.period(n)),
      counter_(period_),
      shrinking_(h_.kind != ShrinkHeuristic::Kind::None),
      loose_(shrinking_ && loose_first) {}

bool Control::shrink_due(std::int64_t steps) {
  if (!shrinking_) return false;
  counter_ -= steps;
  if (counter_ > 0) return false;
  counter_ = period_;
  return true;
}

Control::Verdict Control::verdict(const Extremes& e, bool all_active, BinaryStats& st) {
  const double tol = loose_ ? 10 * eps_ : eps_;
  if (e.i >= 0 && e.j >= 0 && e.gmax - e.gmin > tol) return Verdict::Continue;
  if (!all_active) {
    ++st.reconstructions;
    if (h_.kind == ShrinkHeuristic::Kind::Single) shrinking_ = false;
    loose_ = false;
    counter_ = period_;
    return Verdict::Reconstruct;
  }
  if (loose_) {
    loose_ = false;
    return Verdict::Continue;
  }
  return Verdict::Done;
}

bool Control::maybe_shrink(State& s, std::int64_t steps, BinaryStats& st, SvmTimes& times) {
  if (!shrink_due(steps)) return false;
  const auto t0 = clock_type::now();
  const std::size_t before = s.active.size();
  shrink(s, extremes(s));
  st.min_active = std::min<std::int64_t>(st.min_active, static_cast<std::int64_t>(s.active.size()));
  times.shrink += since(t0);
  return s.active.size() != before;
}

bool Control::done(State& s, const Extremes& e, KernelRows& kr, BinaryStats& st, SvmTimes& times, bool& restored) {
  restored = false;
  const Verdict v = verdict(e, static_cast<std::int64_t>(s.active.size()) == n_, st);
  if (v == Verdict::Reconstruct) {
    const auto t0 = clock_type::now();
    reconstruct(s, kr);
    s.active.resize(n_);
    std::iota(s.active.begin(), s.active.end(), 0);
    kr.set_active(s.active);
    times.reconstruct += since(t0);
    restored = true;
  }
  return v == Verdict::Done;
}

namespace {

// LIBSVM's calculate_rho over the samples with y == sign (0: all): the mean
// of y G over the free ones, else the middle of the bounds' interval.
double rho_of(const State& s, int sign) {
  double ub = std::numeric_limits<double>::infinity(), lb = -ub, sum_free = 0;
  std::int64_t n_free = 0;
  for (std::size_t k = 0; k < s.y.size(); ++k) {
    if (sign != 0 && s.y[k] != sign) continue;
    const double yG = s.y[k] * s.G[k];
    if (s.alpha[k] >= s.C(k)) {
      if (s.y[k] < 0) ub = std::min(ub, yG);
      else lb = std::max(lb, yG);
    } else if (s.alpha[k] <= 0) {
      if (s.y[k] > 0) ub = std::min(ub, yG);
      else lb = std::max(lb, yG);
    } else {
      ++n_free;
      sum_free += yG;
    }
  }
  return n_free > 0 ? sum_free / n_free : (ub + lb) / 2;
}

}  // namespace

void finish(const State& s, BinaryStats& st) {
  const std::int64_t n = static_cast<std::int64_t>(s.y.size());
  double obj = 0;
  st.n_sv = st.n_bsv = 0;
  for (std::int64_t k = 0; k < n; ++k) {
    obj += s.alpha[k] * (s.G[k] + s.p[k]);
    if (s.alpha[k] > 0) {
      ++st.n_sv;
      if (s.alpha[k] >= s.C(k)) ++st.n_bsv;
    }
  }
  st.obj = obj / 2;
  if (s.nu) {
    // Solver_NU: r1, r2 from each sign (for y = -1, y G = -G: LIBSVM's r2
    // is the mean of G there).
    const double r1 = rho_of(s, 1), r2 = -rho_of(s, -1);
    st.rho = (r1 - r2) / 2;
    st.r = (r1 + r2) / 2;
  } else {
    st.rho = rho_of(s, 0);
  }
}

}  // namespace accel::svm_detail
