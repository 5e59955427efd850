// CPU kmeans_assign's loops (kmeans_assign_pick.cpp picks one per shape):
//  - direct loops: the masked loop (d <= 4) is
//    kmeans_assign_masked.cpp, the register-transposed direct loop for
//    d <= 16, 24, 32, 48, 64 and 128 kmeans_assign_wide.cpp, the rows loop
//    (d >= 16, k <= 16) kmeans_assign_rows.cpp. Distances point by point
//    with the centroids in registers/L1; no distance matrix.
//  - gemm: ||x||^2 - 2 x.c + ||c||^2 with OpenBLAS sgemm on row blocks sized to
//    stay in cache, argmin fused right after each block. ||x||^2 does not
//    change the argmin so it is left out; the inertia is then recomputed
//    exactly for the chosen centroid (d flops per row, 1/K of the gemm) so it
//    carries no cancellation error.
// Labels tie toward the lower centroid index (strict < in a forward scan).
#include "kmeans_assign.hpp"
#include "kmeans_dist.hpp"
#include "runtime/blas_threads.hpp"

#include <cblas.h>
#include <omp.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <limits>
#include <map>
#include <mutex>
#include <stdexcept>
#include <string>
#include <vector>

namespace accel::cpu {
namespace {

// Per-thread partial results, merged once per launch (no atomics in the
// loop). Sums in double (kmeans_assign_wide.cpp's WideAcc says why not
// float).
// One cache line (or more) per thread: the per-row inertia adds of two
// threads' partials would otherwise share one, and the line would go back
// and forth.
struct alignas(64) Partial {
  std::vector<double> sums;
  std::vector<std::int64_t> counts;
  double inertia = 0;
  Partial(std::int64_t k, std::int64_t d) : sums(k * d + detail::kLinePad, 0.0), counts(k + detail::kLinePad, 0) {}
};

inline void accumulate_row(const float* xi, std::int64_t d, std::int32_t label, Partial& p) {
  double* s = p.sums.data() + static_cast<std::int64_t>(label) * d;
#pragma omp simd
  for (std::int64_t j = 0; j < d; ++j) s[j] += xi[j];
  ++p.counts[label];
}

void merge(std::vector<Partial>& parts, std::int64_t k, std::int64_t d, double* sums, std::int64_t* counts,
           double* inertia) {
  std::fill(sums, sums + k * d, 0.0);
  std::fill(counts, counts + k, 0);
  double total = 0;
  for (auto& p : parts) {
    for (std::int64_t i = 0; i < k * d; ++i) sums[i] += p.sums[i];
    for (std::int64_t i = 0; i < k; ++i) counts[i] += p.counts[i];
    total += p.inertia;
  }
  *inertia = total;
}

// Which layout of a block's score matrix OpenBLAS multiplies faster, per
// (d, k, threads). Both are the same product, and which wins depends on the
// shape, the thread count and the OpenBLAS build, so it is measured, on the
// job's own blocks (LayoutPicker below) rather than on extra products: a
// separate trial would add its products to every job's first launch.
struct LayoutKey {
  std::int64_t d, k;
  int threads;
  std::int64_t rows;  // a block's rows: small calls take smaller blocks
  auto operator<=>(const LayoutKey&) const = default;
};
struct LayoutTrial {
  int blocks = 0;                     // full blocks seen so far
  double best[2] = {1e30, 1e30};      // fastest block per layout
  int decided = -1;                   // the winner, once known
};
std::mutex layout_mu;
std::map<LayoutKey, LayoutTrial> layout_trials;

// Exact distance to the chosen centroid, the label and the accumulation.
inline void finish_point(const float* xi, std::int64_t d, const float* c, std::int64_t arg, std::int32_t* label,
                         Partial& p) {
  const float exact = detail::dist2(xi, c + arg * d, d);
  *label = static_cast<std::int32_t>(arg);
  p.inertia += exact;
  accumulate_row(xi, d, static_cast<std::int32_t>(arg), p);
}

using detail::TieBound;

}  // namespace

namespace detail {

// ld: the row stride of a transposed score matrix (>= m; a short last block
// keeps a full block's stride so the prefilled rows line up).
void block_sgemm(bool transposed, const float* xb, std::int64_t m, std::int64_t d, const float* c, std::int64_t k,
                 float beta, float* score, std::int64_t ld) {
  if (transposed)  // score (k x m) += C X^T
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, static_cast<int>(k), static_cast<int>(m),
                static_cast<int>(d), 1.0f, c, static_cast<int>(d), xb, static_cast<int>(d), beta, score,
                static_cast<int>(ld));
  else  // score (m x k) += X C^T
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, static_cast<int>(m), static_cast<int>(k),
                static_cast<int>(d), 1.0f, xb, static_cast<int>(d), c, static_cast<int>(d), beta, score,
                static_cast<int>(k));
}

