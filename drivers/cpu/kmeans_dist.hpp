// Distances and norms of one row for the cpu k-means loops, in vector
// lanes summed at the end. GCC's `omp simd reduction` adds its lanes one
// after another through memory; per row, in the gemm path's finish (|x|^2
// for the tie bound, the winner's distance), those chains would be a large
// share of an iteration.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <vector>

namespace accel::cpu::detail {

// Elements (8 bytes each) of padding after each per-thread array: the
// threads' arrays are allocated one after another, and one thread's last
// counters would share a cache line with the next one's first sums.
constexpr std::int64_t kLinePad = 8;

typedef float v8f __attribute__((vector_size(32)));

inline float hsum(v8f v) {
  float s = 0;
  for (int q = 0; q < 8; ++q) s += v[q];
  return s;
}

// dist2 (and the Yinyang bounds' dist2_x2 / dist2_x4) keep several
// independent sums per centroid, so that no step waits on the previous
// add's latency; what limits them is then the loads (two 128-bit loads a
// cycle on the machines this was tuned on). Rounding differs between them,
// which the bounds' slack covers.

// sum_q acc[q], then the last lanes of each in turn.
inline float hsum4(v8f a0, v8f a1, v8f a2, v8f a3) { return hsum((a0 + a1) + (a2 + a3)); }

// ||x - c||^2 for one centroid, in four sums (chunks 4t .. 4t+3).
inline float dist2(const float* x, const float* c, std::int64_t d) {
  v8f a0{}, a1{}, a2{}, a3{};
  std::int64_t j = 0;
  auto step = [&](v8f& acc, std::int64_t at) {
    v8f a, b;
    std::memcpy(&a, x + at, sizeof a);
    std::memcpy(&b, c + at, sizeof b);
    const v8f t = a - b;
    acc += t * t;
  };
  for (; j + 32 <= d; j += 32) step(a0, j), step(a1, j + 8), step(a2, j + 16), step(a3, j + 24);
  for (; j + 8 <= d; j += 8) step(a0, j);
  float s = hsum4(a0, a1, a2, a3);
  for (; j < d; ++j) s += (x[j] - c[j]) * (x[j] - c[j]);
  return s;
}

typedef double v8d __attribute__((vector_size(64)));

// ||x||^2 in double (the tie bound's |x|), two sums of eight lanes.
inline double norm2_exact(const float* x, std::int64_t d) {
  v8d a0{}, a1{};
  std::int64_t j = 0;
  auto step = [&](v8d& acc, std::int64_t at) {
    v8f v;
    std::memcpy(&v, x + at, sizeof v);
    const v8d w = __builtin_convertvector(v, v8d);
    acc += w * w;
  };
  for (; j + 16 <= d; j += 16) step(a0, j), step(a1, j + 8);
  for (; j + 8 <= d; j += 8) step(a0, j);
  const v8d a = a0 + a1;
  double s = ((a[0] + a[4]) + (a[1] + a[5])) + ((a[2] + a[6]) + (a[3] + a[7]));
  for (; j < d; ++j) s += static_cast<double>(x[j]) * x[j];
  return s;
}


// -|c_k|^2 / 2 per centroid, summed in double and rounded once: its error
// then stays within the half ulp the tie bound's slack allows for it. The
// score x.c - |c|^2/2 is largest for the nearest centroid.
inline std::vector<float> half_norms(const float* c, std::int64_t k, std::int64_t d) {
  std::vector<float> half(k);
  for (std::int64_t kk = 0; kk < k; ++kk) {
    double s = 0;
    for (std::int64_t j = 0; j < d; ++j) s += static_cast<double>(c[kk * d + j]) * c[kk * d + j];
    half[kk] = static_cast<float>(-0.5 * s);
  }
  return half;
}

// A label must not depend on the order sgemm summed a score in: the two
// layouts sum x.c in different orders on some OpenBLAS kernels (Zen 4's
// do, and rows halfway between two centroids then get different labels),
// and the layout is picked by timing. Where another float score lies
// within the rounding bound of the best, the label is the
// nearest of those contenders by distance in double, the lowest index on
// an exact tie. A float score x.c - |c|^2/2 of d terms is within
// (d + 2) 2^-24 (|x| |c| + |c|^2/2) of the exact one (Higham's bound for
// dot products, one more rounding for the prefilled -|c|^2/2); twice that
// between two scores, so the exact nearest is always a contender, and every
// layout finds the same label.
struct TieBound {
  double gamma, cmax, hmax;  // 2 (d + 2) 2^-24; max |c|; max |c|^2 / 2
  TieBound(const std::vector<float>& half_norm, std::int64_t d)
      : gamma(2.0 * static_cast<double>(d + 2) * 0x1p-24), cmax(0), hmax(0) {
    for (float h : half_norm) hmax = std::max(hmax, -static_cast<double>(h));
    cmax = std::sqrt(2 * hmax);
  }
  // In double, so the bound's own rounding stays far below its margin.
  float operator()(const float* xi, std::int64_t d) const {
    return static_cast<float>(gamma * (std::sqrt(norm2_exact(xi, d)) * cmax + hmax) * (1 + 1e-6));
  }
};

// The nearest of the contenders by distance in double; the lowest index on
// a tie (contenders ascending).
inline std::int64_t nearest_exactly(const float* xi, std::int64_t d, const float* c, const std::vector<std::int32_t>& cand) {
  std::int64_t arg = cand.front();
  double best = std::numeric_limits<double>::infinity();
  for (std::int32_t kk : cand) {
    double s = 0;
    for (std::int64_t j = 0; j < d; ++j) {
      const double t = static_cast<double>(xi[j]) - c[kk * d + j];
      s += t * t;
    }
    if (s < best) best = s, arg = kk;
  }
  return arg;
}


// A row's label from its scores (best at arg, the runner-up second): when
// another score lies within the tie bound delta of the best, the nearest
// of those contenders by distance in double. score(kk): the row's kk-th.
template <class Score>
inline std::int64_t settle(const float* xi, std::int64_t d, const float* c, std::int64_t k, std::int64_t arg,
                           float best, float second, float delta, Score score, std::vector<std::int32_t>& cand) {
  if (best - second > delta) return arg;
  cand.clear();
  for (std::int64_t kk = 0; kk < k; ++kk)
    if (kk == arg || score(kk) >= best - delta) cand.push_back(static_cast<std::int32_t>(kk));
  return nearest_exactly(xi, d, c, cand);
}

}  // namespace accel::cpu::detail
