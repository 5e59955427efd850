// CPU kmeans_assign for d = 8 and d = 16 with few centroids: the rows are
// memory-bound there (one 500k x 8 read is 0.7 ms at 22 GB/s, its distances
// 0.5 ms of sgemm), and the general direct loop ran at ~9% of that limit:
// it staged points through memory with masked scalar loads and added each
// row into double sums one value at a time.
//
// Here eight points are transposed in registers (three shuffle stages per
// 8 x 8 tile), distances are computed exactly, (x - c)^2 summed over d in
// order as the direct loop does (the same labels), eight points per vector
// with the centroids broadcast from L1. Each row is then added whole (one
// or two vectors) into float sums for its label, in one of four copies
// taken in turn so that rows of one cluster do not chain through memory.
// The float sums take at most 64 rows each before they are flushed into
// double (relative error below 4e-6, as the masked kernel's lanes).
#include "kmeans_assign.hpp"

#include <omp.h>

#include <algorithm>
#include <cstring>
#include <limits>
#include <vector>

namespace accel::cpu {
namespace {

typedef float v8f __attribute__((vector_size(32)));
typedef std::int32_t v8i __attribute__((vector_size(32)));

constexpr int kCopies = 4;
constexpr std::int64_t kFlushSteps = 32;  // 8-point steps between flushes: 256 rows, 64 per copy at most

inline v8f load8(const float* p) {
  v8f v;
  std::memcpy(&v, p, sizeof v);
  return v;
}

// Columns of an 8 x 8 tile (rows a[0..8), 8 floats each): out[j] holds
// element j of every row.
inline void transpose8(const v8f (&a)[8], v8f* out) {
  v8f t[8], s[8];
  for (int r = 0; r < 8; r += 2) {
    t[r] = __builtin_shufflevector(a[r], a[r + 1], 0, 8, 1, 9, 4, 12, 5, 13);
    t[r + 1] = __builtin_shufflevector(a[r], a[r + 1], 2, 10, 3, 11, 6, 14, 7, 15);
  }
  for (int h = 0; h < 8; h += 4)
    for (int u = 0; u < 2; ++u) {
      s[h + 2 * u] = __builtin_shufflevector(t[h + u], t[h + u + 2], 0, 1, 8, 9, 4, 5, 12, 13);
      s[h + 2 * u + 1] = __builtin_shufflevector(t[h + u], t[h + u + 2], 2, 3, 10, 11, 6, 7, 14, 15);
    }
  for (int j = 0; j < 4; ++j) {
    out[j] = __builtin_shufflevector(s[j], s[j + 4], 0, 1, 2, 3, 8, 9, 10, 11);
    out[j + 4] = __builtin_shufflevector(s[j], s[j + 4], 4, 5, 6, 7, 12, 13, 14, 15);
  }
}

// One thread's sums: float copies flushed into double.
template <int D>
struct WideAcc {
  std::int64_t k;
  std::vector<float> sum;           // kCopies x k x D
  std::vector<std::int32_t> count;  // kCopies x k
  v8f inertia{};
  std::vector<double> dsum;  // k x D
  std::vector<std::int64_t> dcount;
  double dinertia = 0;
  explicit WideAcc(std::int64_t k_)
      : k(k_), sum(kCopies * k_ * D, 0.0f), count(kCopies * k_, 0), dsum(k_ * D, 0.0), dcount(k_, 0) {}
  void flush() {
    for (int cp = 0; cp < kCopies; ++cp)
      for (std::int64_t e = 0; e < k * D; ++e) dsum[e] += sum[cp * k * D + e];
    for (int cp = 0; cp < kCopies; ++cp)
      for (std::int64_t kk = 0; kk < k; ++kk) dcount[kk] += count[cp * k + kk];
    for (int q = 0; q < 8; ++q) dinertia += inertia[q];
    std::fill(sum.begin(), sum.end(), 0.0f);
    std::fill(count.begin(), count.end(), 0);
    inertia = v8f{};
  }
};

// Eight points (rows of D floats at p; `valid` of them real, the rest zero
// padding that counts nowhere).
template <int D>
inline void step8(const float* p, int valid, const float* c, std::int64_t k, std::int32_t* labels, WideAcc<D>& acc) {
  v8f xs[D];
  for (int h = 0; h < D; h += 8) {
    v8f rows[8];
    for (int r = 0; r < 8; ++r) rows[r] = load8(p + r * D + h);
    transpose8(rows, xs + h);
  }
  v8f best = v8f{} + std::numeric_limits<float>::infinity();
  v8i arg = v8i{};
  for (std::int64_t kk = 0; kk < k; ++kk) {
    const float* ck = c + kk * D;
    v8f dist = v8f{};
    for (int j = 0; j < D; ++j) {
      const v8f t = xs[j] - ck[j];
      dist += t * t;
    }
    const v8i better = dist < best;  // strict: ties stay with the lower index
    best = better ? dist : best;
    arg = better ? (v8i{} + static_cast<std::int32_t>(kk)) : arg;
  }
  if (valid < 8) {
    const v8i live = v8i{0, 1, 2, 3, 4, 5, 6, 7} < valid;
    best = live ? best : v8f{};
  }
  acc.inertia += best;
  for (int q = 0; q < valid; ++q) {
    const std::int32_t lab = arg[q];
    labels[q] = lab;
    const int cp = q & (kCopies - 1);
    float* s = acc.sum.data() + (cp * acc.k + lab) * D;
    for (int h = 0; h < D; h += 8) {
      const v8f v = load8(s + h) + load8(p + q * D + h);
      std::memcpy(s + h, &v, sizeof v);
    }
    ++acc.count[cp * acc.k + lab];
  }
}

template <int D>
void assign_wide(const float* x, std::int64_t n, const float* c, std::int64_t k, std::int32_t* labels, double* sums,
                 std::int64_t* counts, double* inertia) {
  const std::int64_t steps = n / 8;
  const int threads = omp_get_max_threads();
  std::vector<WideAcc<D>> accs(threads, WideAcc<D>(k));
#pragma omp parallel num_threads(threads)
  {
    const int t = omp_get_thread_num(), nt = omp_get_num_threads();
    WideAcc<D>& acc = accs[t];
    const std::int64_t s0 = steps * t / nt, s1 = steps * (t + 1) / nt;
    for (std::int64_t f0 = s0; f0 < s1; f0 += kFlushSteps) {
      const std::int64_t f1 = std::min(s1, f0 + kFlushSteps);
      for (std::int64_t s = f0; s < f1; ++s) step8<D>(x + s * 8 * D, 8, c, k, labels + s * 8, acc);
      acc.flush();
    }
    if (t == nt - 1 && steps * 8 < n) {  // the last partial step, zero-padded
      alignas(32) float tail[8 * D] = {};
      const int valid = static_cast<int>(n - steps * 8);
      std::memcpy(tail, x + steps * 8 * D, sizeof(float) * valid * D);
      step8<D>(tail, valid, c, k, labels + steps * 8, acc);
      acc.flush();
    }
  }
  std::fill(sums, sums + k * D, 0.0);
  std::fill(counts, counts + k, 0);
  double total = 0;
  for (const auto& a : accs) {  // in thread order: the same sums every run
    for (std::int64_t e = 0; e < k * D; ++e) sums[e] += a.dsum[e];
    for (std::int64_t kk = 0; kk < k; ++kk) counts[kk] += a.dcount[kk];
    total += a.dinertia;
  }
  *inertia = total;
}

}  // namespace

bool kmeans_assign_wide(const float* x, std::int64_t n, std::int64_t d, const float* c, std::int64_t k,
                        std::int32_t* labels, double* sums, std::int64_t* counts, double* inertia) {
  switch (d) {
    case 8: return assign_wide<8>(x, n, c, k, labels, sums, counts, inertia), true;
    case 16: return assign_wide<16>(x, n, c, k, labels, sums, counts, inertia), true;
    default: return false;
  }
}

}  // namespace accel::cpu
