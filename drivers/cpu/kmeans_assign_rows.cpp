// CPU kmeans_assign for d >= 16 with up to 16 centroids, a few rows at a
// time. There the input's read is the limit (1M x 784 floats, k = 4: 3 GB
// of rows, 25 MFLOP a thousand rows), and the gemm path ran at a quarter of
// it: sgemm on a k = 4 block is far below its rate, and the path reads each
// row again for the exact distance and for the sums.
//
// Here each row is read from memory once. Two rows' sixteen-float chunks
// are multiplied into x.c for eight centroids at a time, |x|^2 alongside, in
// registers (one FMA per row, centroid and float; the difference form it
// replaces took a subtraction as well, and its rate at k = 8 was half of
// this). The rows are then labelled as the gemm path labels them, with the
// same helpers (kmeans_dist.hpp): the best score x.c - |c|^2/2, a near tie
// settled by distance in double, the exact distance to the winner for the
// inertia. So the labels are the gemm path's, and each row's distance too;
// only the sums' grouping differs. Each row is added into double sums for
// its label.
#include "kmeans_assign.hpp"
#include "kmeans_dist.hpp"

#include <omp.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <limits>
#include <stdexcept>
#include <string>
#include <vector>

namespace accel::cpu {
namespace {

typedef float v16f __attribute__((vector_size(64)));

constexpr int kGroup = 8;            // centroids a pass over the rows
constexpr int kRows = 2;             // rows a step: each centroid chunk loaded serves both
constexpr std::int64_t kMaxK = 2 * kGroup;
constexpr std::int64_t kAheadRows = 2;  // rows prefetched ahead
inline v16f load16(const float* p) {
  v16f v;
  std::memcpy(&v, p, sizeof v);
  return v;
}

// A tree of halves: four shuffles and adds (a scalar loop over the lanes
// chained 16 adds, most of a row's time at d = 32).
inline float lanes_sum(v16f v) {
  v += __builtin_shufflevector(v, v, 8, 9, 10, 11, 12, 13, 14, 15, 0, 1, 2, 3, 4, 5, 6, 7);
  v += __builtin_shufflevector(v, v, 4, 5, 6, 7, 0, 1, 2, 3, 12, 13, 14, 15, 8, 9, 10, 11);
  v += __builtin_shufflevector(v, v, 2, 3, 0, 1, 6, 7, 4, 5, 10, 11, 8, 9, 14, 15, 12, 13);
  v += __builtin_shufflevector(v, v, 1, 0, 3, 2, 5, 4, 7, 6, 9, 8, 11, 10, 13, 12, 15, 14);
  return v[0];
}

// Double sums (kmeans_assign_wide.cpp's WideAcc says why not float).
// alignas: the per-row inertia adds of two threads' RowAccs had shared a
// cache line (1M x 64, k = 4: 47 ms an iteration; the line went back and
// forth between the cores).
struct alignas(64) RowAcc {
  std::vector<double> dsum;
  std::vector<std::int64_t> dcount;
  double dinertia = 0;
  RowAcc(std::int64_t k_, std::int64_t d_) : dsum(k_ * d_ + detail::kLinePad, 0.0), dcount(k_ + detail::kLinePad, 0) {}
};

inline void add_row(const float* xi, std::int64_t d, double* s) {
#pragma omp simd
  for (std::int64_t j = 0; j < d; ++j) s[j] += xi[j];
}

// Scores x.c_g - |c_g|^2/2 of R rows for G centroids (c: G rows of d
// floats) into out[r * stride + g], and with the first group each row's
// float |x|^2 into xx[r], in one pass over the rows' chunks:
// one FMA per row, centroid and float. R x G sums stay in registers; each
// centroid chunk loaded serves R rows. The next rows' lines are fetched a
// chunk at a time by the first group (the hardware prefetcher alone left
// the loads of x waiting: a third of the loop's time at d = 784).
template <int R, int G>
inline void scores(const float* x, std::int64_t d, const float* c, const float* half, bool first_group, float* out,
                   int stride, float* xx) {
  v16f acc[R][G], sq[R];
  for (int r = 0; r < R; ++r) {
    sq[r] = v16f{};
    for (int g = 0; g < G; ++g) acc[r][g] = v16f{};
  }
  const std::int64_t full = d / 16;
  // An address, not a pointer into x: past the last rows it lies beyond x
  // (a prefetch never faults).
  const std::uintptr_t ahead =
      reinterpret_cast<std::uintptr_t>(x) + static_cast<std::uintptr_t>(kAheadRows * R * d) * sizeof(float);
  for (std::int64_t ch = 0; ch < full; ++ch) {
    v16f xv[R];
    for (int r = 0; r < R; ++r) {
      if (first_group)
        __builtin_prefetch(reinterpret_cast<const void*>(ahead + static_cast<std::uintptr_t>(r * d + ch * 16) * 4));
      xv[r] = load16(x + r * d + ch * 16);
      if (first_group) sq[r] += xv[r] * xv[r];
    }
    for (int g = 0; g < G; ++g) {
      const v16f cv = load16(c + g * d + ch * 16);
      for (int r = 0; r < R; ++r) acc[r][g] += xv[r] * cv;
    }
  }
  for (int r = 0; r < R; ++r) {
    const float* xr = x + r * d;
    for (int g = 0; g < G; ++g) {
      float s = lanes_sum(acc[r][g]);
      for (std::int64_t j = full * 16; j < d; ++j) s += xr[j] * c[g * d + j];
      out[r * stride + g] = s + half[g];
    }
    if (first_group) {
      float s = lanes_sum(sq[r]);
      for (std::int64_t j = full * 16; j < d; ++j) s += xr[j] * xr[j];
      xx[r] = s;
    }
  }
}

// One step: R rows at x (labels: theirs) scored against all K centroids,
// eight at a time (the rows come again from L1 for the next eight), then
// each labelled as the gemm path labels its rows: the best score, a near
// tie settled by distance in double, the exact distance to the winner.
template <int R, int K>
inline void step(const float* x, std::int64_t d, const float* c, const float* half, const detail::TieBound& bound,
                 std::int32_t* labels, RowAcc& acc, std::vector<std::int32_t>& cand) {
  float sc[R][K], xx[R];
  scores<R, (K < kGroup ? K : kGroup)>(x, d, c, half, true, &sc[0][0], K, xx);
  if constexpr (K > kGroup) scores<R, K - kGroup>(x, d, c + kGroup * d, half + kGroup, false, &sc[0][kGroup], K, nullptr);
  // A float sum S' of d squares is at least S (1 - 2^-24)^d of the exact S
  // (no underflow: each square is > 2^-126 or contributes nothing that
  // matters next to the bound's |c|^2/2 term), so S <= S' / (1 - d 2^-24)
  // <= S' (1 + (d + 1) 2^-23): an upper bound of |x|^2 for the tie bound.
  const double grow = 1 + static_cast<double>(d + 1) * 0x1p-23;
  for (int r = 0; r < R; ++r) {
    const float* xi = x + r * d;
    std::int32_t arg = 0;
    float best = sc[r][0], second = -std::numeric_limits<float>::infinity();
    for (int kk = 1; kk < K; ++kk) {
      const float v = sc[r][kk];
      if (v > best) second = best, best = v, arg = kk;  // strict: ties stay with the lower index
      else second = std::max(second, v);
    }
    const float delta = bound.of_norm2(static_cast<double>(xx[r]) * grow);
    arg = static_cast<std::int32_t>(
        detail::settle(xi, d, c, K, arg, best, second, delta, [&](std::int64_t kk) { return sc[r][kk]; }, cand));
    labels[r] = arg;
    acc.dinertia += detail::dist2(xi, c + arg * d, d);
    add_row(xi, d, acc.dsum.data() + arg * d);
    ++acc.dcount[arg];
  }
}

template <int K>
void assign_rows(const float* x, std::int64_t n, std::int64_t d, const float* c, std::int32_t* labels, double* sums,
                 std::int64_t* counts, double* inertia) {
  const std::vector<float> half = detail::half_norms(c, K, d);
  const detail::TieBound bound(half, d);
  const int threads = omp_get_max_threads();
  std::vector<RowAcc> accs(threads, RowAcc(K, d));
#pragma omp parallel num_threads(threads)
  {
    const int t = omp_get_thread_num(), nt = omp_get_num_threads();
    RowAcc& acc = accs[t];
    std::vector<std::int32_t> cand;
    const std::int64_t i0 = n * t / nt, i1 = n * (t + 1) / nt;
    std::int64_t i = i0;
    for (; i + kRows <= i1; i += kRows) step<kRows, K>(x + i * d, d, c, half.data(), bound, labels + i, acc, cand);
    for (; i < i1; ++i) step<1, K>(x + i * d, d, c, half.data(), bound, labels + i, acc, cand);
  }
  std::fill(sums, sums + K * d, 0.0);
  std::fill(counts, counts + K, 0);
  double total = 0;
  for (const auto& a : accs) {  // in thread order: the same sums every run of this loop
    for (std::int64_t e = 0; e < K * d; ++e) sums[e] += a.dsum[e];
    for (std::int64_t kk = 0; kk < K; ++kk) counts[kk] += a.dcount[kk];
    total += a.dinertia;
  }
  *inertia = total;
}

}  // namespace

bool kmeans_assign_rows_fits(std::int64_t d, std::int64_t k) { return d >= 16 && k >= 1 && k <= kMaxK; }

void kmeans_assign_rows(const float* x, std::int64_t n, std::int64_t d, const float* c, std::int64_t k,
                        std::int32_t* labels, double* sums, std::int64_t* counts, double* inertia) {
  switch (k) {
#define ACCEL_ROWS_CASE(K) \
  case K: return assign_rows<K>(x, n, d, c, labels, sums, counts, inertia);
    ACCEL_ROWS_CASE(1) ACCEL_ROWS_CASE(2) ACCEL_ROWS_CASE(3) ACCEL_ROWS_CASE(4)
    ACCEL_ROWS_CASE(5) ACCEL_ROWS_CASE(6) ACCEL_ROWS_CASE(7) ACCEL_ROWS_CASE(8)
    ACCEL_ROWS_CASE(9) ACCEL_ROWS_CASE(10) ACCEL_ROWS_CASE(11) ACCEL_ROWS_CASE(12)
    ACCEL_ROWS_CASE(13) ACCEL_ROWS_CASE(14) ACCEL_ROWS_CASE(15) ACCEL_ROWS_CASE(16)
#undef ACCEL_ROWS_CASE
    default: throw std::invalid_argument("kmeans_assign_rows: k = " + std::to_string(k) + " is not 1..16");
  }
}

}  // namespace accel::cpu
