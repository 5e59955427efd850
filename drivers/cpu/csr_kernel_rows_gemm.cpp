// The gemm path of the CPU csr_kernel_rows, for launches with many queries
// (the batched solver's working sets, prediction, reconstruction).
//
// Columns are split once per matrix by how many rows use them. Frequent
// ("dense") columns are written out in float tiles on both sides and their
// share of every dot product comes from one sgemm per tile: all of a
// Fashion-MNIST image, the common words of a text. The rare columns are
// handled sparse: the queries' rare entries are listed per column (an
// inverted index, a CSC of the query block), and each target row adds
// value * value for the queries that share its rare columns, which costs
// about (queries per column) per non-zero instead of one pass per query.
// On dense data this is plain sgemm; on text with 50,000 features it does
// the product of the few hundred common words at matrix speed and the rest
// at sparse speed, where densifying every column would cost more than it
// saves and a scatter per query would read every target row q times.
//
// Single precision by default, as the values are stored (dgemm when the
// launch asks for exact products: prediction): the float dot's error (~1e-6
// of |u||v|, magnified by the RBF's |u|^2 + |v|^2 - 2u.v) moves the dual
// objective only slightly against LIBSVM's double, for twice dgemm's rate.
#include <omp.h>

#include <algorithm>
#include <cblas.h>
#include <memory>
#include <numeric>
#include <type_traits>
#include <vector>

#include "csr_kernel_rows.hpp"
#include "kernel_tile.hpp"

namespace accel::cpu {
namespace {

// A column is dense when at least this fraction of the rows use it: the
// sparse form then costs about f^2 q m scattered multiply-adds against 2 q m
// flops of sgemm, and sgemm runs orders of magnitude faster per flop than a scattered add.
constexpr double kDenseFraction = 1.0 / 16;  // the fastest of the fractions tried on the sparse benchmark set
// At most this many dense columns (the most used): wider tiles cost more to
// write out than the product saves.
constexpr std::int64_t kMaxDense = 4096;

// What the gemm path derives from a matrix: which columns are dense, and,
// where the matrix is dense enough that it costs at most twice the CSR's
// storage, every row's dense columns written out once (n x F floats), so a
// launch reads its tiles instead of scattering each target row again.
struct Prepared {
  std::int64_t n = 0, nnz = 0;          // the rows it covers, and their entries
  std::vector<std::int32_t> dense_pos;  // column -> position among the dense columns, or -1
  std::int64_t dense = 0;
  std::int64_t F = 1;                   // max(1, dense): the tiles' width
  std::unique_ptr<float[]> rows;        // n x F (room for rows_cap rows), or null
  std::int64_t rows_cap = 0;
  // The rare (not dense) entries of every row, where there are any: the
  // sparse pass reads these instead of skipping each row's dense entries.
  std::vector<std::int64_t> rare_ptr;
  std::vector<std::int32_t> rare_col;
  std::vector<float> rare_val;
};

// The rare entries of rows [from, x.n), appended.
void add_rare(const CsrView& x, Prepared& s, std::int64_t from) {
  for (std::int64_t u = from; u < x.n; ++u) {
    for (std::int64_t k = x.row_ptr[u]; k < x.row_ptr[u + 1]; ++k)
      if (s.dense_pos[x.col_idx[k]] < 0) {
        s.rare_col.push_back(x.col_idx[k]);
        s.rare_val.push_back(x.values[k]);
      }
    s.rare_ptr.push_back(static_cast<std::int64_t>(s.rare_col.size()));
  }
}

std::unique_ptr<Prepared> split_columns(const CsrView& x) {
  const std::int64_t nnz = x.row_ptr[x.n];
  std::vector<std::int64_t> count(x.cols, 0);
  for (std::int64_t k = 0; k < nnz; ++k) ++count[x.col_idx[k]];
  std::vector<std::int32_t> order(x.cols);
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](std::int32_t a, std::int32_t b) { return count[a] > count[b]; });
  auto s = std::make_unique<Prepared>();
  s->dense_pos.assign(x.cols, -1);
  const auto used = std::count_if(count.begin(), count.end(), [](std::int64_t c) { return c > 0; });
  const double least = std::max(1.0, kDenseFraction * double(x.n));
  // The most used columns are dense, placed in the tiles by column number:
  // sgemm sums a dot product in the tiles' column order, and by number that
  // order is the same on every matrix that makes the same columns dense --
  // by count it would follow the rows a matrix holds, and a distributed
  // member's kernel values would differ from single-node's in the last bits.
  std::vector<std::int32_t> chosen;
  for (const std::int32_t c : order) {
    if (std::int64_t(chosen.size()) >= kMaxDense || double(count[c]) < least) break;
    chosen.push_back(c);
  }
  std::sort(chosen.begin(), chosen.end());
  for (const std::int32_t c : chosen) s->dense_pos[c] = static_cast<std::int32_t>(s->dense++);
  s->F = std::max<std::int64_t>(1, s->dense);
  s->n = x.n;
  s->nnz = nnz;
  if (s->dense < used) {
    s->rare_ptr.assign(1, 0);
    add_rare(x, *s, 0);
  }
  return s;
}

