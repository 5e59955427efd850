// CPU csr_kernel_rows. Two ways to get u.v for sparse rows, both kept
// because which one wins depends on the data (DESIGN.md 3.2):
//  - merge (seeds/001 Algorithm 2): walk the two sorted index lists; no
//    extra memory, cost nnz(u) + nnz(v) with a branch per step.
//  - scatter: the query rows are written once into a dense buffer of width
//    `cols` (interleaved, so one gather fetches every query's value for a
//    column); each active row then costs nnz(v) branch-free multiply-adds
//    that vectorise with gathers, and every active row is read once for all
//    queries in the group.
// Auto times both on a slice of the first launch for a matrix and keeps the
// faster one for that matrix.
#include "csr_kernel_rows.hpp"

#include <omp.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <map>
#include <mutex>
#include <vector>

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

// Queries handled per pass over the active rows: SMO asks for two (i_up, i_low).
constexpr int kGroup = 2;

double merge_dot(const CsrView& x, std::int64_t u, std::int64_t v) {
  std::int64_t a = x.row_ptr[u], ae = x.row_ptr[u + 1], b = x.row_ptr[v], be = x.row_ptr[v + 1];
  double s = 0;
  while (a < ae && b < be) {
    const std::int32_t ca = x.col_idx[a], cb = x.col_idx[b];
    if (ca == cb) {
      s += double(x.values[a]) * double(x.values[b]);
      ++a;
      ++b;
    } else if (ca < cb) {
      ++a;
    } else {
      ++b;
    }
  }
  return s;
}

struct Params {
  KernelType type;
  double gamma, coef0;
  int degree;
};

void rows_merge(const CsrView& x, const std::int32_t* queries, std::int64_t q, const std::int32_t* active,
                std::int64_t b0, std::int64_t b1, std::int64_t m, const Params& p, float* out) {
#pragma omp parallel for schedule(dynamic, 64) if (b1 - b0 > 256)
  for (std::int64_t b = b0; b < b1; ++b) {
    const std::int64_t v = active[b];
    for (std::int64_t a = 0; a < q; ++a) {
      const std::int64_t u = queries[a];
      out[a * m + b] = static_cast<float>(
          kernel_value(p.type, merge_dot(x, u, v), x.sq_norms[u], x.sq_norms[v], p.gamma, p.coef0, p.degree));
    }
  }
}

// The dense query buffer lives as long as the calling thread (the device's
// queue thread) and is kept all-zero between launches: only the entries a
// launch scattered are cleared again, so a launch costs nothing per column.
std::vector<double>& dense_buffer(std::int64_t cols) {
  thread_local std::vector<double> buf;
  if (static_cast<std::int64_t>(buf.size()) < cols * kGroup) buf.assign(cols * kGroup, 0.0);
  return buf;
}

void rows_scatter(const CsrView& x, const std::int32_t* queries, std::int64_t q, const std::int32_t* active,
                  std::int64_t b0, std::int64_t b1, std::int64_t m, const Params& p, float* out) {
  std::vector<double>& dense = dense_buffer(x.cols);
  double* d = dense.data();
  for (std::int64_t a0 = 0; a0 < q; a0 += kGroup) {
    const int g = static_cast<int>(std::min<std::int64_t>(kGroup, q - a0));
    for (int t = 0; t < g; ++t) {
      const std::int64_t u = queries[a0 + t];
      for (std::int64_t k = x.row_ptr[u]; k < x.row_ptr[u + 1]; ++k) d[std::int64_t{x.col_idx[k]} * kGroup + t] = x.values[k];
    }
#pragma omp parallel for schedule(dynamic, 64) if (b1 - b0 > 256)
    for (std::int64_t b = b0; b < b1; ++b) {
      const std::int64_t v = active[b];
      const std::int64_t lo = x.row_ptr[v], hi = x.row_ptr[v + 1];
      const std::int32_t* ci = x.col_idx;
      const float* vals = x.values;
      double s0 = 0, s1 = 0;
#pragma omp simd reduction(+ : s0, s1)
      for (std::int64_t k = lo; k < hi; ++k) {
        const double val = vals[k];
        const std::int64_t c = std::int64_t{ci[k]} * kGroup;
        s0 += val * d[c];
        s1 += val * d[c + 1];
      }
      const double dots[kGroup] = {s0, s1};
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
}

// Per-matrix choice of path, keyed by the matrix's storage and shape.
struct MatrixKey {
  const void* values;
  std::int64_t n, nnz, cols;
  auto operator<=>(const MatrixKey&) const = default;
};
std::mutex choice_mu;
std::map<MatrixKey, CsrDotPath> choices;

// Buffers wider than this are not worth scattering into (cache misses on
// every gather), whatever a short measurement says.
constexpr std::int64_t kMaxScatterCols = std::int64_t{1} << 24;

}  // namespace

void csr_kernel_rows(const CsrView& x, const std::int32_t* queries, std::int64_t q, const std::int32_t* active,
                     std::int64_t m, KernelType type, double gamma, double coef0, int degree, float* out,
                     CsrDotPath path) {
  const Params p{type, gamma, coef0, degree};
  if (q <= 0 || m <= 0) return;
  if (x.cols > kMaxScatterCols) path = CsrDotPath::Merge;
  std::int64_t done = 0;
  if (path == CsrDotPath::Auto) {
    const MatrixKey key{x.values, x.n, x.row_ptr[x.n], x.cols};
    {
      std::lock_guard lock(choice_mu);
      if (auto it = choices.find(key); it != choices.end()) path = it->second;
    }
    if (path == CsrDotPath::Auto) {
      // Time both on a slice of this launch (the slice's results are kept),
      // the faster of two repeats each so a preemption does not decide it.
      const std::int64_t slice = std::min<std::int64_t>(m, 2048);
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
      const double t_merge = time([&] { rows_merge(x, queries, q, active, 0, slice, m, p, out); });
      const double t_scatter = time([&] { rows_scatter(x, queries, q, active, 0, slice, m, p, out); });
      path = t_scatter <= t_merge ? CsrDotPath::Scatter : CsrDotPath::Merge;
      if (slice >= 256) {  // too small a slice says nothing
        std::lock_guard lock(choice_mu);
        choices[key] = path;
      }
      done = slice;
    }
  }
  if (path == CsrDotPath::Merge)
    rows_merge(x, queries, q, active, done, m, m, p, out);
  else
    rows_scatter(x, queries, q, active, done, m, m, p, out);
}

}  // namespace accel::cpu
