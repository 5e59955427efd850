// CPU kmeans_assign with Yinyang bounds (Ding, Zhao, Shen, Musuvathi and
// Mytkowicz, "Yinyang K-Means", ICML 2015). Lloyd's assignment gives the same
// labels with fewer distances: after the first launch each row carries an
// upper bound u on the distance to its centroid and, per group of centroids,
// a lower bound l[g] on the distance to every other centroid of the group.
// When centroids move by delta_j, u grows by delta_{label} and l[g] shrinks by
// the group's largest delta; then
//   - global filter: u <= min_g l[g] proves the label unchanged without
//     reading the row (after a few iterations most rows stop here);
//   - otherwise u is tightened to the exact distance and tested again;
//   - group filter: only groups with l[g] < u are searched, and inside them
//     the local filter skips centroid j when l_old[g] - delta_j >= u.
// The sums are not recomputed: a row that changes label moves its values
// from one cluster's sum to the other's (double), and the inertia follows
// from the sums, sum ||x - c_a||^2 = sum ||x||^2 - 2 sum_a c_a.S_a +
// sum_a n_a ||c_a||^2, so skipped rows are never read at all.
//
// Rounding: distances are computed as sum (x - c)^2 in float (no
// cancellation), stored upper bounds are raised and lower bounds lowered by
// kSlack (1e-5 relative, several times the float error of a 1000-term sum),
// and the first launch's lower bounds, which come from the sgemm scores
// (||x||^2 - 2 x.c + ||c||^2), are lowered by gemm_slack(d) (||x||^2 +
// ||c||^2), the worst-case error of that expression in float for d terms. A
// bound can therefore only be loose, never wrong; labels differ from a full
// launch at most where two centroids are equally near within float precision.
#include <cblas.h>
#include <immintrin.h>
#include <omp.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#include "accel/kernels.hpp"
#include "runtime/blas_threads.hpp"
#include "kmeans_assign.hpp"
#include "kmeans_dist.hpp"