// Dense parts of rows idx[0..r) into r x F values, from the CSR.
template <class T>
void scatter_dense(const CsrView& x, const Prepared& sp, const std::int32_t* idx, std::int64_t r, T* dense) {
  for (std::int64_t a = 0; a < r; ++a) {
    T* row = dense + a * sp.F;
    std::fill(row, row + sp.F, T(0));
    const std::int64_t u = idx[a];
    for (std::int64_t k = x.row_ptr[u]; k < x.row_ptr[u + 1]; ++k)
      if (const std::int32_t pos = sp.dense_pos[x.col_idx[k]]; pos >= 0) row[pos] = x.values[k];
  }
}

void write_rows(const CsrView& x, Prepared& sp, std::int64_t from);

void write_out_rows(const CsrView& x, Prepared& sp) {
  const std::int64_t nnz = x.row_ptr[x.n];
  const double bytes = 4.0 * double(x.n) * double(sp.F), csr = 8.0 * double(nnz);
  if (sp.dense == 0 || bytes > 2 * csr || bytes > double(std::int64_t{1} << 31)) return;
  // Not zeroed first: each row is written whole, by the thread that will
  // touch it (first touch, without a serial memset of the whole copy).
  sp.rows.reset(new float[static_cast<std::size_t>(x.n * sp.F)]);
  sp.rows_cap = x.n;
  write_rows(x, sp, 0);
}

void write_rows(const CsrView& x, Prepared& sp, std::int64_t from) {
#pragma omp parallel for schedule(static)
  for (std::int64_t u = from; u < x.n; ++u) {
    const std::int32_t row = static_cast<std::int32_t>(u);
    scatter_dense(x, sp, &row, 1, sp.rows.get() + u * sp.F);
  }
}

// Rows [0, keep) of s are the matrix's still (their bytes are unchanged):
// the rows after them, which a distributed SVM member rewrites each round
// (guest rows behind its own), are prepared with the same column split.
// Any split gives the same values; keeping it keeps the own rows' written-
// out copy, which is most of the work.
void extend(const CsrView& x, Prepared& s, std::int64_t keep) {
  const std::int64_t nnz = x.row_ptr[x.n];
  if (!s.rare_ptr.empty()) {
    s.rare_ptr.resize(keep + 1);
    s.rare_col.resize(s.rare_ptr[keep]);
    s.rare_val.resize(s.rare_ptr[keep]);
    add_rare(x, s, keep);
  } else {
    bool rare = false;
    for (std::int64_t k = x.row_ptr[keep]; k < nnz && !rare; ++k) rare = s.dense_pos[x.col_idx[k]] < 0;
    if (rare) {
      s.rare_ptr.assign(keep + 1, 0);
      add_rare(x, s, keep);
    }
  }
  if (s.rows) {
    if (x.n > s.rows_cap) {  // room for half as many again: guests come and go each round
      const std::int64_t cap = x.n + x.n / 2;
      std::unique_ptr<float[]> bigger(new float[static_cast<std::size_t>(cap * s.F)]);
      std::copy(s.rows.get(), s.rows.get() + keep * s.F, bigger.get());
      s.rows = std::move(bigger);
      s.rows_cap = cap;
    }
    write_rows(x, s, keep);
  }
  s.n = x.n;
  s.nnz = nnz;
}

