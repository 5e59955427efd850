// CPU kmeans_assign for d >= 16 with few centroids, row by row. There the
// input's read is the limit (1M x 784 floats, k = 4: 3 GB of rows, 25
// MFLOP a thousand rows), and the gemm path ran at a quarter of it: sgemm
// on a k = 4 block is far below its rate, and the path reads each row
// again for the exact distance and for the sums.
//
// Here each row is read once: its sixteen-float chunks are subtracted from
// every centroid's and squared into two running sums per centroid (even
// and odd chunks, so the chains of dependent FMAs interleave), which are
// added across lanes at the end of the row -- exact distances, as the other
// loops have, only summed in another order. The row is then added into
// double sums for its label.
#include "kmeans_assign.hpp"

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

constexpr std::int64_t kMaxK = 8;
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
struct RowAcc {
  std::vector<double> dsum;
  std::vector<std::int64_t> dcount;
  double dinertia = 0;
  RowAcc(std::int64_t k_, std::int64_t d_) : dsum(k_ * d_, 0.0), dcount(k_, 0) {}
};

// One row: the nearest centroid (ties to the lower index) and its distance.
// K known at compile time: the 2K running sums stay in registers. The next
// rows' lines are fetched a chunk at a time (the hardware prefetcher alone
// left the loads of x waiting: a third of the loop's time at d = 784).
template <int K>
inline std::int32_t nearest(const float* xi, std::int64_t d, const float* c, float& dist_out) {
  v16f even[K], odd[K];
  for (int kk = 0; kk < K; ++kk) even[kk] = odd[kk] = v16f{};
  const std::int64_t full = d / 16;
  // An address, not a pointer into x: past the last rows it lies beyond x
  // (a prefetch never faults).
  const auto ahead = reinterpret_cast<const float*>(reinterpret_cast<std::uintptr_t>(xi) +
                                                    static_cast<std::uintptr_t>(kAheadRows * d) * sizeof(float));
  std::int64_t ch = 0;
  for (; ch + 2 <= full; ch += 2) {
    __builtin_prefetch(ahead + ch * 16);
    __builtin_prefetch(ahead + ch * 16 + 16);
    const v16f a = load16(xi + ch * 16), b = load16(xi + ch * 16 + 16);
    for (int kk = 0; kk < K; ++kk) {
      const float* ck = c + kk * d + ch * 16;
      const v16f ta = a - load16(ck), tb = b - load16(ck + 16);
      even[kk] += ta * ta;
      odd[kk] += tb * tb;
    }
  }
  if (ch < full) {
    __builtin_prefetch(ahead + ch * 16);
    const v16f a = load16(xi + ch * 16);
    for (int kk = 0; kk < K; ++kk) {
      const v16f ta = a - load16(c + kk * d + ch * 16);
      even[kk] += ta * ta;
    }
  }
  float best = std::numeric_limits<float>::infinity();
  std::int32_t arg = 0;
  for (int kk = 0; kk < K; ++kk) {
    float s = lanes_sum(even[kk] + odd[kk]);
    for (std::int64_t j = full * 16; j < d; ++j) {
      const float t = xi[j] - c[kk * d + j];
      s += t * t;
    }
    if (s < best) best = s, arg = kk;
  }
  dist_out = best;
  return arg;
}

inline void add_row(const float* xi, std::int64_t d, double* s) {
#pragma omp simd
  for (std::int64_t j = 0; j < d; ++j) s[j] += xi[j];
}


template <int K>
void assign_rows(const float* x, std::int64_t n, std::int64_t d, const float* c, std::int32_t* labels, double* sums,
                 std::int64_t* counts, double* inertia) {
  const int threads = omp_get_max_threads();
  std::vector<RowAcc> accs(threads, RowAcc(K, d));
#pragma omp parallel num_threads(threads)
  {
    const int t = omp_get_thread_num(), nt = omp_get_num_threads();
    RowAcc& acc = accs[t];
    const std::int64_t i0 = n * t / nt, i1 = n * (t + 1) / nt;
    for (std::int64_t i = i0; i < i1; ++i) {
      const float* xi = x + i * d;
      float dist;
      const std::int32_t lab = nearest<K>(xi, d, c, dist);
      labels[i] = lab;
      acc.dinertia += dist;
      add_row(xi, d, acc.dsum.data() + lab * d);
      ++acc.dcount[lab];
    }
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
#undef ACCEL_ROWS_CASE
    default: throw std::invalid_argument("kmeans_assign_rows: k = " + std::to_string(k) + " is not 1..8");
  }
}

}  // namespace accel::cpu
