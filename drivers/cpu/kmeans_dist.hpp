// Distances and norms of one row for the cpu k-means loops, in vector
// lanes summed at the end. GCC's `omp simd reduction` adds its lanes one
// after another through memory; per row, in the gemm path's finish (|x|^2
// for the tie bound, the winner's distance), those chains were half of an
// iteration at 1M x 64, K = 8.
#pragma once

#include <cstdint>
#include <cstring>

namespace accel::cpu::detail {

typedef float v8f __attribute__((vector_size(32)));

inline float hsum(v8f v) {
  float s = 0;
  for (int q = 0; q < 8; ++q) s += v[q];
  return s;
}

// The distance kernels below keep several independent sums per centroid, so
// that no step waits on the previous add's latency; what limits them is
// then the loads (two 128-bit loads a cycle on the machines this was tuned
// on). Rounding differs between them, which the bounds' slack covers.

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

}  // namespace accel::cpu::detail