LayoutPicker::LayoutPicker(std::int64_t d, std::int64_t k, std::int64_t rows)
    : d_(d), k_(k), threads_(omp_get_max_threads()), rows_(rows) {}

// Full blocks 0, 2, 4 run k x rows and 1, 3 run rows x k; block 0 only
// warms up, so the winner is known after block 2 when one layout is 1.3x
// faster, else after block 4 by the faster of two blocks each. k x rows
// goes first because OpenBLAS 0.3.21 (Zen, one thread) can run rows x k at
// a fraction of its speed, call after call, until the process has run one
// k x rows product; a trial that started with rows x k would misjudge it.
bool LayoutPicker::transposed() {
  std::lock_guard lock(layout_mu);
  const LayoutTrial& t = layout_trials[LayoutKey{d_, k_, threads_, rows_}];
  current_ = t.decided >= 0 ? t.decided : (t.blocks % 2 == 0);
  return current_ == 1;
}

void LayoutPicker::record(std::int64_t m, double seconds) {
  if (m != rows_) return;  // a short block says nothing about a full one
  std::lock_guard lock(layout_mu);
  LayoutTrial& t = layout_trials[LayoutKey{d_, k_, threads_, rows_}];
  if (t.decided >= 0) return;
  if (t.blocks++ > 0) t.best[current_] = std::min(t.best[current_], seconds);
  const double lo = std::min(t.best[0], t.best[1]), hi = std::max(t.best[0], t.best[1]);
  if ((t.blocks == 3 && hi > 1.3 * lo) || t.blocks == 5) t.decided = t.best[1] < t.best[0];
}

void fill_scores(bool transposed, const std::vector<float>& half, std::int64_t cap, float* score) {
  const std::int64_t k = static_cast<std::int64_t>(half.size());
  if (transposed)
    for (std::int64_t kk = 0; kk < k; ++kk) std::fill(score + kk * cap, score + (kk + 1) * cap, half[kk]);
  else
    for (std::int64_t q = 0; q < cap; ++q) std::copy(half.begin(), half.end(), score + q * k);
}

BlockScorer::BlockScorer(std::int64_t d, std::int64_t k, std::int64_t rows, const std::vector<float>& half,
                         int layout)
    : picker_(d, k, rows), d_(d), k_(k), rows_(rows), half_(&half), layout_(layout) {}

bool BlockScorer::compute(const float* xb, std::int64_t m, const float* c) {
  if (score_.empty()) score_.resize(rows_ * k_);  // first touched by the thread that uses it
  const bool transposed = layout_ >= 0 ? layout_ == 1 : picker_.transposed();
  if (filled_ != transposed) fill_scores(transposed, *half_, rows_, score_.data());
  filled_ = transposed;
  const auto t0 = std::chrono::steady_clock::now();
  block_sgemm(transposed, xb, m, d_, c, k_, 1.0f, score_.data(), rows_);
  if (layout_ < 0) picker_.record(m, std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
  return transposed;
}

}  // namespace detail

using detail::argmax_low;