// The matrix's Prepared: kept by the buffer that holds its values (the
// host runtime's launches), so it lives and dies with the matrix; where
// its values changed from some row on, that row and the rest are prepared
// again. A bare view (tests) has nothing to keep it by -- a cache keyed by
// address could serve another matrix's values -- so it gets the column
// split and rare entries afresh.
std::shared_ptr<const Prepared> prepared(const CsrView& x) {
  if (!x.owner) return split_columns(x);
  const std::int64_t nnz = x.row_ptr[x.n];
  if (auto d = std::static_pointer_cast<const Prepared>(x.owner->derived())) {
    const std::size_t unchanged = x.owner->unchanged() / sizeof(float);
    if (unchanged >= static_cast<std::size_t>(nnz) && d->n == x.n && d->nnz == nnz) return d;
    // The rows wholly before the first changed value, of those it covers.
    const std::int64_t keep = std::min<std::int64_t>(
        d->n, std::upper_bound(x.row_ptr, x.row_ptr + x.n + 1, static_cast<std::int64_t>(unchanged)) - x.row_ptr - 1);
    if (keep > 0 && keep >= d->n / 2) {
      auto s = std::const_pointer_cast<Prepared>(d);  // no launch reads it now: launches on a matrix are in turn
      extend(x, *s, keep);
      x.owner->keep_derived(s);
      return s;
    }
  }
  std::shared_ptr<Prepared> s = split_columns(x);
  write_out_rows(x, *s);
  x.owner->keep_derived(s);
  return s;
}

}  // namespace

bool gemm_written_out(const CsrView& x) { return x.owner && prepared(x)->rows; }

namespace {

// The dense parts of rows idx[0..r): straight from the written-out rows
// where they lie in one run and T is float, else copied (or scattered from
// the CSR) into `scratch`.
template <class T>
const T* dense_rows(const CsrView& x, const Prepared& sp, const std::int32_t* idx, std::int64_t r, T* scratch) {
  if (!sp.rows) {
    scatter_dense(x, sp, idx, r, scratch);
    return scratch;
  }
  if constexpr (std::is_same_v<T, float>) {
    bool run = true;
    for (std::int64_t a = 1; a < r && run; ++a) run = idx[a] == idx[0] + a;
    if (run) return sp.rows.get() + std::int64_t{idx[0]} * sp.F;
  }
  for (std::int64_t a = 0; a < r; ++a) {
    const float* src = sp.rows.get() + std::int64_t{idx[a]} * sp.F;
    std::copy(src, src + sp.F, scratch + a * sp.F);
  }
  return scratch;
}

// The rare entries of a block of queries, by column.
struct RareIndex {
  std::vector<std::int32_t> start;  // cols + 1
  std::vector<std::int32_t> query;
  std::vector<float> value;
};

void index_rare(const CsrView& x, const Prepared& sp, const std::int32_t* idx, std::int64_t r, RareIndex* rare) {
  rare->start.assign(x.cols + 1, 0);
  for (std::int64_t a = 0; a < r; ++a)
    for (std::int64_t k = x.row_ptr[idx[a]]; k < x.row_ptr[idx[a] + 1]; ++k)
      if (sp.dense_pos[x.col_idx[k]] < 0) ++rare->start[x.col_idx[k] + 1];
  std::partial_sum(rare->start.begin(), rare->start.end(), rare->start.begin());
  rare->query.resize(rare->start.back());
  rare->value.resize(rare->start.back());
  std::vector<std::int32_t> fill(rare->start.begin(), rare->start.end() - 1);
  for (std::int64_t a = 0; a < r; ++a)
    for (std::int64_t k = x.row_ptr[idx[a]]; k < x.row_ptr[idx[a] + 1]; ++k)
      if (const std::int32_t c = x.col_idx[k]; sp.dense_pos[c] < 0) {
        rare->query[fill[c]] = static_cast<std::int32_t>(a);
        rare->value[fill[c]++] = x.values[k];
      }
}

// dots[a*tb + b] += the rare part of u_a . v_b for the tile's target rows.
template <class T>
void add_rare(const Prepared& sp, const RareIndex& rare, const std::int32_t* targets, std::int64_t tb, T* dots) {
  for (std::int64_t b = 0; b < tb; ++b) {
    const std::int64_t v = targets[b];
    for (std::int64_t k = sp.rare_ptr[v]; k < sp.rare_ptr[v + 1]; ++k) {
      const std::int32_t c = sp.rare_col[k];
      const T val = sp.rare_val[k];
      for (std::int32_t e = rare.start[c]; e < rare.start[c + 1]; ++e) dots[rare.query[e] * tb + b] += val * T(rare.value[e]);
    }
  }
}

template <class V>
void grow(V& v, std::int64_t size) {
  if (static_cast<std::int64_t>(v.size()) < size) v.resize(static_cast<std::size_t>(size));
}

void gemm_nt(int qa, int tb, int F, const float* dq, const float* dt, float* dots) {
  cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, qa, tb, F, 1.0f, dq, F, dt, F, 0.0f, dots, tb);
}
void gemm_nt(int qa, int tb, int F, const double* dq, const double* dt, double* dots) {
  cblas_dgemm(CblasRowMajor, CblasNoTrans, CblasTrans, qa, tb, F, 1.0, dq, F, dt, F, 0.0, dots, tb);
}

}  // namespace