namespace accel::cpu {
namespace {

using detail::dist2;
using detail::hsum;
using detail::v8f;

constexpr std::int64_t kMagic = 0x59696e59616e6731;  // "Yinyang1"
constexpr float kSlack = 1e-5f;
constexpr float kInf = std::numeric_limits<float>::infinity();

// Worst-case relative error of ||a||^2 + ||b||^2 - 2 a.b computed in float
// over d terms, as a multiple of ||a||^2 + ||b||^2: each of the three sums
// errs by at most gamma_d = d u / (1 - d u) of its absolute terms (u = 2^-24;
// |a.b| <= (||a||^2 + ||b||^2) / 2), plus the final additions; doubled for margin.
inline float gemm_slack(std::int64_t d) {
  const double u = std::ldexp(1.0, -24);
  const double gamma = d * u / (1 - std::min(0.5, d * u));
  return static_cast<float>(2 * (2 * gamma + 3 * u));
}

// ||x - c_q||^2 for two centroids, two sums each (even and odd chunks).
inline void dist2_x2(const float* x, const float* c0, const float* c1, std::int64_t d, float* out) {
  v8f e0{}, o0{}, e1{}, o1{};
  std::int64_t j = 0;
  auto step = [&](v8f& acc0, v8f& acc1, std::int64_t at) {
    v8f xv, v;
    std::memcpy(&xv, x + at, sizeof xv);
    std::memcpy(&v, c0 + at, sizeof v);
    v = xv - v;
    acc0 += v * v;
    std::memcpy(&v, c1 + at, sizeof v);
    v = xv - v;
    acc1 += v * v;
  };
  for (; j + 16 <= d; j += 16) step(e0, e1, j), step(o0, o1, j + 8);
  for (; j + 8 <= d; j += 8) step(e0, e1, j);
  out[0] = hsum(e0 + o0);
  out[1] = hsum(e1 + o1);
  for (std::int64_t t = j; t < d; ++t) {
    out[0] += (x[t] - c0[t]) * (x[t] - c0[t]);
    out[1] += (x[t] - c1[t]) * (x[t] - c1[t]);
  }
}

// ||x - c_q||^2 for four centroids: each slice of x is loaded once.
inline void dist2_x4(const float* x, const float* const (&cs)[4], std::int64_t d, float* out) {
  // Four named sums, not an array: `v8f acc[4] = {}` is zeroed with rep stos.
  v8f a0{}, a1{}, a2{}, a3{};
  std::int64_t j = 0;
  for (; j + 8 <= d; j += 8) {
    v8f xv;
    std::memcpy(&xv, x + j, sizeof xv);
    auto step = [&](v8f& acc, const float* cq) {
      v8f v;
      std::memcpy(&v, cq + j, sizeof v);
      v = xv - v;
      acc += v * v;
    };
    step(a0, cs[0]), step(a1, cs[1]), step(a2, cs[2]), step(a3, cs[3]);
  }
  out[0] = hsum(a0), out[1] = hsum(a1), out[2] = hsum(a2), out[3] = hsum(a3);
  for (int q = 0; q < 4; ++q)
    for (std::int64_t t = j; t < d; ++t) out[q] += (x[t] - cs[q][t]) * (x[t] - cs[q][t]);
}

// out[q] = ||x - c_{idx[q]}||^2 for nc centroids: four at a time, and a
// remainder of one or two with the kernels above (a remainder of three
// repeats its last centroid in dist2_x4, which costs no more than one dist2
// plus one dist2_x2). Scored one dist2 at a time, the remainder would wait
// on each one's adds' latency, a sizeable share of a later launch.
inline void score(const float* x, const float* c, std::int64_t d, const std::int32_t* idx, int nc, float* out) {
  int q = 0;
  for (; q + 3 <= nc; q += 4) {
    const int m = std::min(4, nc - q);
    const float* const cs[4] = {c + idx[q] * d, c + idx[q + 1] * d, c + idx[q + 2] * d,
                                c + idx[q + std::min(3, m - 1)] * d};
    float o[4];
    dist2_x4(x, cs, d, o);
    std::copy(o, o + m, out + q);
  }
  if (nc - q == 2) dist2_x2(x, c + idx[q] * d, c + idx[q + 1] * d, d, out + q);
  else if (nc - q == 1) out[q] = dist2(x, c + idx[q] * d, d);
}

// Elkan's lower bounds, stored relative to the centroids' cumulative drift
// D_j (the sum of every launch's delta_j): an entry written as b + D_j(t)
// stands for b - (D_j(now) - D_j(t)), exactly the bound that subtracting
// each launch's delta_j would have left, so a launch only reads the bounds
// and rewrites the few entries it scores, rather than reading and writing
// back all of a row's bounds every launch. Rounding: storing b + D and the
// two roundings of D err by at most 2 ulp of the stored value, so the stored
// value is lowered by 2^-20 of itself (8 ulp) before D is subtracted.
constexpr float kKeep = 1.0f - 0x1p-20f;

inline float lazy_store(float b, float drift) { return b + drift; }
// The bound a stored entry stands for (the vector loops below inline it).
inline float lazy_bound(float stored, float drift) { return stored * kKeep - drift; }

// min_j of the bounds the stored entries stand for.
inline float lazy_min(const float* stored, const float* drift, std::int64_t k) {
  v8f m = v8f{} + kInf;
  std::int64_t j = 0;
  for (; j + 8 <= k; j += 8) {
    v8f l, dl;
    std::memcpy(&l, stored + j, sizeof l);
    std::memcpy(&dl, drift + j, sizeof dl);
    l = l * kKeep - dl;
    m = m < l ? m : l;
  }
  float glob = kInf;
  for (int q = 0; q < 8; ++q) glob = std::min(glob, m[q]);
  for (; j < k; ++j) glob = std::min(glob, lazy_bound(stored[j], drift[j]));
  return glob;
}

// Indices j whose bound is below `bound`, in increasing order; returns how many.
inline int lazy_below(const float* stored, const float* drift, std::int64_t k, float bound, std::int32_t* out) {
  int nc = 0;
  std::int64_t j = 0;
#ifdef __AVX__
  const __m256 b = _mm256_set1_ps(bound), keep = _mm256_set1_ps(kKeep);
  for (; j + 8 <= k; j += 8) {
    const __m256 l = _mm256_sub_ps(_mm256_mul_ps(_mm256_loadu_ps(stored + j), keep), _mm256_loadu_ps(drift + j));
    unsigned mask = static_cast<unsigned>(_mm256_movemask_ps(_mm256_cmp_ps(l, b, _CMP_LT_OQ)));
    while (mask) {
      out[nc++] = static_cast<std::int32_t>(j + __builtin_ctz(mask));
      mask &= mask - 1;
    }
  }
#endif
  for (; j < k; ++j) {
    out[nc] = static_cast<std::int32_t>(j);
    nc += lazy_bound(stored[j], drift[j]) < bound;
  }
  return nc;
}

}  // namespace

KMeansBoundsLayout kmeans_bounds_layout(std::int64_t n, std::int64_t d, std::int64_t k) {
  KMeansBoundsLayout l;
  // One centroid per group (Elkan's bounds, the tightest) while the bounds
  // take no more memory than the rows (k <= d); otherwise the k/10 groups
  // Ding et al. use.
  l.groups = k <= d ? std::max<std::int64_t>(k, 1) : std::max<std::int64_t>((k + 9) / 10, 1);
  std::size_t at = 0;
  auto take = [&](std::size_t bytes) {
    const std::size_t here = at;
    at = (at + bytes + 63) / 64 * 64;  // every array cache-line aligned
    return here;
  };
  l.header = take(8 * sizeof(std::int64_t));
  l.sumsq = take(sizeof(double));
  l.centroids = take(k * d * sizeof(float));
  l.sums = take(k * d * sizeof(double));
  l.counts = take(k * sizeof(std::int64_t));
  l.group_of = take(k * sizeof(std::int32_t));
  l.labels = take(n * sizeof(std::int32_t));
  l.upper = take(n * sizeof(float));
  l.lower = take(n * l.groups * sizeof(float));
  l.drift = take(l.groups * sizeof(double));
  l.bytes = at;
  return l;
}

namespace {

struct State {
  KMeansBoundsLayout l;
  std::int64_t* header;
  double* sumsq;
  float* centroids;
  double* sums;
  std::int64_t* counts;
  std::int32_t* group_of;
  std::int32_t* labels;
  float* upper;
  float* lower;
  double* drift;

