#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <vector>

namespace accel::cpu {

// The CPU kmeans_assign kernel (contract in accel/kernels.hpp): one of the
// loops below by the roofline grid's rule, or timed per shape when asked
// (kmeans_assign_pick.cpp). OpenMP threads keep private sums and merge
// once at the end.
void kmeans_assign(const float* x, std::int64_t n, std::int64_t d, const float* centroids, std::int64_t k,
                   std::int32_t* labels, double* sums, std::int64_t* counts, double* inertia);

// The loops, exposed for the picker and the tests.
// d <= 4 and k * d <= 64: centroids and sums in registers, sums by masked
// adds in double lanes, sixteen points a vector with AVX-512 for k <= 8,
// else eight (lanes = 8 asks for eight; kmeans_assign_masked.cpp).
bool kmeans_assign_masked_fits(std::int64_t d, std::int64_t k);
void kmeans_assign_masked(const float* x, std::int64_t n, std::int64_t d, const float* centroids, std::int64_t k,
                          std::int32_t* labels, double* sums, std::int64_t* counts, double* inertia, int lanes = 0);
// d <= 16, 24, 32, 48, 64 or 128: sixteen points a vector, transposed in
// registers (past d = 32 the transposed points live in L1; kmeans_assign_wide.cpp).
inline bool kmeans_assign_wide_fits(std::int64_t d) {
  return (d >= 1 && d <= 16) || d == 24 || d == 32 || d == 48 || d == 64 || d == 128;
}
void kmeans_assign_wide(const float* x, std::int64_t n, std::int64_t d, const float* centroids, std::int64_t k,
                        std::int32_t* labels, double* sums, std::int64_t* counts, double* inertia);
// d >= 16 and k <= 16: each row read once, two at a time against eight
// centroids a pass, labelled sixteen rows a vector (kmeans_assign_rows.cpp).
bool kmeans_assign_rows_fits(std::int64_t d, std::int64_t k);
void kmeans_assign_rows(const float* x, std::int64_t n, std::int64_t d, const float* centroids, std::int64_t k,
                        std::int32_t* labels, double* sums, std::int64_t* counts, double* inertia);
// layout: -1 the faster of the two score layouts (timed once per shape and
// thread count), 0 rows x k, 1 k x rows.
void kmeans_assign_gemm(const float* x, std::int64_t n, std::int64_t d, const float* centroids, std::int64_t k,
                        std::int32_t* labels, double* sums, std::int64_t* counts, double* inertia, int layout = -1);

// Layout of the cpu's kmeans_assign state (KMeansAssignArgs::state), private
// to this driver. Centroids are split into `groups` groups (k of one when
// k <= d, as Elkan's algorithm keeps them; else about k/10, formed by
// clustering the first launch's centroids); each row keeps its label, an
// upper bound on the distance to its centroid and one lower bound per group
// on the distance to every other centroid of that group. sums/counts are
// the last launch's outputs, updated by the rows whose label changed.
struct KMeansBoundsLayout {
  std::int64_t groups = 1;
  // Byte offsets from the start of the state.
  std::size_t header = 0;     // int64[8]: magic, n, d, k, groups, 0...
  std::size_t sumsq = 0;      // double[1]: sum of ||x||^2
  std::size_t centroids = 0;  // float[k*d]: the previous launch's centroids
  std::size_t sums = 0;       // double[k*d]
  std::size_t counts = 0;     // int64[k]
  std::size_t group_of = 0;   // int32[k]
  std::size_t labels = 0;     // int32[n]
  std::size_t upper = 0;      // float[n]
  std::size_t lower = 0;      // float[n*groups]
  std::size_t drift = 0;      // double[groups]: cumulative movement, for bounds stored relative to it
  std::size_t bytes = 0;
};
KMeansBoundsLayout kmeans_bounds_layout(std::int64_t n, std::int64_t d, std::int64_t k);

// kmeans_assign with Yinyang bounds kept in `state` (kmeans_bounds_layout's
// bytes; a zero header starts over): kmeans_assign_bounds.cpp.
void kmeans_assign_bounds(const float* x, std::int64_t n, std::int64_t d, const float* centroids, std::int64_t k,
                          std::int32_t* labels, double* sums, std::int64_t* counts, double* inertia,
                          std::byte* state);

namespace detail {
// Shared by the gemm path and the bounds' first launch.
// score (m x k, row stride k) or, transposed, (k x m, row stride ld) += X C^T.
void block_sgemm(bool transposed, const float* xb, std::int64_t m, std::int64_t d, const float* c, std::int64_t k,
                 float beta, float* score, std::int64_t ld);
// The faster layout for (d, k, threads, rows), learnt from the blocks
// themselves: ask transposed() before each block's sgemm and record() its
// time after. The first few full blocks of a shape try both layouts (shared
// by every launch in the process); from then on the winner is kept. The
// layouts may sum a score over d in different orders (OpenBLAS does on Zen
// 4), so the gemm path settles near-ties in double to keep its labels
// independent of the winner
// (KMeansAssignLayouts.NearTiesGetTheSameLabelFromEitherLayout).
class LayoutPicker {
 public:
  LayoutPicker(std::int64_t d, std::int64_t k, std::int64_t rows);
  bool transposed();
  void record(std::int64_t m, double seconds);

