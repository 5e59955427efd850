// CPU kmeans_assign for d >= 16 with up to 16 centroids, a few rows at a
// time. There the input's read is the limit (1M x 784 floats, k = 4: 3 GB
// of rows, 25 MFLOP a thousand rows), and the gemm path falls far short of
// it: sgemm on a k = 4 block is far below its rate, and the path reads each
// row again for the exact distance and for the sums.
//
// Here each row is read from memory once. Two rows' sixteen-float chunks
// are multiplied into x.c for eight centroids at a time, |x|^2 alongside, in
// registers (one FMA per row, centroid and float, where the difference
// form needs a subtraction as well). The rows are then labelled as the
// gemm path labels them, with the same helpers (kmeans_dist.hpp): the
// best score x.c - |c|^2/2, a near tie settled by distance in double;
// sixteen rows a block are labelled a vector at a time. So the labels are
// the gemm path's, and each row's distance too (detail::dist2, as the
// gemm path takes it); only the sums' grouping differs. Each row is added
// into double sums for its label.
#include "kmeans_assign.hpp"
#include "kmeans_dist.hpp"

#include <immintrin.h>
#include <omp.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <stdexcept>
#include <string>
#include <vector>

namespace accel::cpu {
namespace {

typedef float v16f __attribute__((vector_size(64)));
typedef std::int32_t v16i __attribute__((vector_size(64)));

constexpr int kGroup = 8;            // centroids a pass over the rows
constexpr int kRows = 2;             // rows a step: each centroid chunk loaded serves both
constexpr std::int64_t kMaxK = 2 * kGroup;
constexpr std::int64_t kAheadRows = 2;  // rows prefetched ahead
inline v16f load16(const float* p) {
  v16f v;
  std::memcpy(&v, p, sizeof v);
  return v;
}

// Sums of many vectors' lanes, folded together: each fold of two vectors
// adds their halves side by side (three instructions for two vectors'
// halving), so M vectors take about 3M instructions where summing each on
// its own takes eight, a large share of a row's time at small k.
// fold<1>(a, b): lanes 0-7 a's eight partial sums, 8-15 b's; fold<2> of
// two such: four lanes each for four vectors, in order; and so on, until
// fold<4> leaves one lane for each of sixteen vectors, in order.
template <int L>
__attribute__((always_inline)) inline v16f fold(v16f a, v16f b) {
  if constexpr (L == 1)
    return __builtin_shufflevector(a, b, 0, 1, 2, 3, 4, 5, 6, 7, 16, 17, 18, 19, 20, 21, 22, 23) +
           __builtin_shufflevector(a, b, 8, 9, 10, 11, 12, 13, 14, 15, 24, 25, 26, 27, 28, 29, 30, 31);
  else if constexpr (L == 2)
    return __builtin_shufflevector(a, b, 0, 1, 2, 3, 8, 9, 10, 11, 16, 17, 18, 19, 24, 25, 26, 27) +
           __builtin_shufflevector(a, b, 4, 5, 6, 7, 12, 13, 14, 15, 20, 21, 22, 23, 28, 29, 30, 31);
  else if constexpr (L == 3)
    return __builtin_shufflevector(a, b, 0, 1, 4, 5, 8, 9, 12, 13, 16, 17, 20, 21, 24, 25, 28, 29) +
           __builtin_shufflevector(a, b, 2, 3, 6, 7, 10, 11, 14, 15, 18, 19, 22, 23, 26, 27, 30, 31);
  else
    return __builtin_shufflevector(a, b, 0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30) +
           __builtin_shufflevector(a, b, 1, 3, 5, 7, 9, 11, 13, 15, 17, 19, 21, 23, 25, 27, 29, 31);
}

// One level of folds: N vectors in v to (N + 1) / 2, a missing partner
// zero. Forced inline, as everything below: GCC otherwise called each
// level with the vectors in memory, which cost more than it saved.
#define ACCEL_ROWS_INLINE inline __attribute__((always_inline))
template <int L, int N>
ACCEL_ROWS_INLINE void fold_level(v16f* v) {
  for (int j = 0; 2 * j < N; ++j) v[j] = fold<L>(v[2 * j], 2 * j + 1 < N ? v[2 * j + 1] : v16f{});
}

// out[i] = the sum of v[i]'s sixteen lanes, i < M <= 16 (v is overwritten).
template <int M>
ACCEL_ROWS_INLINE void lane_sums(v16f* v, float* out) {
  static_assert(M >= 1 && M <= 16);
  constexpr int n1 = (M + 1) / 2, n2 = (n1 + 1) / 2, n3 = (n2 + 1) / 2;
  fold_level<1, M>(v);
  fold_level<2, n1>(v);
  fold_level<3, n2>(v);
  fold_level<4, n3>(v);
  for (int i = 0; i < M; ++i) out[i] = v[0][i];
}

// Double sums (kmeans_assign_wide.cpp's WideAcc says why not float).
// alignas: the per-row inertia adds of two threads' RowAccs would otherwise
// share a cache line, and the line would go back and forth between the
// cores.
struct alignas(64) RowAcc {
  std::vector<double> dsum;
  std::vector<std::int64_t> dcount;
  double dinertia = 0;
  RowAcc(std::int64_t k_, std::int64_t d_) : dsum(k_ * d_ + detail::kLinePad, 0.0), dcount(k_ + detail::kLinePad, 0) {}
};

// A labelled row: its distance to its centroid into the inertia, the row
// into its label's double sums.
inline void take_row(const float* xi, std::int64_t d, const float* c, std::int32_t label, RowAcc& acc,
                     double& inertia) {
  inertia += detail::dist2(xi, c + label * d, d);
  double* s = acc.dsum.data() + label * d;
#pragma omp simd
  for (std::int64_t j = 0; j < d; ++j) s[j] += xi[j];
  ++acc.dcount[label];
}

// Scores x.c_g - |c_g|^2/2 of R rows for G centroids (c: G rows of d
// floats) into out[r * rs + g * gs], and with the first group each row's
// float |x|^2 into xx[r], in one pass over the rows' chunks:
// one FMA per row, centroid and float. R x G sums stay in registers; each
// centroid chunk loaded serves R rows. The next rows' lines are fetched a
// chunk at a time by the first group (the hardware prefetcher alone leaves
// the loads of x waiting, a large share of the loop's time at large d).
template <int R, int G>
inline void scores(const float* x, std::int64_t d, const float* c, const float* half, bool first_group, float* out,
                   int rs, int gs, float* xx) {
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
  // Every sum's lanes at once: the R x G scores, then the R squares.
  constexpr int M = R * G;
  float dots[M], sqs[R];
  v16f fv[M];
  for (int r = 0; r < R; ++r)
    for (int g = 0; g < G; ++g) fv[r * G + g] = acc[r][g];
  lane_sums<M>(fv, dots);
  if (first_group) lane_sums<R>(sq, sqs);
  for (int r = 0; r < R; ++r) {
    const float* xr = x + r * d;
    for (int g = 0; g < G; ++g) {
      float s = dots[r * G + g];
      for (std::int64_t j = full * 16; j < d; ++j) s += xr[j] * c[g * d + j];
      out[r * rs + g * gs] = s + half[g];
    }
    if (first_group) {
      float s = sqs[r];
      for (std::int64_t j = full * 16; j < d; ++j) s += xr[j] * xr[j];
      xx[r] = s;
    }
  }
}

// The tie bound of sixteen rows at once, in float lanes: |x|^2 to
// TieBound's delta. A float sum S' of d squares is at least S (1 - 2^-24)^d
// of the exact S (no underflow: each square is > 2^-126 or contributes
// nothing that matters next to the bound's |c|^2/2 term), so
// S <= S' (1 + (d + 1) 2^-23); `grow` adds one 2^-23 more for the rounding
// of the scaling itself. The constants' conversions, the square root, the
// multiply-add and the last multiply round at most seven times (2^-24
// each, 4.2e-7 in all), far inside the 2e-6 of slack added to gamma here
// beyond TieBound's own 1e-6.
struct LaneBound {
  float grow, gamma, cmax, hmax;
  LaneBound(const detail::TieBound& b, std::int64_t d)
      : grow(static_cast<float>(1 + static_cast<double>(d + 2) * 0x1p-23)),
        gamma(static_cast<float>(b.gamma * (1 + 2e-6))),
        cmax(static_cast<float>(b.cmax * (1 + 1e-6))),
        hmax(static_cast<float>(b.hmax * (1 + 1e-6))) {}
  v16f operator()(v16f xx) const {
    v16f root = xx * grow;
#ifdef __AVX512F__
    root = reinterpret_cast<v16f>(_mm512_sqrt_ps(reinterpret_cast<__m512>(root)));
#else
    for (int q = 0; q < 16; ++q) root[q] = std::sqrt(root[q]);
#endif
    return gamma * (root * cmax + hmax);
  }
};

// Sixteen rows at x (`valid` of them real, the rest zero padding that
// counts nowhere): scored two at a time, eight centroids a pass (the rows
// come again from L1 for the next eight), the scores stored by centroid
// (sc[g][r]), then labelled as the gemm path labels its rows, sixteen rows
// a vector: the best score, the runner-up and the tie test in lanes, not a
// branchy scalar loop a row (a large share of a row's instructions at
// small k). A row whose runner-up lies within the bound is settled by
// distance in double.
constexpr int kBlockRows = 16;
template <int K>
inline void block_step(const float* x, int valid, std::int64_t d, const float* c, const float* half,
                       const LaneBound& lanes, std::int32_t* labels, RowAcc& acc, double& inertia,
                       std::vector<std::int32_t>& cand) {
  alignas(64) float sc[K][kBlockRows];
  alignas(64) float xx[kBlockRows];
  constexpr int G0 = K < kGroup ? K : kGroup;
  for (int r = 0; r < kBlockRows; r += kRows) {
    scores<kRows, G0>(x + r * d, d, c, half, true, &sc[0][r], 1, kBlockRows, xx + r);
    if constexpr (K > kGroup)
      scores<kRows, K - kGroup>(x + r * d, d, c + kGroup * d, half + kGroup, false, &sc[kGroup][r], 1, kBlockRows,
                                nullptr);
  }
  v16f best = load16(sc[0]), second = v16f{} - std::numeric_limits<float>::infinity();
  v16i arg{};
  for (int g = 1; g < K; ++g) {
    const v16f v = load16(sc[g]);
    const v16i gt = v > best;  // strict: ties stay with the lower index
    second = second > v ? second : (best < v ? best : v);
    arg = gt ? (v16i{} + g) : arg;
    best = gt ? v : best;
  }
  const v16f delta = lanes(load16(xx));
  const v16i clear = (best - second) > delta;
  alignas(64) std::int32_t lab[kBlockRows];
  std::memcpy(lab, &arg, sizeof lab);
  for (int r = 0; r < valid; ++r) {
    if (__builtin_expect(clear[r] == 0, 0))
      lab[r] = static_cast<std::int32_t>(detail::settle(x + r * d, d, c, K, lab[r], best[r], second[r], delta[r],
                                                        [&](std::int64_t kk) { return sc[kk][r]; }, cand));
  }
  std::memcpy(labels, lab, sizeof(std::int32_t) * valid);
  for (int r = 0; r < valid; ++r) take_row(x + r * d, d, c, lab[r], acc, inertia);
}

template <int K>
void assign_rows(const float* x, std::int64_t n, std::int64_t d, const float* c, std::int32_t* labels, double* sums,
                 std::int64_t* counts, double* inertia) {
  const std::vector<float> half = detail::half_norms(c, K, d);
  const LaneBound lanes(detail::TieBound(half, d), d);
  const int threads = omp_get_max_threads();
  std::vector<RowAcc> accs(threads, RowAcc(K, d));
#pragma omp parallel num_threads(threads)
  {
    const int t = omp_get_thread_num(), nt = omp_get_num_threads();
    RowAcc& acc = accs[t];
    std::vector<std::int32_t> cand;
    const std::int64_t i0 = n * t / nt, i1 = n * (t + 1) / nt;
    std::int64_t i = i0;
    double mine = 0;  // a local: in acc, each row's add waited on the sums' stores (they might alias)
    for (; i + kBlockRows <= i1; i += kBlockRows)
      block_step<K>(x + i * d, kBlockRows, d, c, half.data(), lanes, labels + i, acc, mine, cand);
    if (i < i1) {  // the last rows, zero-padded to a block
      std::vector<float> tail(kBlockRows * d, 0.0f);
      std::memcpy(tail.data(), x + i * d, sizeof(float) * (i1 - i) * d);
      block_step<K>(tail.data(), static_cast<int>(i1 - i), d, c, half.data(), lanes, labels + i, acc, mine, cand);
    }
    acc.dinertia = mine;
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