namespace {

// One block's scores (sgemm's output, `cap` the stride of the transposed
// layout) into labels and the thread's partial sums, refilling each score
// with -|c|^2/2 for the next block as it goes: the fused argmax, near-tie
// settling, exact distance and accumulation, ~1/K of the gemm's work.
void assign_block(bool transposed, float* score, std::int64_t cap, std::int64_t m, const float* xb, std::int64_t d,
                  const float* c, std::int64_t k, const std::vector<float>& half_norm, const TieBound& bound,
                  std::int32_t* labels, Partial& p, std::vector<std::int32_t>& cand) {
  if (transposed) {
    // Points in chunks: a running maximum (and the runner-up) down the k
    // rows, vectorised across the chunk's points; strict > keeps ties at
    // the lower index.
    constexpr std::int64_t kChunk = 64;
    for (std::int64_t q0 = 0; q0 < m; q0 += kChunk) {
      const std::int64_t qn = std::min(kChunk, m - q0);
      float best[kChunk], second[kChunk];
      std::int32_t arg[kChunk];
      for (std::int64_t t = 0; t < qn; ++t) {
        best[t] = score[q0 + t];
        second[t] = -std::numeric_limits<float>::infinity();
        arg[t] = 0;
      }
      for (std::int64_t kk = 1; kk < k; ++kk) {
        const float* row = score + kk * cap + q0;
        const std::int32_t kk32 = static_cast<std::int32_t>(kk);
#pragma omp simd
        for (std::int64_t t = 0; t < qn; ++t) {
          const float v = row[t];
          const bool gt = v > best[t];
          second[t] = gt ? best[t] : std::max(second[t], v);
          best[t] = gt ? v : best[t];
          arg[t] = gt ? kk32 : arg[t];
        }
      }
      for (std::int64_t t = 0; t < qn; ++t) {
        const float* xi = xb + (q0 + t) * d;
        const float* col = score + q0 + t;
        const std::int64_t a = detail::settle(xi, d, c, k, arg[t], best[t], second[t], bound(xi, d),
                                              [&](std::int64_t kk) { return col[kk * cap]; }, cand);
        finish_point(xi, d, c, a, labels + q0 + t, p);
      }
      for (std::int64_t kk = 0; kk < k; ++kk)  // ready for the next block
        std::fill_n(score + kk * cap + q0, qn, half_norm[kk]);
    }
    return;
  }
  for (std::int64_t q = 0; q < m; ++q) {
    float* g = score + q * k;
    const float* xi = xb + q * d;
    std::int64_t arg = argmax_low(g, k);
    const float top = g[arg];
    constexpr float kNone = -std::numeric_limits<float>::infinity();
    float second = kNone;
#pragma omp simd reduction(max : second)
    for (std::int64_t kk = 0; kk < k; ++kk) second = std::max(second, kk == arg ? kNone : g[kk]);
    arg = detail::settle(xi, d, c, k, arg, top, second, bound(xi, d), [&](std::int64_t kk) { return g[kk]; }, cand);
    std::copy(half_norm.begin(), half_norm.end(), g);  // ready for the next block
    finish_point(xi, d, c, arg, labels + q, p);
  }
}

}  // namespace

void kmeans_assign_gemm(const float* x, std::int64_t n, std::int64_t d, const float* c, std::int64_t k,
                        std::int32_t* labels, double* sums, std::int64_t* counts, double* inertia, int layout) {
  // argmin_k ||x||^2 - 2 x.c_k + ||c_k||^2 = argmax_k x.c_k - ||c_k||^2 / 2.
  // The block's score matrix starts as -||c_k||^2 / 2 everywhere and sgemm
  // adds x.c with beta = 1: no separate pass over the matrix for beta = 0,
  // and the argmax pass refills each score as it reads it.
  // -|c|^2/2 summed in double and rounded once: its error then stays
  // within the half ulp the tie bound's slack allows for it.
  const std::vector<float> half_norm = detail::half_norms(c, k, d);
  const TieBound bound(half_norm, d);
  // One parallel region for the whole call: each thread takes whole blocks
  // (static, so the partial sums are the same every run), runs a one-thread
  // sgemm on its block (OpenBLAS's OpenMP build runs one thread inside a
  // parallel region) and the fused argmax. A threaded sgemm and then a
  // parallel argmax per block would synchronise the threads twice a block,
  // hundreds of times an iteration: nothing on idle cores, but a scheduler
  // time slice each when busy processes share them.
  const int threads = omp_get_max_threads();
  const std::int64_t rows = detail::thread_block_rows(n, k, threads);
  const std::int64_t blocks = (n + rows - 1) / rows;
  const BlasThreads blas_threads(1);
  std::vector<detail::BlockScorer> scorers(threads, detail::BlockScorer(d, k, rows, half_norm, layout));
  std::vector<Partial> parts(threads, Partial(k, d));
#pragma omp parallel num_threads(threads)
  {
    const int me = omp_get_thread_num();
    detail::BlockScorer& scorer = scorers[me];
    std::vector<std::int32_t> cand;  // near-tie contenders of one row
#pragma omp for schedule(static)
    for (std::int64_t b = 0; b < blocks; ++b) {
      const std::int64_t i0 = b * rows, m = std::min(rows, n - i0);
      const float* xb = x + i0 * d;
      const bool transposed = scorer.compute(xb, m, c);
      assign_block(transposed, scorer.data(), rows, m, xb, d, c, k, half_norm, bound, labels + i0, parts[me], cand);
    }
  }
  merge(parts, k, d, sums, counts, inertia);
}

}  // namespace accel::cpu