 private:
  std::int64_t d_, k_;
  int threads_;
  std::int64_t rows_;
  int current_ = 0;
};
// Rows per block: the block's scores (rows x k floats) stay near 1 MiB,
// large enough for sgemm to run at full rate.
inline std::int64_t block_rows(std::int64_t k) {
  return std::clamp<std::int64_t>(262144 / std::max<std::int64_t>(k, 1), 256, 4096);
}
// Every score of a cap-row block set to half[kk] = -||c_kk||^2 / 2, the
// value sgemm adds x.c onto (beta = 1), in either layout.
void fill_scores(bool transposed, const std::vector<float>& half, std::int64_t cap, float* score);
// Rows per block when each of `threads` threads takes whole blocks in one
// parallel region: at most block_rows(k), and few enough that every thread
// gets one.
inline std::int64_t thread_block_rows(std::int64_t n, std::int64_t k, int threads) {
  return std::max<std::int64_t>(1, std::min(block_rows(k), (n + threads - 1) / threads));
}
// One thread's block scores, for the gemm path and the bounds' first
// launch: the layout the picker names (or `layout` when >= 0), the scores
// prefilled with `half` when they are not already, a one-thread sgemm timed
// for the picker. The caller either refills each score it reads (the gemm
// path) or says it did not (spoiled()).
class BlockScorer {
 public:
  BlockScorer(std::int64_t d, std::int64_t k, std::int64_t rows, const std::vector<float>& half, int layout = -1);
  // Scores of rows xb[0..m) (m <= rows) into data(); returns whether they
  // are transposed (k x rows, row stride rows) or not (m x k).
  bool compute(const float* xb, std::int64_t m, const float* c);
  float* data() { return score_.data(); }
  void spoiled() { filled_ = -1; }

 private:
  LayoutPicker picker_;
  std::int64_t d_, k_, rows_;
  const std::vector<float>* half_;
  int layout_, filled_ = -1;  // filled_: the layout the scores are prefilled in
  std::vector<float> score_;
};
// The first index of the largest of g[0..k): a vectorised max, then a scan;
// ties go to the lower index.
inline std::int64_t argmax_low(const float* g, std::int64_t k) {
  float top = -std::numeric_limits<float>::infinity();
#pragma omp simd reduction(max : top)
  for (std::int64_t kk = 0; kk < k; ++kk) top = std::max(top, g[kk]);
  std::int64_t arg = 0;
  while (arg < k - 1 && g[arg] != top) ++arg;
  return arg;
}
}  // namespace detail

}  // namespace accel::cpu
