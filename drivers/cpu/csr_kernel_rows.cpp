// CPU csr_kernel_rows. Two ways to get u.v for sparse rows, both kept
// because which one wins depends on the data:
//  - merge (Narasimhan et al. 2014, Algorithm 2): walk the two sorted index lists; no
//    extra memory, cost nnz(u) + nnz(v) with a branch per step.
//  - scatter: the query rows are written once into a dense buffer of width
//    `cols` (interleaved, so one gather fetches every query's value for a
//    column); each active row then costs nnz(v) branch-free multiply-adds
//    that vectorise with gathers, and every active row is read once for all
//    queries in the group.
//  - gemm: for launches with many queries, frequent columns by sgemm on
//    dense float tiles and rare ones through an inverted index of the
//    queries (csr_kernel_rows_gemm.cpp).
// Auto times the candidates on a slice of the first launch for a matrix (one
// choice for launches with few queries, one for many) and keeps the faster.
#include "csr_kernel_rows.hpp"

#include <omp.h>
#if defined(__SSE2__)
#include <immintrin.h>
#endif
#include <cblas.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <new>
#include <mutex>
#include <string>
#include <vector>

#include "accel/log.hpp"

namespace accel::cpu {

double kernel_value(KernelType type, double dot, double sq_u, double sq_v, double gamma, double coef0, int degree) {
  switch (type) {
    case KernelType::Linear: return dot;
    case KernelType::Polynomial: {
      // Integer power by squaring, as LIBSVM computes it (degree >= 0).
      double base = gamma * dot + coef0, r = 1.0;
      for (int t = degree; t > 0; t /= 2) {
        if (t % 2) r *= base;
        base *= base;
      }
      return r;
    }
    case KernelType::Rbf: return std::exp(-gamma * std::max(0.0, sq_u + sq_v - 2.0 * dot));
    case KernelType::Sigmoid: return std::tanh(gamma * dot + coef0);
  }
  return 0.0;
}

namespace {

// Queries handled per pass over the active rows: SMO asks for one or two
// (i_up, i_low) and may add rows it expects to need next.
constexpr int kGroup = 4;

// Every path but gemm sums u.v in one order, set by v alone: the products
// (exact in double: two floats' product has 48 bits) of v's entries go to
// four accumulators in turn, k mod 4, the last len mod 4 to the first, and
// the four are added as (a0 + a1) + (a2 + a3). The merge, the scatter's
// SIMD loops and their scalar fallbacks thus agree bit for bit, whichever
// a launch picks and whichever rows a matrix holds (a distributed SVM
// member's, or all of them).
inline int lane_of(std::int64_t k, std::int64_t len) { return k < len - len % 4 ? static_cast<int>(k % 4) : 0; }

double merge_dot(const CsrView& x, std::int64_t u, std::int64_t v) {
  std::int64_t a = x.row_ptr[u], ae = x.row_ptr[u + 1];
  const std::int64_t b0 = x.row_ptr[v], be = x.row_ptr[v + 1], len = be - b0;
  double acc[4] = {0, 0, 0, 0};
  for (std::int64_t b = b0; a < ae && b < be;) {
    const std::int32_t ca = x.col_idx[a], cb = x.col_idx[b];
    if (ca == cb) {
      acc[lane_of(b - b0, len)] += double(x.values[a]) * double(x.values[b]);
      ++a;
      ++b;
    } else if (ca < cb) {
      ++a;
    } else {
      ++b;
    }
  }
  return (acc[0] + acc[1]) + (acc[2] + acc[3]);
}

struct Params {
  KernelType type;
  double gamma, coef0;
  int degree;
};

void rows_merge(const CsrView& x, const std::int32_t* queries, std::int64_t q, const std::int32_t* active,
                std::int64_t b0, std::int64_t b1, std::int64_t m, const Params& p, float* out) {
#pragma omp parallel for schedule(dynamic, 16) if ((b1 - b0) * q > 256)
  for (std::int64_t b = b0; b < b1; ++b) {
    const std::int64_t v = active[b];
    for (std::int64_t a = 0; a < q; ++a) {
      const std::int64_t u = queries[a];
      out[a * m + b] = static_cast<float>(
          kernel_value(p.type, merge_dot(x, u, v), x.sq_norms[u], x.sq_norms[v], p.gamma, p.coef0, p.degree));
    }
  }
}

// The SIMD loops below without SIMD, in their order (see lane_of).
[[maybe_unused]] inline void scalar_dot(const std::int32_t* ci, const float* v, std::int64_t len, const double* d,
                                        int lanes, double* out) {
  for (int g = 0; g < lanes; ++g) {
    double acc[4] = {0, 0, 0, 0};
    for (std::int64_t k = 0; k < len; ++k) acc[lane_of(k, len)] += double(v[k]) * d[kGroup * std::int64_t{ci[k]} + g];
    out[g] = (acc[0] + acc[1]) + (acc[2] + acc[3]);
  }
}

// u.v for up to four dense query rows interleaved in d (d[4c] .. d[4c+3])
// against one sparse row: one 32-byte load serves every query. A pass over
// the active rows is bound by reading them from memory, so the extra lanes
// are nearly free; four independent accumulators keep the FMA chain from
// limiting the loop.
inline void group_dot(const std::int32_t* ci, const float* v, std::int64_t len, const double* d, double* out) {
#if defined(__AVX2__) && defined(__FMA__)
  __m256d a0 = _mm256_setzero_pd(), a1 = _mm256_setzero_pd(), a2 = _mm256_setzero_pd(), a3 = _mm256_setzero_pd();
  std::int64_t k = 0;
  for (; k + 4 <= len; k += 4) {
    a0 = _mm256_fmadd_pd(_mm256_set1_pd(v[k]), _mm256_load_pd(d + 4 * std::int64_t{ci[k]}), a0);
    a1 = _mm256_fmadd_pd(_mm256_set1_pd(v[k + 1]), _mm256_load_pd(d + 4 * std::int64_t{ci[k + 1]}), a1);
    a2 = _mm256_fmadd_pd(_mm256_set1_pd(v[k + 2]), _mm256_load_pd(d + 4 * std::int64_t{ci[k + 2]}), a2);
    a3 = _mm256_fmadd_pd(_mm256_set1_pd(v[k + 3]), _mm256_load_pd(d + 4 * std::int64_t{ci[k + 3]}), a3);
  }
  for (; k < len; ++k) a0 = _mm256_fmadd_pd(_mm256_set1_pd(v[k]), _mm256_load_pd(d + 4 * std::int64_t{ci[k]}), a0);
  _mm256_storeu_pd(out, _mm256_add_pd(_mm256_add_pd(a0, a1), _mm256_add_pd(a2, a3)));
#else
  scalar_dot(ci, v, len, d, kGroup, out);
#endif
}

// The same for one or two queries (lanes 0 and 1): half the arithmetic of
// group_dot, for SMO's plain pair requests.
inline void pair_dot(const std::int32_t* ci, const float* v, std::int64_t len, const double* d, double* out) {
#if defined(__SSE2__)
  __m128d a0 = _mm_setzero_pd(), a1 = _mm_setzero_pd(), a2 = _mm_setzero_pd(), a3 = _mm_setzero_pd();
  std::int64_t k = 0;
  for (; k + 4 <= len; k += 4) {
    a0 = _mm_add_pd(a0, _mm_mul_pd(_mm_set1_pd(v[k]), _mm_load_pd(d + kGroup * std::int64_t{ci[k]})));
    a1 = _mm_add_pd(a1, _mm_mul_pd(_mm_set1_pd(v[k + 1]), _mm_load_pd(d + kGroup * std::int64_t{ci[k + 1]})));
    a2 = _mm_add_pd(a2, _mm_mul_pd(_mm_set1_pd(v[k + 2]), _mm_load_pd(d + kGroup * std::int64_t{ci[k + 2]})));
    a3 = _mm_add_pd(a3, _mm_mul_pd(_mm_set1_pd(v[k + 3]), _mm_load_pd(d + kGroup * std::int64_t{ci[k + 3]})));
  }
  for (; k < len; ++k)
    a0 = _mm_add_pd(a0, _mm_mul_pd(_mm_set1_pd(v[k]), _mm_load_pd(d + kGroup * std::int64_t{ci[k]})));
  _mm_storeu_pd(out, _mm_add_pd(_mm_add_pd(a0, a1), _mm_add_pd(a2, a3)));
#else
  scalar_dot(ci, v, len, d, 2, out);
#endif
}

// The dense query buffer lives as long as the calling thread (the device's
// queue thread) and is kept all-zero between launches: only the entries a
// launch scattered are cleared again, so a launch costs nothing per column.
struct AlignedFree {
  void operator()(double* p) const { std::free(p); }
};
struct DenseBuffer {
  std::unique_ptr<double[], AlignedFree> data;
  std::int64_t size = 0;
};
double* dense_buffer(std::int64_t cols) {
  thread_local DenseBuffer buf;
  if (buf.size < cols * kGroup) {
    const std::size_t bytes = (static_cast<std::size_t>(cols * kGroup) * sizeof(double) + 63) / 64 * 64;
    buf.data.reset(static_cast<double*>(std::aligned_alloc(64, bytes)));
    if (!buf.data) throw std::bad_alloc();
    std::memset(buf.data.get(), 0, bytes);
    buf.size = cols * kGroup;
  }
  return buf.data.get();
}

// One query group against rows [b0, b1), serially, with dense buffer d.
void scatter_group(const CsrView& x, const std::int32_t* queries, std::int64_t a0, int g, const std::int32_t* active,
                   std::int64_t b0, std::int64_t b1, std::int64_t m, const Params& p, float* out, double* d,
                   bool parallel) {
  for (int t = 0; t < g; ++t) {
    const std::int64_t u = queries[a0 + t];
    for (std::int64_t k = x.row_ptr[u]; k < x.row_ptr[u + 1]; ++k) d[std::int64_t{x.col_idx[k]} * kGroup + t] = x.values[k];
  }
#pragma omp parallel for schedule(dynamic, 64) if (parallel && b1 - b0 > 256)
  for (std::int64_t b = b0; b < b1; ++b) {
    const std::int64_t v = active[b];
    const std::int64_t lo = x.row_ptr[v], hi = x.row_ptr[v + 1];
    double dots[kGroup];
    if (g <= 2)
      pair_dot(x.col_idx + lo, x.values + lo, hi - lo, d, dots);
    else
      group_dot(x.col_idx + lo, x.values + lo, hi - lo, d, dots);
    for (int t = 0; t < g; ++t) {
      const std::int64_t u = queries[a0 + t];
      out[(a0 + t) * m + b] = static_cast<float>(
          kernel_value(p.type, dots[t], x.sq_norms[u], x.sq_norms[v], p.gamma, p.coef0, p.degree));
    }
  }
  for (int t = 0; t < g; ++t) {
    const std::int64_t u = queries[a0 + t];
    for (std::int64_t k = x.row_ptr[u]; k < x.row_ptr[u + 1]; ++k) d[std::int64_t{x.col_idx[k]} * kGroup + t] = 0.0;
  }
}

// Few queries (SMO asks for two): threads split the rows of each group.
// Many queries (prediction, gradient reconstruction): threads take whole
// query groups, each with its own dense buffer, in one parallel region, so
// there is no barrier per group.
void rows_scatter(const CsrView& x, const std::int32_t* queries, std::int64_t q, const std::int32_t* active,
                  std::int64_t b0, std::int64_t b1, std::int64_t m, const Params& p, float* out) {
  const std::int64_t groups = (q + kGroup - 1) / kGroup;
  if (groups < 4 * omp_get_max_threads()) {
    double* d = dense_buffer(x.cols);
    for (std::int64_t a0 = 0; a0 < q; a0 += kGroup)
      scatter_group(x, queries, a0, static_cast<int>(std::min<std::int64_t>(kGroup, q - a0)), active, b0, b1, m, p,
                    out, d, true);
    return;
  }
#pragma omp parallel
  {
    double* d = dense_buffer(x.cols);  // thread_local: one per OpenMP thread, kept zero
#pragma omp for schedule(dynamic, 1)
    for (std::int64_t gi = 0; gi < groups; ++gi) {
      const std::int64_t a0 = gi * kGroup;
      scatter_group(x, queries, a0, static_cast<int>(std::min<std::int64_t>(kGroup, q - a0)), active, b0, b1, m, p,
                    out, d, false);
    }
  }
}

// Queries from which a launch counts as batched: the gemm path is a
// candidate, and the choice of path is made separately from the pair SMO's
// two-query launches (a batched round's few missing rows already win with
// sgemm from about 8).
constexpr std::int64_t kBatchQueries = 8;
// Per-matrix choice of path, keyed by the matrix's storage and shape, and by
// whether the launch is batched.
struct MatrixKey {
  const void* values;
  std::int64_t n, nnz, cols;
  bool batched;
  auto operator<=>(const MatrixKey&) const = default;
};
std::mutex choice_mu;
std::map<MatrixKey, CsrDotPath> choices;

// Buffers wider than this are not worth scattering into (cache misses on
// every gather), whatever a short measurement says.
constexpr std::int64_t kMaxScatterCols = std::int64_t{1} << 24;

// ACCEL_CSR_DOT names the path every Auto launch takes instead of timing
// one. merge or scatter gives the same values whichever rows a matrix holds
// (lane_of): a distributed SVM's model is then single-node's bit for bit,
// where gemm's sgemm rounds by tile and the timed choice may differ between
// members and between runs.
CsrDotPath env_path() {
  static const CsrDotPath path = [] {
    const char* e = std::getenv("ACCEL_CSR_DOT");
    const std::string v = e ? e : "";
    if (v.empty() || v == "auto") return CsrDotPath::Auto;
    if (v == "merge") return CsrDotPath::Merge;
    if (v == "scatter") return CsrDotPath::Scatter;
    if (v == "gemm") return CsrDotPath::Gemm;
    log::warn("accel cpu") << "ACCEL_CSR_DOT=" << v << " is not auto, merge, scatter or gemm: ignored";
    return CsrDotPath::Auto;
  }();
  return path;
}

}  // namespace

void csr_kernel_rows(const CsrView& x, const std::int32_t* queries, std::int64_t q, const std::int32_t* active,
                     std::int64_t m, KernelType type, double gamma, double coef0, int degree, float* out,
                     CsrDotPath path, bool exact) {
  const Params p{type, gamma, coef0, degree};
  if (q <= 0 || m <= 0) return;
  if (path == CsrDotPath::Auto) path = env_path();
  if (x.cols > kMaxScatterCols) path = CsrDotPath::Merge;
  const bool batched = q >= kBatchQueries;
  const bool gemm_ok = batched && path != CsrDotPath::Merge;
  if (path == CsrDotPath::Auto) {
    // A matrix the runtime keeps (x.owner) is one matrix at its address
    // even as rows behind it change (a distributed SVM member's guest rows,
    // each round): it keeps its choice instead of timing again.
    const MatrixKey key{x.values, x.owner ? -1 : x.n, x.owner ? -1 : x.row_ptr[x.n], x.cols, batched};
    {
      std::lock_guard lock(choice_mu);
      if (auto it = choices.find(key); it != choices.end()) path = it->second;
    }
    if (path == CsrDotPath::Auto && gemm_ok && gemm_written_out(x)) path = CsrDotPath::Gemm;
    if (path == CsrDotPath::Auto) {
      // Time the candidates on a slice of the queries and rows (a launch may
      // carry thousands of queries: prediction), the faster of two repeats
      // each so a preemption does not decide it; the launch is then computed
      // in full with the winner.
      const std::int64_t slice = std::min<std::int64_t>(m, batched ? 1024 : 2048);
      const std::int64_t tq = std::min<std::int64_t>(q, batched ? 64 : kGroup);
      using clock = std::chrono::steady_clock;
      auto time = [&](auto&& fn) {
        double best = 1e30;
        for (int r = 0; r < 2; ++r) {
          const auto t0 = clock::now();
          fn();
          best = std::min(best, std::chrono::duration<double>(clock::now() - t0).count());
        }
        return best;
      };
      // Written at stride m into out's first rows: overwritten below. With
      // many queries over a moderate width the contest is scatter against
      // gemm (the merge loses to scatter whenever a dense row fits in cache).
      if (gemm_ok) {
        const double t_scatter = time([&] { rows_scatter(x, queries, tq, active, 0, slice, m, p, out); });
        const double t_gemm = time([&] { csr_rows_gemm<float>(x, queries, tq, active, 0, slice, m, p.type, p.gamma, p.coef0, p.degree, out); });
        path = t_gemm <= t_scatter ? CsrDotPath::Gemm : CsrDotPath::Scatter;
      } else {
        const double t_merge = time([&] { rows_merge(x, queries, tq, active, 0, slice, m, p, out); });
        const double t_scatter = time([&] { rows_scatter(x, queries, tq, active, 0, slice, m, p, out); });
        path = t_scatter <= t_merge ? CsrDotPath::Scatter : CsrDotPath::Merge;
      }
      if (slice >= 256) {  // too small a slice says nothing
        std::lock_guard lock(choice_mu);
        choices[key] = path;
      }
    }
  }
  if (path == CsrDotPath::Merge)
    rows_merge(x, queries, q, active, 0, m, m, p, out);
  else if (path == CsrDotPath::Gemm)
    if (exact)
      csr_rows_gemm<double>(x, queries, q, active, 0, m, m, p.type, p.gamma, p.coef0, p.degree, out);
    else
      csr_rows_gemm<float>(x, queries, q, active, 0, m, m, p.type, p.gamma, p.coef0, p.degree, out);
  else
    rows_scatter(x, queries, q, active, 0, m, m, p, out);
}

}  // namespace accel::cpu