  State(std::byte* base, std::int64_t n, std::int64_t d, std::int64_t k) : l(kmeans_bounds_layout(n, d, k)) {
    header = reinterpret_cast<std::int64_t*>(base + l.header);
    sumsq = reinterpret_cast<double*>(base + l.sumsq);
    centroids = reinterpret_cast<float*>(base + l.centroids);
    sums = reinterpret_cast<double*>(base + l.sums);
    counts = reinterpret_cast<std::int64_t*>(base + l.counts);
    group_of = reinterpret_cast<std::int32_t*>(base + l.group_of);
    labels = reinterpret_cast<std::int32_t*>(base + l.labels);
    upper = reinterpret_cast<float*>(base + l.upper);
    lower = reinterpret_cast<float*>(base + l.lower);
    drift = reinterpret_cast<double*>(base + l.drift);
  }
  bool matches(std::int64_t n, std::int64_t d, std::int64_t k) const {
    return header[0] == kMagic && header[1] == n && header[2] == d && header[3] == k && header[4] == l.groups;
  }
};

// Groups of centroids, as the paper forms them: a few Lloyd iterations over
// the centroids themselves, so that a group's members lie close together and
// one bound describes them well.
void form_groups(const float* c, std::int64_t k, std::int64_t d, std::int64_t groups, std::int32_t* group_of) {
  if (groups == k) {  // Elkan's form: every centroid alone
    for (std::int64_t kk = 0; kk < k; ++kk) group_of[kk] = static_cast<std::int32_t>(kk);
    return;
  }
  std::vector<double> centre(groups * d);
  for (std::int64_t g = 0; g < groups; ++g)
    for (std::int64_t j = 0; j < d; ++j) centre[g * d + j] = c[(g * k / groups) * d + j];
  for (int it = 0; it < 5; ++it) {
    for (std::int64_t kk = 0; kk < k; ++kk) {
      double best = std::numeric_limits<double>::infinity();
      for (std::int64_t g = 0; g < groups; ++g) {
        double s = 0;
        for (std::int64_t j = 0; j < d; ++j) {
          const double t = c[kk * d + j] - centre[g * d + j];
          s += t * t;
        }
        if (s < best) best = s, group_of[kk] = static_cast<std::int32_t>(g);
      }
    }
    std::vector<double> next(groups * d, 0.0);
    std::vector<std::int64_t> members(groups, 0);
    for (std::int64_t kk = 0; kk < k; ++kk) {
      ++members[group_of[kk]];
      for (std::int64_t j = 0; j < d; ++j) next[group_of[kk] * d + j] += c[kk * d + j];
    }
    for (std::int64_t g = 0; g < groups; ++g)
      if (members[g] > 0)
        for (std::int64_t j = 0; j < d; ++j) centre[g * d + j] = next[g * d + j] / members[g];
  }
}

// Per-thread sums and counts (a delta during updates), merged once.
// alignas: `touched` is stored on every add; threads' Accs must not share a line.
struct alignas(64) Acc {
  std::vector<double> sums;
  std::vector<std::int64_t> counts;
  bool touched = false;
  Acc(std::int64_t k, std::int64_t d) : sums(k * d + detail::kLinePad, 0.0), counts(k + detail::kLinePad, 0) {}
  void add(const float* xi, std::int64_t d, std::int32_t label, double sign) {
    double* s = sums.data() + static_cast<std::int64_t>(label) * d;
    for (std::int64_t j = 0; j < d; ++j) s[j] += sign * xi[j];
    counts[label] += sign > 0 ? 1 : -1;
    touched = true;
  }
};

// The state's sums and counts plus every thread's (delta) accumulation.
void add_into(const std::vector<Acc>& acc, State& s, std::int64_t k, std::int64_t d) {
  for (const auto& a : acc) {
    if (!a.touched) continue;
    for (std::int64_t e = 0; e < k * d; ++e) s.sums[e] += a.sums[e];
    for (std::int64_t kk = 0; kk < k; ++kk) s.counts[kk] += a.counts[kk];
  }
}

// One point of the first launch from its score row: the label by the gemm
// path's argmax, the lower bounds per group from the whole row, the upper
// bound, the accumulation. Returns |x|^2 in double. gmin: G floats of room.
double first_bounds(const float* xi, std::int64_t d, const float* c, std::int64_t k, const float* sc,
                    const std::vector<float>& cc, float err, State& s, std::int64_t i, Acc& a,
                    std::vector<float>& gmin) {
  const std::int64_t G = s.l.groups;
  const std::int64_t arg = detail::argmax_low(sc, k);
  const double xx_exact = detail::norm2_exact(xi, d);  // in double lanes (sequential, it would be a large share of this loop)
  const float xx = static_cast<float>(xx_exact);
  float* lower = s.lower + i * G;
  // ||x - c||^2 from the score, lowered by its worst-case error.
  if (G == k) {
    const float* ccp = cc.data();
#pragma omp simd
    for (std::int64_t kk = 0; kk < k; ++kk) {
      const float d2 = xx - 2.0f * sc[kk] - err * (xx + ccp[kk]);
      lower[kk] = std::sqrt(d2 > 0.0f ? d2 : 0.0f) * (1 - kSlack);
    }
    lower[arg] = kInf;  // a group of one: nothing else in it
  } else {
    std::fill(gmin.begin(), gmin.end(), kInf);
    for (std::int64_t kk = 0; kk < k; ++kk) {
      if (kk == arg) continue;
      float& g = gmin[s.group_of[kk]];
      g = std::min(g, xx - 2.0f * sc[kk] - err * (xx + cc[kk]));
    }
    for (std::int64_t g = 0; g < G; ++g)
      lower[g] = gmin[g] == kInf ? kInf : std::sqrt(std::max(gmin[g], 0.0f)) * (1 - kSlack);
  }
  s.upper[i] = std::sqrt(dist2(xi, c + arg * d, d)) * (1 + kSlack);
  s.labels[i] = static_cast<std::int32_t>(arg);
  a.add(xi, d, static_cast<std::int32_t>(arg), 1.0);
  return xx_exact;
}

// First launch: every distance through sgemm (as the gemm path), the label
// by the same argmax, and the bounds from the whole score row.
void first_launch(const float* x, std::int64_t n, std::int64_t d, const float* c, std::int64_t k, State& s) {
  const std::int64_t G = s.l.groups;
  form_groups(c, k, d, G, s.group_of);
  std::vector<float> cc(k), half(k);
  for (std::int64_t kk = 0; kk < k; ++kk) {
    float t = 0;
    for (std::int64_t j = 0; j < d; ++j) t += c[kk * d + j] * c[kk * d + j];
    cc[kk] = t;
    half[kk] = -0.5f * t;
  }
  // One parallel region: each thread takes whole blocks (static) with a
  // one-thread sgemm, as the gemm path does (kmeans_assign.cpp: two
  // synchronisations a block cost a time slice each on shared cores).
  const int threads = omp_get_max_threads();
  const std::int64_t rows = detail::thread_block_rows(n, k, threads);
  const std::int64_t blocks = (n + rows - 1) / rows;
  const BlasThreads blas_threads(1);
  std::vector<detail::BlockScorer> scorers(threads, detail::BlockScorer(d, k, rows, half));
  std::vector<Acc> acc(threads, Acc(k, d));
  const float err = gemm_slack(d);
  // |x|^2 per thread, added in thread order: a reduction clause adds in
  // the order threads arrive, and the inertia would change in its last bits.
  std::vector<double> sumsq_of(threads, 0.0);
  constexpr std::int64_t kChunk = 64;
#pragma omp parallel num_threads(threads)
  {
    const int me = omp_get_thread_num();
    double sumsq = 0;
    Acc& a = acc[me];
    detail::BlockScorer& scorer = scorers[me];
    std::vector<float> rowbuf(kChunk * k), gmin(G);
#pragma omp for schedule(static)
    for (std::int64_t b = 0; b < blocks; ++b) {
      const std::int64_t i0 = b * rows, m = std::min(rows, n - i0);
      const bool transposed = scorer.compute(x + i0 * d, m, c);
      const float* scores = scorer.data();
      scorer.spoiled();  // read below, not refilled: the next block fills again
      for (std::int64_t q0 = 0; q0 < m; q0 += kChunk) {
        const std::int64_t qn = std::min(kChunk, m - q0);
        // A chunk's score rows, contiguous per point (copied out of a
        // transposed block in row order, so both reads stream).
        if (transposed)
          for (std::int64_t kk = 0; kk < k; ++kk)
            for (std::int64_t t = 0; t < qn; ++t) rowbuf[t * k + kk] = scores[kk * rows + q0 + t];
        for (std::int64_t t = 0; t < qn; ++t) {
          const std::int64_t i = i0 + q0 + t;
          const float* sc = transposed ? rowbuf.data() + t * k : scores + (q0 + t) * k;
          sumsq += first_bounds(x + i * d, d, c, k, sc, cc, err, s, i, a, gmin);
        }
      }
    }
    sumsq_of[me] = sumsq;
  }
  std::fill(s.sums, s.sums + k * d, 0.0);
  std::fill(s.counts, s.counts + k, 0);
  add_into(acc, s, k, d);
  double sumsq = 0;
  for (double v : sumsq_of) sumsq += v;
  *s.sumsq = sumsq;
  std::fill(s.drift, s.drift + G, 0.0);
}

// Later launches with one centroid per group (Elkan's bounds, which the
// layout picks when they fit): the bounds are one vector per row, stored
// relative to the drift (lazy_min above), minimised and compared in SIMD;
// only centroids whose own bound is below the row's tightened upper bound
// are scored, and only their entries are rewritten.
void next_launch_elkan(const float* x, std::int64_t n, std::int64_t d, const float* c, std::int64_t k, State& s,
                       const std::vector<float>& delta) {
  std::vector<float> drift(k);
  for (std::int64_t kk = 0; kk < k; ++kk) drift[kk] = static_cast<float>(s.drift[kk] += delta[kk]);
  std::vector<Acc> acc(omp_get_max_threads(), Acc(k, d));
#pragma omp parallel
  {
    Acc& a = acc[omp_get_thread_num()];
    std::vector<float> cand(k + 4);
    std::vector<std::int32_t> cand_idx(k + 4);
#pragma omp for schedule(dynamic, 512)
    for (std::int64_t i = 0; i < n; ++i) {
      float* lower = s.lower + i * k;
      const std::int32_t label = s.labels[i];
      const float u = s.upper[i] + delta[label];
      const float glob = lazy_min(lower, drift.data(), k);
      if (u <= glob) {  // no centroid can be nearer: the row is not even read
        s.upper[i] = u;
        continue;
      }
      const float* xi = x + i * d;
      const float da = std::sqrt(dist2(xi, c + static_cast<std::int64_t>(label) * d, d));
      const float ut = da * (1 + kSlack);
      const int nc = lazy_below(lower, drift.data(), k, ut, cand_idx.data());
      float best = da;
      std::int32_t best_idx = label;
      score(xi, c, d, cand_idx.data(), nc, cand.data());
      for (int q = 0; q < nc; ++q) {
        const std::int32_t j = cand_idx[q];
        const float v = std::sqrt(cand[q]);
        lower[j] = lazy_store(v * (1 - kSlack), drift[j]);
        if (v < best || (v == best && j < best_idx)) best = v, best_idx = j;
      }
      s.upper[i] = best * (1 + kSlack);
      if (best_idx != label) {
        lower[label] = lazy_store(da * (1 - kSlack), drift[label]);
        a.add(xi, d, label, -1.0);
        a.add(xi, d, best_idx, 1.0);
        s.labels[i] = best_idx;
      }
      lower[best_idx] = kInf;
    }
  }
  add_into(acc, s, k, d);
}

// How far each centroid moved since the last launch (raised slightly so
// bounds stay safe), and the most any member of each group moved.
void centroid_moves(const float* c, std::int64_t k, std::int64_t d, const State& s, std::vector<float>& delta,
                    std::vector<float>& group_delta) {
  delta.assign(k, 0.0f);
  group_delta.assign(s.l.groups, 0.0f);
  for (std::int64_t kk = 0; kk < k; ++kk) {
    double t = 0;
    for (std::int64_t j = 0; j < d; ++j) {
      const double e = static_cast<double>(c[kk * d + j]) - s.centroids[kk * d + j];
      t += e * e;
    }
    delta[kk] = static_cast<float>(std::sqrt(t)) * (1 + kSlack);
    group_delta[s.group_of[kk]] = std::max(group_delta[s.group_of[kk]], delta[kk]);
  }
}

// The centroids of each group, contiguous: group g's are
// members[start[g] .. start[g + 1]).
struct Groups {
  std::vector<std::int64_t> start;
  std::vector<std::int32_t> members;
  Groups(const State& s, std::int64_t k) : start(s.l.groups + 1, 0), members(k) {
    for (std::int64_t kk = 0; kk < k; ++kk) ++start[s.group_of[kk] + 1];
    for (std::int64_t g = 0; g < s.l.groups; ++g) start[g + 1] += start[g];
    std::vector<std::int64_t> at(start.begin(), start.end() - 1);
    for (std::int64_t kk = 0; kk < k; ++kk) members[at[s.group_of[kk]]++] = static_cast<std::int32_t>(kk);
  }
};

// One thread's scratch for the rows it filters.
struct RowScratch {
  std::vector<float> lo_old, cand, gm1, gm2;
  std::vector<std::int32_t> cand_idx, gi1;
  std::vector<char> searched;
  RowScratch(std::int64_t G, std::int64_t k) : lo_old(G), cand(k), gm1(G), gm2(G), cand_idx(k), gi1(G), searched(G) {}
};

// The local filter inside group g for a row at distance da from its centroid
// `label` (ut: that distance raised): the nearest value in the group (m1,
// whose centroid is i1; -1 for a bound) and its runner-up m2 go to the
// scratch for the group's new bound, and a nearer centroid to best.
void search_group(std::int64_t g, const float* xi, const float* c, std::int64_t d, const Groups& groups,
                  const std::vector<float>& delta, std::int32_t label, float da, float ut, RowScratch& r, float& best,
                  std::int32_t& best_idx) {
  int nc = 0;
  float m1 = kInf, m2 = kInf;
  std::int32_t i1 = -1;
  auto note = [&](float v, std::int32_t idx) {
    if (v < m1) m2 = m1, m1 = v, i1 = idx;
    else if (v < m2) m2 = v;
  };
  for (std::int64_t t = groups.start[g]; t < groups.start[g + 1]; ++t) {
    const std::int32_t j = groups.members[t];
    if (j == label) {
      note(da, j);
      continue;
    }
    const float bound = r.lo_old[g] - delta[j];
    if (bound >= ut) {
      note(bound, -1);  // provably no nearer than the current centroid
      continue;
    }
    r.cand_idx[nc++] = j;
  }
  score(xi, c, d, r.cand_idx.data(), nc, r.cand.data());
  for (int q = 0; q < nc; ++q) {
    const float v = std::sqrt(r.cand[q]);
    note(v, r.cand_idx[q]);
    if (v < best || (v == best && r.cand_idx[q] < best_idx)) best = v, best_idx = r.cand_idx[q];
  }
  r.gm1[g] = m1, r.gm2[g] = m2, r.gi1[g] = i1;
}

// Row i through the global, group and local filters; only a row that
// fails the global one is read.
void filter_row(std::int64_t i, const float* x, std::int64_t d, const float* c, const Groups& groups,
                const std::vector<float>& delta, const std::vector<float>& group_delta, State& s, RowScratch& r,
                Acc& a) {
  const std::int64_t G = s.l.groups;
  float* lower = s.lower + i * G;
  const std::int32_t label = s.labels[i];
  float u = s.upper[i] + delta[label];
  float glob = kInf;
  for (std::int64_t g = 0; g < G; ++g) {
    r.lo_old[g] = lower[g];
    lower[g] -= group_delta[g];
    glob = std::min(glob, lower[g]);
  }
  if (u <= glob) {  // global filter: the row is not even read
    s.upper[i] = u;
    return;
  }
  const float* xi = x + i * d;
  const float da = std::sqrt(dist2(xi, c + static_cast<std::int64_t>(label) * d, d));
  const float ut = da * (1 + kSlack);
  if (ut <= glob) {
    s.upper[i] = ut;
    return;
  }
  float best = da;
  std::int32_t best_idx = label;
  for (std::int64_t g = 0; g < G; ++g) {
    r.searched[g] = lower[g] < ut;
    if (r.searched[g]) search_group(g, xi, c, d, groups, delta, label, da, ut, r, best, best_idx);
  }
  // New bounds: a searched group's nearest value, or its runner-up when
  // the nearest is the row's new centroid. An unsearched group keeps its
  // bound, but if it holds the old centroid and the row left it, that
  // centroid's distance now has to be under it too.
  for (std::int64_t g = 0; g < G; ++g) {
    if (r.searched[g]) lower[g] = (r.gi1[g] == best_idx ? r.gm2[g] : r.gm1[g]) * (1 - kSlack);
    else if (best_idx != label && g == s.group_of[label]) lower[g] = std::min(lower[g], da * (1 - kSlack));
  }
  s.upper[i] = best * (1 + kSlack);
  if (best_idx != label) {
    a.add(xi, d, label, -1.0);
    a.add(xi, d, best_idx, 1.0);
    s.labels[i] = best_idx;
  }
}

// Later launches: the filters above; only rows that fail them are read.
void next_launch(const float* x, std::int64_t n, std::int64_t d, const float* c, std::int64_t k, State& s) {
  std::vector<float> delta, group_delta;
  centroid_moves(c, k, d, s, delta, group_delta);
  if (s.l.groups == k) return next_launch_elkan(x, n, d, c, k, s, delta);
  const Groups groups(s, k);
  std::vector<Acc> acc(omp_get_max_threads(), Acc(k, d));
#pragma omp parallel
  {
    Acc& a = acc[omp_get_thread_num()];
    RowScratch r(s.l.groups, k);
#pragma omp for schedule(dynamic, 256)
    for (std::int64_t i = 0; i < n; ++i) filter_row(i, x, d, c, groups, delta, group_delta, s, r, a);
  }
  add_into(acc, s, k, d);
}

}  // namespace

void kmeans_assign_bounds(const float* x, std::int64_t n, std::int64_t d, const float* c, std::int64_t k,
                          std::int32_t* labels, double* sums, std::int64_t* counts, double* inertia,
                          std::byte* state) {
  State s(state, n, d, k);
  if (!s.matches(n, d, k)) {
    first_launch(x, n, d, c, k, s);
    std::fill(s.header, s.header + 8, 0);
    s.header[1] = n, s.header[2] = d, s.header[3] = k, s.header[4] = s.l.groups;
    s.header[0] = kMagic;
  } else {
    next_launch(x, n, d, c, k, s);
  }
  std::memcpy(s.centroids, c, sizeof(float) * k * d);
  std::memcpy(labels, s.labels, sizeof(std::int32_t) * n);
  std::memcpy(sums, s.sums, sizeof(double) * k * d);
  std::memcpy(counts, s.counts, sizeof(std::int64_t) * k);
  // sum ||x - c_a||^2 = sum ||x||^2 - 2 sum_a c_a.S_a + sum_a n_a ||c_a||^2.
  double total = *s.sumsq;
  for (std::int64_t kk = 0; kk < k; ++kk) {
    double dot = 0, cc = 0;
    for (std::int64_t j = 0; j < d; ++j) {
      const double cj = c[kk * d + j];
      dot += cj * s.sums[kk * d + j];
      cc += cj * cj;
    }
    total += -2.0 * dot + static_cast<double>(s.counts[kk]) * cc;
  }
  *inertia = std::max(total, 0.0);
}

}  // namespace accel::cpu
