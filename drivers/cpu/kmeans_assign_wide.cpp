// CPU kmeans_assign for d <= 16, 24, 32, 48, 64 and 128. At small d and k the rows
// are memory-bound (one read of them costs more than the distances' sgemm),
// and a direct loop falls far short of that limit when it stages points
// through memory with masked scalar loads and adds each row into double
// sums one value at a time.
//
// Here sixteen points are transposed in registers (three shuffle stages per
// 8 x 8 tile), distances are computed exactly, (x - c)^2 summed over d in
// order, sixteen points per vector with the centroids broadcast from L1.
// Each row is then added whole (one or two vectors) into double sums for
// its label, in one of four copies taken in turn so that rows of one
// cluster do not chain through memory; the distances go into double lanes.
// Where a launch's rows begin then moves the sums by double rounding
// (1e-16 relative) at most, not by float's (see WideAcc).
#include "kmeans_assign.hpp"
#include "kmeans_dist.hpp"
#include "kmeans_lanes.hpp"

#include <immintrin.h>
#include <omp.h>

#include <algorithm>
#include <cstring>
#include <limits>
#include <stdexcept>
#include <string>
#include <vector>

namespace accel::cpu {
namespace {

typedef float v8f __attribute__((vector_size(32)));
typedef float v16f __attribute__((vector_size(64)));
typedef double v8d __attribute__((vector_size(64)));
typedef std::int32_t v16i __attribute__((vector_size(64)));

constexpr int kWideCopies = 4;
constexpr std::int64_t kFlushSteps = 4;  // 64-point steps between the inertia lanes' flushes into one double

// Eight floats to doubles in one instruction where AVX-512 has it (GCC,
// tuned for Zen 4, split it into two halves and a merge).
inline v8d widen(v8f v) {
#ifdef __AVX512F__
  return reinterpret_cast<v8d>(_mm512_cvtps_pd(reinterpret_cast<__m256>(v)));
#else
  return __builtin_convertvector(v, v8d);
#endif
}

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

// One thread's sums: double, in four copies taken in turn (rows of one
// cluster in a row then do not wait on each other's adds). Double, not
// float flushed every 64 rows: where a launch's rows begin and end may move
// the sums by double rounding only (the cluster engine splits the rows
// among members and stands in for lost ones, and checks the result against
// a single-node run's to 1e-6 after hundreds of iterations; float groupings
// that moved with the split put it 2e-2 away).
// The inertia too is summed in double lanes: float lanes flushed every few
// steps grouped rows by where the launch began, and a coordinator that
// re-ran iterations after a restart, standing in for a lost member's rows,
// logged inertias 1e-10 (relative) away from the first run's.
template <int D>
struct WideAcc {
  std::int64_t k;
  std::vector<double> sum;           // kWideCopies x k x D
  std::vector<std::int64_t> count;   // kWideCopies x k
  v8d inertia[2] = {};
  double dinertia = 0;
  explicit WideAcc(std::int64_t k_)
      : k(k_), sum(kWideCopies * k_ * D + detail::kLinePad, 0.0), count(kWideCopies * k_ + detail::kLinePad, 0) {}
  void add(v16f best) {
    inertia[0] += __builtin_convertvector(__builtin_shufflevector(best, best, 0, 1, 2, 3, 4, 5, 6, 7), v8d);
    inertia[1] += __builtin_convertvector(__builtin_shufflevector(best, best, 8, 9, 10, 11, 12, 13, 14, 15), v8d);
  }
  void flush() {
    for (int h = 0; h < 2; ++h)
      for (int q = 0; q < 8; ++q) dinertia += inertia[h][q];
    inertia[0] = inertia[1] = v8d{};
  }
};

// Sixteen rows at p (D floats each) into xs[j]: element j of every row.
template <int D>
inline void transpose16(const float* p, v16f* xs) {
  if constexpr (D % 8 == 0) {
    for (int h = 0; h < D; h += 8) {
      v8f lo[8], hi[8], tl[8], th[8];
      for (int r = 0; r < 8; ++r) lo[r] = load8(p + r * D + h), hi[r] = load8(p + (r + 8) * D + h);
      transpose8(lo, tl);
      transpose8(hi, th);
      for (int j = 0; j < 8; ++j)
        xs[h + j] = __builtin_shufflevector(tl[j], th[j], 0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
    }
  } else if constexpr (D <= 4) {
    detail::narrow16<D>(p, xs);
  } else {
    // Other odd rows: sixteen rows are 16 * D consecutive floats, gathered
    // by lane.
    for (int j = 0; j < D; ++j) {
      v16f v{};
      for (int q = 0; q < 16; ++q) v[q] = p[q * D + j];
      xs[j] = v;
    }
  }
}

// kGroups x 16 points a step (rows of D floats at p; `valid` of them real,
// the rest zero padding that counts nowhere). Sixteen lanes: one AVX-512
// vector, two AVX ones; on Zen 4 the wider vectors halve the instructions
// per point. Four groups: each centroid's distance is a chain of D
// dependent FMAs and each running minimum a chain of compares and
// selects, and one group alone waits on them (latency, not throughput,
// bound: far below the FMA units' rate).
constexpr int kGroups = 4;
constexpr int kStep = 16 * kGroups;

// Each point's nearest centroid of the k at c (D floats each): best[g]
// and arg[g] for the sixteen points of xs[g]. With AVX-512 a group is one
// vector. Without it the groups are split into native 8-lane halves: GCC
// 12 lowers a 16-lane compare, select or scalar broadcast one lane at a
// time through the stack there, while sums and FMAs it splits well.
template <int D>
inline void nearest(const v16f (&xs)[kGroups][D], const float* c, std::int64_t k, v16f (&best)[kGroups],
                    v16i (&arg)[kGroups]) {
#ifdef __AVX512F__
  typedef v16f V;
  typedef v16i VI;
#else
  typedef v8f V;
  typedef std::int32_t VI __attribute__((vector_size(32)));
#endif
  constexpr int H = sizeof(v16f) / sizeof(V);  // vectors a group
  constexpr int G = kGroups * H;
  V x[D][G];  // element j of each vector's points
  for (int g = 0; g < kGroups; ++g)
    for (int j = 0; j < D; ++j) std::memcpy(&x[j][g * H], &xs[g][j], sizeof(v16f));
  V b[G];
  VI a[G];
  for (int g = 0; g < G; ++g) b[g] = V{} + std::numeric_limits<float>::infinity(), a[g] = VI{};
  for (std::int64_t kk = 0; kk < k; ++kk) {
    const float* ck = c + kk * D;
    V dist[G] = {};
    for (int j = 0; j < D; ++j) {
      const V cj = V{} + ck[j];
      for (int g = 0; g < G; ++g) {
        const V t = x[j][g] - cj;
        dist[g] += t * t;
      }
    }
    const VI kv = VI{} + static_cast<std::int32_t>(kk);
    for (int g = 0; g < G; ++g) {
      const VI better = dist[g] < b[g];  // strict: ties stay with the lower index
      b[g] = better ? dist[g] : b[g];
      a[g] = better ? kv : a[g];
    }
  }
  std::memcpy(best, b, sizeof best);
  std::memcpy(arg, a, sizeof arg);
}

template <int D>
inline void step(const float* p, int valid, const float* c, std::int64_t k, std::int32_t* labels, WideAcc<D>& acc) {
  v16f xs[kGroups][D];
  for (int g = 0; g < kGroups; ++g) transpose16<D>(p + g * 16 * D, xs[g]);
  v16f best[kGroups];
  v16i arg[kGroups];
  nearest<D>(xs, c, k, best, arg);
  if (valid < kStep)  // the padding's distances count nowhere
    for (int q = valid; q < kStep; ++q) best[q / 16][q % 16] = 0;
  for (int g = 0; g < kGroups; ++g) acc.add(best[g]);
  // The labels leave their vectors in one store, and the sums' addresses
  // come from locals: read through acc in the loop, they would be loaded
  // again after every count's increment (an int64 store that might alias
  // them), and each point's label would come out of the stack by a computed index.
  alignas(64) std::int32_t lab[kStep];
  std::memcpy(lab, arg, sizeof lab);
  std::memcpy(labels, lab, sizeof(std::int32_t) * valid);
  double* const sum = acc.sum.data();
  std::int64_t* const count = acc.count.data();
  for (int q = 0; q < valid; ++q) {
    const std::int64_t slot = (q & (kWideCopies - 1)) * k + lab[q];  // k: acc.k
    double* s = sum + slot * D;
    if constexpr (D % 8 == 0) {
      for (int h = 0; h < D; h += 8) {
        v8d v;
        std::memcpy(&v, s + h, sizeof v);
        v += widen(load8(p + q * D + h));
        std::memcpy(s + h, &v, sizeof v);
      }
    } else {
      for (int j = 0; j < D; ++j) s[j] += p[q * D + j];
    }
    ++count[slot];
  }
}

template <int D>
void assign_wide(const float* x, std::int64_t n, const float* c, std::int64_t k, std::int32_t* labels, double* sums,
                 std::int64_t* counts, double* inertia) {
  const std::int64_t steps = n / kStep;
  const int threads = omp_get_max_threads();
  std::vector<WideAcc<D>> accs(threads, WideAcc<D>(k));
#pragma omp parallel num_threads(threads)
  {
    const int t = omp_get_thread_num(), nt = omp_get_num_threads();
    WideAcc<D>& acc = accs[t];
    const std::int64_t s0 = steps * t / nt, s1 = steps * (t + 1) / nt;
    for (std::int64_t f0 = s0; f0 < s1; f0 += kFlushSteps) {
      const std::int64_t f1 = std::min(s1, f0 + kFlushSteps);
      for (std::int64_t s = f0; s < f1; ++s) step<D>(x + s * kStep * D, kStep, c, k, labels + s * kStep, acc);
      acc.flush();
    }
    if (t == nt - 1 && steps * kStep < n) {  // the last partial step, zero-padded
      std::vector<float> tail(kStep * D, 0.0f);
      const int valid = static_cast<int>(n - steps * kStep);
      std::memcpy(tail.data(), x + steps * kStep * D, sizeof(float) * valid * D);
      step<D>(tail.data(), valid, c, k, labels + steps * kStep, acc);
      acc.flush();
    }
  }
  std::fill(sums, sums + k * D, 0.0);
  std::fill(counts, counts + k, 0);
  double total = 0;
  for (const auto& a : accs) {  // in thread and copy order: the same sums every run
    for (int cp = 0; cp < kWideCopies; ++cp) {
      for (std::int64_t e = 0; e < k * D; ++e) sums[e] += a.sum[cp * k * D + e];
      for (std::int64_t kk = 0; kk < k; ++kk) counts[kk] += a.count[cp * k + kk];
    }
    total += a.dinertia;
  }
  *inertia = total;
}

}  // namespace

void kmeans_assign_wide(const float* x, std::int64_t n, std::int64_t d, const float* c, std::int64_t k,
                        std::int32_t* labels, double* sums, std::int64_t* counts, double* inertia) {
  switch (d) {
#define ACCEL_WIDE_CASE(D) \
  case D: return assign_wide<D>(x, n, c, k, labels, sums, counts, inertia);
    ACCEL_WIDE_CASE(1) ACCEL_WIDE_CASE(2) ACCEL_WIDE_CASE(3) ACCEL_WIDE_CASE(4) ACCEL_WIDE_CASE(5)
    ACCEL_WIDE_CASE(6) ACCEL_WIDE_CASE(7) ACCEL_WIDE_CASE(8) ACCEL_WIDE_CASE(9) ACCEL_WIDE_CASE(10)
    ACCEL_WIDE_CASE(11) ACCEL_WIDE_CASE(12) ACCEL_WIDE_CASE(13) ACCEL_WIDE_CASE(14) ACCEL_WIDE_CASE(15)
    ACCEL_WIDE_CASE(16) ACCEL_WIDE_CASE(24) ACCEL_WIDE_CASE(32) ACCEL_WIDE_CASE(48) ACCEL_WIDE_CASE(64) ACCEL_WIDE_CASE(128)
#undef ACCEL_WIDE_CASE
    default: throw std::invalid_argument("kmeans_assign_wide: d = " + std::to_string(d) + " is not 1..16, 24, 32, 48, 64 or 128");
  }
}

}  // namespace accel::cpu
