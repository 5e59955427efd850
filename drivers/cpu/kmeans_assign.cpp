// CPU kmeans_assign. Two paths, as FAISS and scikit-learn have them:
//  - direct: d <= 16, distances computed point by point with the centroids
//    held in registers/L1, vectorised across a block of points; no distance
//    matrix ever exists. Memory bound: one read of X per iteration.
//  - gemm: ||x||^2 - 2 x.c + ||c||^2 with OpenBLAS sgemm on row blocks sized to
//    stay in cache, argmin fused right after each block. ||x||^2 does not
//    change the argmin so it is left out; the inertia is then recomputed
//    exactly for the chosen centroid (d flops per row, 1/K of the gemm) so it
//    carries no cancellation error.
// Labels tie toward the lower centroid index (strict < in a forward scan).
#include "kmeans_assign.hpp"

#include <cblas.h>
#include <omp.h>

#include <algorithm>
#include <cstring>
#include <limits>
#include <vector>

namespace accel::cpu {
namespace {

// Per-thread partial results, merged once per launch (no atomics in the loop).
struct Partial {
  std::vector<double> sums;
  std::vector<std::int64_t> counts;
  double inertia = 0;
  Partial(std::int64_t k, std::int64_t d) : sums(k * d, 0.0), counts(k, 0) {}
};

inline void accumulate_row(const float* xi, std::int64_t d, std::int32_t label, Partial& p) {
  double* s = p.sums.data() + static_cast<std::int64_t>(label) * d;
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

// Points handled together by the direct path: one AVX-512 / two AVX2 vectors.
constexpr int kBlock = 16;

template <int D>
void direct_block(const float* x, std::int64_t rows, std::int64_t d_rt, const float* c, std::int64_t k,
                  std::int32_t* labels, Partial& p) {
  const std::int64_t d = D > 0 ? D : d_rt;
  alignas(64) float xs[16][kBlock];  // transposed block: xs[j][point]
  alignas(64) float best[kBlock];
  alignas(64) std::int32_t arg[kBlock];
  for (std::int64_t j = 0; j < d; ++j)
    for (int q = 0; q < kBlock; ++q) xs[j][q] = q < rows ? x[q * d + j] : 0.0f;
  for (int q = 0; q < kBlock; ++q) {
    best[q] = std::numeric_limits<float>::infinity();
    arg[q] = 0;
  }
  for (std::int64_t kk = 0; kk < k; ++kk) {
    const float* ck = c + kk * d;
    alignas(64) float dist[kBlock] = {};
    for (std::int64_t j = 0; j < d; ++j) {
      const float cj = ck[j];
#pragma omp simd
      for (int q = 0; q < kBlock; ++q) {
        const float t = xs[j][q] - cj;
        dist[q] += t * t;
      }
    }
#pragma omp simd
    for (int q = 0; q < kBlock; ++q) {
      const bool better = dist[q] < best[q];
      best[q] = better ? dist[q] : best[q];
      arg[q] = better ? static_cast<std::int32_t>(kk) : arg[q];
    }
  }
  for (std::int64_t q = 0; q < rows; ++q) {
    labels[q] = arg[q];
    p.inertia += best[q];
    accumulate_row(x + q * d, d, arg[q], p);
  }
}

using DirectFn = void (*)(const float*, std::int64_t, std::int64_t, const float*, std::int64_t, std::int32_t*,
                          Partial&);

DirectFn pick_direct(std::int64_t d) {
  switch (d) {
    case 1: return direct_block<1>;
    case 2: return direct_block<2>;
    case 3: return direct_block<3>;
    case 4: return direct_block<4>;
    case 8: return direct_block<8>;
    default: return direct_block<0>;
  }
}

}  // namespace

void kmeans_assign_direct(const float* x, std::int64_t n, std::int64_t d, const float* c, std::int64_t k,
                          std::int32_t* labels, double* sums, std::int64_t* counts, double* inertia) {
  if (d > 16) return kmeans_assign_gemm(x, n, d, c, k, labels, sums, counts, inertia);  // block holds <= 16 dims
  const DirectFn fn = pick_direct(d);
  std::vector<Partial> parts(omp_get_max_threads(), Partial(k, d));
  const std::int64_t blocks = (n + kBlock - 1) / kBlock;
#pragma omp parallel
  {
    Partial& p = parts[omp_get_thread_num()];
#pragma omp for schedule(static)
    for (std::int64_t b = 0; b < blocks; ++b) {
      const std::int64_t i0 = b * kBlock;
      fn(x + i0 * d, std::min<std::int64_t>(kBlock, n - i0), d, c, k, labels + i0, p);
    }
  }
  merge(parts, k, d, sums, counts, inertia);
}

void kmeans_assign_gemm(const float* x, std::int64_t n, std::int64_t d, const float* c, std::int64_t k,
                        std::int32_t* labels, double* sums, std::int64_t* counts, double* inertia) {
  std::vector<float> cnorm(k);
  for (std::int64_t kk = 0; kk < k; ++kk) {
    float s = 0;
    for (std::int64_t j = 0; j < d; ++j) s += c[kk * d + j] * c[kk * d + j];
    cnorm[kk] = s;
  }
  // Rows per block: the block's dot products (rows x k floats) stay near
  // 1 MiB, large enough for sgemm to run at full rate.
  const std::int64_t rows = std::clamp<std::int64_t>(262144 / std::max<std::int64_t>(k, 1), 256, 4096);
  std::vector<float> dot(std::min(rows, n) * k);
  std::vector<Partial> parts(omp_get_max_threads(), Partial(k, d));
  // sgemm runs on OpenBLAS's own threads, one call per block: the pthread
  // build serialises concurrent calls from several OpenMP threads (measured
  // here: 2 threads x 1-thread sgemm ran at 0.25-0.4x of one 2-thread sgemm).
  const int blas_threads = openblas_get_num_threads();
  openblas_set_num_threads(omp_get_max_threads());
  for (std::int64_t i0 = 0; i0 < n; i0 += rows) {
    const std::int64_t m = std::min(rows, n - i0);
    const float* xb = x + i0 * d;
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, static_cast<int>(m), static_cast<int>(k),
                static_cast<int>(d), 1.0f, xb, static_cast<int>(d), c, static_cast<int>(d), 0.0f, dot.data(),
                static_cast<int>(k));
    // Fused argmin, exact distance and accumulation: ~1/K of the gemm's work.
#pragma omp parallel
    {
      Partial& p = parts[omp_get_thread_num()];
#pragma omp for schedule(static)
      for (std::int64_t q = 0; q < m; ++q) {
        const float* g = dot.data() + q * k;
        float best = std::numeric_limits<float>::infinity();
        std::int32_t arg = 0;
        for (std::int64_t kk = 0; kk < k; ++kk) {
          const float dist = cnorm[kk] - 2.0f * g[kk];
          if (dist < best) {
            best = dist;
            arg = static_cast<std::int32_t>(kk);
          }
        }
        const float* xi = xb + q * d;
        const float* ci = c + static_cast<std::int64_t>(arg) * d;
        float exact = 0;
#pragma omp simd reduction(+ : exact)
        for (std::int64_t j = 0; j < d; ++j) {
          const float t = xi[j] - ci[j];
          exact += t * t;
        }
        labels[i0 + q] = arg;
        p.inertia += exact;
        accumulate_row(xi, d, arg, p);
      }
    }
  }
  openblas_set_num_threads(blas_threads);
  merge(parts, k, d, sums, counts, inertia);
}

void kmeans_assign(const float* x, std::int64_t n, std::int64_t d, const float* c, std::int64_t k,
                   std::int32_t* labels, double* sums, std::int64_t* counts, double* inertia) {
  // The direct loop costs ~3 flops per (point, centroid, dim) with no
  // staging; the gemm path pays a block round-trip but runs at sgemm speed.
  // Small d with few centroids is memory-bound either way: direct wins.
  if (d <= 16 && k <= 64)
    kmeans_assign_direct(x, n, d, c, k, labels, sums, counts, inertia);
  else
    kmeans_assign_gemm(x, n, d, c, k, labels, sums, counts, inertia);
}

}  // namespace accel::cpu