template <class T>
void csr_rows_gemm(const CsrView& x, const std::int32_t* queries, std::int64_t q, const std::int32_t* active,
                   std::int64_t b0, std::int64_t b1, std::int64_t m, KernelType type, double gamma, double coef0,
                   int degree, float* out) {
  const auto keep = prepared(x);
  const Prepared& sp = *keep;
  const std::int64_t F = sp.F;
  const bool any_rare = !sp.rare_ptr.empty();
  // Target tiles of about 1 MiB of dense columns; each thread takes its own
  // tiles (written out from the CSR where the matrix has no dense copy) and
  // multiplies them with the query block by a single-threaded sgemm
  // (OpenBLAS runs one thread inside a parallel region), so no call is too
  // small to share.
  const std::int64_t tile = std::clamp<std::int64_t>((std::int64_t{1} << 18) / F, 16, 512);
  const std::int64_t qblock = std::clamp<std::int64_t>((std::int64_t{1} << 23) / F, tile, 8192);
  const std::int64_t tiles = (b1 - b0 + tile - 1) / tile;
  thread_local std::vector<T> dq_scratch;
  grow(dq_scratch, std::min(q, qblock) * F);
  std::vector<double> su(std::min(q, qblock));
  RareIndex rare;
  for (std::int64_t a0 = 0; a0 < q; a0 += qblock) {
    const std::int64_t qa = std::min(qblock, q - a0);
    const T* dq = dense_rows(x, sp, queries + a0, qa, dq_scratch.data());
    if (any_rare) index_rare(x, sp, queries + a0, qa, &rare);
    for (std::int64_t a = 0; a < qa; ++a) su[a] = x.sq_norms[queries[a0 + a]];
#pragma omp parallel if (tiles > 1)
    {
      // Per thread, kept across launches: a launch's fresh megabytes of
      // scratch cost page faults every time.
      thread_local std::vector<T> dt_scratch, dots;
      thread_local std::vector<double> sv;
      grow(dt_scratch, tile * F);
      grow(dots, qa * tile);
      grow(sv, tile);
#pragma omp for schedule(dynamic, 1)
      for (std::int64_t t = 0; t < tiles; ++t) {
        const std::int64_t t0 = b0 + t * tile, tb = std::min(tile, b1 - t0);
        const T* dt = dense_rows(x, sp, active + t0, tb, dt_scratch.data());
        for (std::int64_t b = 0; b < tb; ++b) sv[b] = x.sq_norms[active[t0 + b]];
        gemm_nt(static_cast<int>(qa), static_cast<int>(tb), static_cast<int>(F), dq, dt, dots.data());
        if (any_rare) add_rare(sp, rare, active + t0, tb, dots.data());
        kernel_tile(type, dots.data(), qa, tb, su.data(), sv.data(), gamma, coef0, degree, out + a0 * m + t0, m);
      }
    }
  }
}

template void csr_rows_gemm<float>(const CsrView&, const std::int32_t*, std::int64_t, const std::int32_t*,
                                   std::int64_t, std::int64_t, std::int64_t, KernelType, double, double, int, float*);
template void csr_rows_gemm<double>(const CsrView&, const std::int32_t*, std::int64_t, const std::int32_t*,
                                    std::int64_t, std::int64_t, std::int64_t, KernelType, double, double, int, float*);

}  // namespace accel::cpu
