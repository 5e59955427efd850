// CPU kmeans_assign for d <= 4 with few centroids (kmeans_assign_pick.cpp
// takes it up to k = 8): the masked loop. Distances point by point with the
// centroids in registers; the sums by masked vector adds, no scatter.
// Sixteen points a vector with AVX-512 for k <= 8, eight otherwise.
#include "kmeans_assign.hpp"
#include "kmeans_dist.hpp"
#include "kmeans_lanes.hpp"

#include <immintrin.h>
#include <omp.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <limits>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

namespace accel::cpu {
namespace {

// Few centroids and dimensions (k*d <= kMaskedMaxKD, the blobs benchmark's
// k = 4, d = 2): memory-bound, so every cycle per point counts. Eight points
// per vector here (GCC vector extensions: AVX where the CPU has it, SSE
// pairs elsewhere; masked16 below takes sixteen with AVX-512), centroids in
// registers, and the update done with masked vector
// adds instead of a scatter, so points of one cluster never form a
// dependency chain through memory. The lanes add in double (one AVX-512
// vector of eight doubles per sum): where a launch's rows begin then moves
// the sums and the inertia by double rounding only, as in the other loops
// (kmeans_assign_wide.cpp's WideAcc says why that matters). Float lanes
// flushed every 512 points would group rows by where the launch began.
constexpr std::int64_t kMaskedMaxKD = 64;

typedef float v8f __attribute__((vector_size(32)));
typedef std::int32_t v8i __attribute__((vector_size(32)));

// Lane q of a transposed block holds point kPointOf<D>[q]. For D = 2 the
// points come out of in-lane shuffles (one vshufps each, where keeping their
// order costs cross-lane permutes): 0 1 4 5 2 3 6 7. Sums, counts and inertia
// do not care; labels are put back in order when stored.
template <int D>
constexpr v8i kPointOf = D == 2 ? v8i{0, 1, 4, 5, 2, 3, 6, 7} : v8i{0, 1, 2, 3, 4, 5, 6, 7};

template <int D>
inline void load_transposed(const float* x, v8f (&xs)[D]) {
  if constexpr (D == 2) {
    v8f a, b;
    std::memcpy(&a, x, sizeof a);
    std::memcpy(&b, x + 8, sizeof b);
    xs[0] = __builtin_shufflevector(a, b, 0, 2, 8, 10, 4, 6, 12, 14);
    xs[1] = __builtin_shufflevector(a, b, 1, 3, 9, 11, 5, 7, 13, 15);
  } else if constexpr (D == 3) {
    // Point q's element j is float 3q + j of three vectors: two shuffles
    // each (lanes built one at a time went through the stack).
    v8f a, b, e;
    std::memcpy(&a, x, sizeof a);
    std::memcpy(&b, x + 8, sizeof b);
    std::memcpy(&e, x + 16, sizeof e);
    const v8f s0 = __builtin_shufflevector(a, b, 0, 3, 6, 9, 12, 15, 0, 0);
    const v8f s1 = __builtin_shufflevector(a, b, 1, 4, 7, 10, 13, 0, 0, 0);
    const v8f s2 = __builtin_shufflevector(a, b, 2, 5, 8, 11, 14, 0, 0, 0);
    xs[0] = __builtin_shufflevector(s0, e, 0, 1, 2, 3, 4, 5, 10, 13);
    xs[1] = __builtin_shufflevector(s1, e, 0, 1, 2, 3, 4, 8, 11, 14);
    xs[2] = __builtin_shufflevector(s2, e, 0, 1, 2, 3, 4, 9, 12, 15);
  } else if constexpr (D == 4) {
    v8f a[4];
    for (int h = 0; h < 4; ++h) std::memcpy(&a[h], x + 8 * h, sizeof a[h]);
    // Elements 0 and 1 (t), 2 and 3 (u) of points 0-3, then of points 4-7.
    const v8f t0 = __builtin_shufflevector(a[0], a[1], 0, 4, 8, 12, 1, 5, 9, 13);
    const v8f u0 = __builtin_shufflevector(a[0], a[1], 2, 6, 10, 14, 3, 7, 11, 15);
    const v8f t1 = __builtin_shufflevector(a[2], a[3], 0, 4, 8, 12, 1, 5, 9, 13);
    const v8f u1 = __builtin_shufflevector(a[2], a[3], 2, 6, 10, 14, 3, 7, 11, 15);
    xs[0] = __builtin_shufflevector(t0, t1, 0, 1, 2, 3, 8, 9, 10, 11);
    xs[1] = __builtin_shufflevector(t0, t1, 4, 5, 6, 7, 12, 13, 14, 15);
    xs[2] = __builtin_shufflevector(u0, u1, 0, 1, 2, 3, 8, 9, 10, 11);
    xs[3] = __builtin_shufflevector(u0, u1, 4, 5, 6, 7, 12, 13, 14, 15);
  } else {
    for (int j = 0; j < D; ++j) {
      v8f v{};  // built whole, then stored: setting lanes of xs[j] in place drew -Wmaybe-uninitialized
      for (int q = 0; q < 8; ++q) v[q] = x[q * D + j];
      xs[j] = v;
    }
  }
}

typedef double v8d __attribute__((vector_size(64)));
typedef std::int64_t v8l __attribute__((vector_size(64)));

// Each lane's nearest centroid (centroids broadcast from c, k x D floats)
// and its float distance, eight or sixteen points a vector.
template <class VF, class VI, int D>
inline void nearest(const VF (&xs)[D], const float* c, std::int32_t k, VF& best, VI& arg) {
  best = VF{} + std::numeric_limits<float>::infinity();
  arg = VI{};
  for (std::int32_t kk = 0; kk < k; ++kk) {
    VF dist = VF{};
    for (int j = 0; j < D; ++j) {
      const VF t = xs[j] - c[kk * D + j];
      dist += t * t;
    }
    const VI better = dist < best;  // strict: ties stay with the lower index
    best = better ? dist : best;
    arg = better ? (VI{} + kk) : arg;
  }
}

// Per-thread state of the masked kernel. With K known at compile time the
// lanes are plain locals the compiler keeps in registers; K = 0 means k is
// only known at run time (up to kMaskedMaxKD / D) and they live in memory.
template <int D, int K>
struct MaskedLanes {
  static constexpr int kCap = K > 0 ? K : kMaskedMaxKD;
  v8d sum[kCap * D];
  v8i count[kCap];  // minus the members: a mask lane is -1
  v8d inertia;
};

// Eight points; lanes at or past `valid` are padding and count nowhere.
template <int D, int K>
inline void masked_step(const v8f (&xs)[D], const float* c, std::int64_t k_rt, int valid, std::int32_t* labels,
                        MaskedLanes<D, K>& L) {
  const std::int32_t k = K > 0 ? K : static_cast<std::int32_t>(k_rt);
  v8f best;
  v8i arg;
  nearest<v8f, v8i, D>(xs, c, k, best, arg);
  // Point order: the shuffle that maps lanes to points is its own inverse.
  const v8i in_order = D == 2 ? __builtin_shufflevector(arg, arg, 0, 1, 4, 5, 2, 3, 6, 7) : arg;
  if (valid < 8) {
    const v8i live = kPointOf<D> < valid;
    arg = live ? arg : (v8i{} - 1);
    best = live ? best : v8f{};
    for (int q = 0; q < valid; ++q) labels[q] = in_order[q];
  } else {
    std::memcpy(labels, &in_order, sizeof in_order);
  }
  L.inertia += __builtin_convertvector(best, v8d);
  v8d xd[D];
  for (int j = 0; j < D; ++j) xd[j] = __builtin_convertvector(xs[j], v8d);
  for (std::int32_t kk = 0; kk < k; ++kk) {
#if defined(__AVX512F__) && defined(__AVX512VL__)
    // A mask register: one masked add per sum. (Widening the 32-bit mask
    // to 64-bit lanes and selecting takes three instructions a sum.)
    const __mmask8 mine = _mm256_cmpeq_epi32_mask(reinterpret_cast<__m256i>(arg), _mm256_set1_epi32(kk));
    L.count[kk] = reinterpret_cast<v8i>(_mm256_mask_sub_epi32(reinterpret_cast<__m256i>(L.count[kk]), mine,
                                                              reinterpret_cast<__m256i>(L.count[kk]),
                                                              _mm256_set1_epi32(1)));
    for (int j = 0; j < D; ++j)
      L.sum[kk * D + j] = reinterpret_cast<v8d>(
          _mm512_mask_add_pd(reinterpret_cast<__m512d>(L.sum[kk * D + j]), mine,
                             reinterpret_cast<__m512d>(L.sum[kk * D + j]), reinterpret_cast<__m512d>(xd[j])));
#else
    const v8i mine = arg == kk;
    L.count[kk] += mine;  // one integer add instead of a select and an add
    const v8l wide = __builtin_convertvector(mine, v8l);
    for (int j = 0; j < D; ++j) L.sum[kk * D + j] += wide ? xd[j] : v8d{};
#endif
  }
}

// Runs the masked loop, W points a step: each thread keeps its own lanes
// (Lanes: sum[k * D], count[k] (minus the members), inertia), `load` puts
// W rows into the vectors xs[D], `step(xs, valid, labels, lanes)` labels
// them and adds them in (lanes at or past `valid` are zero padding that
// counts nowhere), and the threads' lanes are added up in thread order.
constexpr std::int64_t kCountSteps = std::int64_t{1} << 24;

template <int W, int D, class VF, class Lanes, class Load, class Step>
void masked_driver(const float* x, std::int64_t n, std::int64_t k, std::int32_t* labels, double* sums,
                   std::int64_t* counts, double* inertia, Load load, Step step) {
  const std::int64_t steps = n / W;
  const int threads = omp_get_max_threads();
  // One stride of sums and counts a thread, padded (detail::kLinePad): a
  // thread's last counts would share a cache line with the next one's sums.
  const std::int64_t stride = k * D + k + detail::kLinePad;
  std::vector<double> part(stride * threads, 0.0), pin(threads * detail::kLinePad, 0.0);
#pragma omp parallel num_threads(threads)
  {
    const int t = omp_get_thread_num(), nt = omp_get_num_threads();
    Lanes L{};
    double* mine = part.data() + t * stride;
    // The count lanes are int32, one more a step at most: moved out (exactly)
    // every 2^24 steps, long before they could overflow.
    auto take_counts = [&] {
      for (std::int64_t kk = 0; kk < k; ++kk)
        for (std::size_t q = 0; q < sizeof L.count[0] / sizeof(std::int32_t); ++q) mine[k * D + kk] -= L.count[kk][q];
      std::memset(&L.count, 0, sizeof L.count);
    };
    const std::int64_t s0 = steps * t / nt, s1 = steps * (t + 1) / nt;
    for (std::int64_t c0 = s0; c0 < s1; c0 += kCountSteps) {
      const std::int64_t c1 = std::min(s1, c0 + kCountSteps);
      for (std::int64_t s = c0; s < c1; ++s) {
        VF xs[D];
        load(x + s * W * D, xs);
        step(xs, W, labels + s * W, L);
      }
      take_counts();
    }
    if (t == nt - 1 && steps * W < n) {  // the last partial vector, zero-padded
      alignas(64) float tail[W * D] = {};
      const int valid = static_cast<int>(n - steps * W);
      std::memcpy(tail, x + steps * W * D, sizeof(float) * valid * D);
      VF xs[D];
      load(tail, xs);
      step(xs, valid, labels + steps * W, L);
      take_counts();
    }
    for (std::int64_t e = 0; e < k * D; ++e)
      for (std::size_t q = 0; q < sizeof L.sum[0] / sizeof(double); ++q) mine[e] += L.sum[e][q];
    for (std::size_t q = 0; q < sizeof L.inertia / sizeof(double); ++q) pin[t * detail::kLinePad] += L.inertia[q];
  }
  std::fill(sums, sums + k * D, 0.0);
  std::fill(counts, counts + k, 0);
  double total = 0;
  for (int t = 0; t < threads; ++t) {  // in thread order: the same sums every run
    for (std::int64_t e = 0; e < k * D; ++e) sums[e] += part[t * stride + e];
    for (std::int64_t kk = 0; kk < k; ++kk) counts[kk] += static_cast<std::int64_t>(part[t * stride + k * D + kk]);
    total += pin[t * detail::kLinePad];
  }
  *inertia = total;
}

template <int D, int K>
void masked_eight(const float* x, std::int64_t n, const float* c, std::int64_t k_rt, std::int32_t* labels,
                  double* sums, std::int64_t* counts, double* inertia) {
  const std::int64_t k = K > 0 ? K : k_rt;
  masked_driver<8, D, v8f, MaskedLanes<D, K>>(
      x, n, k, labels, sums, counts, inertia, [](const float* p, v8f(&xs)[D]) { load_transposed<D>(p, xs); },
      [&](const v8f(&xs)[D], int valid, std::int32_t* lab, MaskedLanes<D, K>& L) {
        masked_step<D, K>(xs, c, k, valid, lab, L);
      });
}

#if defined(__AVX512F__)
// Sixteen points a vector for k <= 8 (k * d <= 32; the sums fit in
// registers up to k * d = 16, past that some spill, and the loop is still
// faster than the wide one and than eight lanes at k = 8):
// one AVX-512 vector holds twice the points, so each distance, compare and
// select serves sixteen, half the instructions a point of eight lanes.
// Each sum stays one vector of eight doubles; the two halves of the
// sixteen points are added into it by two masked adds.
typedef std::int32_t v16i __attribute__((vector_size(64)));
using detail::v16f;

template <int D, int K>
struct Lanes16 {
  v8d sum[K * D];
  v16i count[K];  // minus the members
  v8d inertia;
};

inline __m512d lo_pd(v16f v) { return _mm512_cvtps_pd(_mm512_castps512_ps256(reinterpret_cast<__m512>(v))); }
inline __m512d hi_pd(v16f v) {
  return _mm512_cvtps_pd(_mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(reinterpret_cast<__m512>(v)), 1)));
}

// Sixteen points; lanes at or past `valid` count nowhere.
template <int D, int K>
inline void masked16_step(const v16f (&xs)[D], const float* c, int valid, std::int32_t* labels, Lanes16<D, K>& L) {
  v16f best;
  v16i arg;
  nearest<v16f, v16i, D>(xs, c, K, best, arg);
  if (valid < 16) {
    const v16i lane = {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15};
    const v16i live = lane < valid;
    arg = live ? arg : (v16i{} - 1);
    best = live ? best : v16f{};
    std::memcpy(labels, &arg, sizeof(std::int32_t) * valid);
  } else {
    std::memcpy(labels, &arg, sizeof arg);
  }
  L.inertia = reinterpret_cast<v8d>(_mm512_add_pd(_mm512_add_pd(reinterpret_cast<__m512d>(L.inertia), lo_pd(best)),
                                                    hi_pd(best)));
  __m512d xl[D], xh[D];
  for (int j = 0; j < D; ++j) xl[j] = lo_pd(xs[j]), xh[j] = hi_pd(xs[j]);
  for (int kk = 0; kk < K; ++kk) {
    const __mmask16 mine = _mm512_cmpeq_epi32_mask(reinterpret_cast<__m512i>(arg), _mm512_set1_epi32(kk));
    L.count[kk] = reinterpret_cast<v16i>(_mm512_mask_sub_epi32(reinterpret_cast<__m512i>(L.count[kk]), mine,
                                                               reinterpret_cast<__m512i>(L.count[kk]),
                                                               _mm512_set1_epi32(1)));
    const auto lo = static_cast<__mmask8>(mine), hi = static_cast<__mmask8>(mine >> 8);
    for (int j = 0; j < D; ++j) {
      __m512d s = reinterpret_cast<__m512d>(L.sum[kk * D + j]);
      s = _mm512_mask_add_pd(s, lo, s, xl[j]);
      s = _mm512_mask_add_pd(s, hi, s, xh[j]);
      L.sum[kk * D + j] = reinterpret_cast<v8d>(s);
    }
  }
}

template <int D, int K>
void kmeans_assign_masked16(const float* x, std::int64_t n, const float* c, std::int32_t* labels, double* sums,
                            std::int64_t* counts, double* inertia) {
  masked_driver<16, D, v16f, Lanes16<D, K>>(
      x, n, K, labels, sums, counts, inertia, [](const float* p, v16f(&xs)[D]) { detail::narrow16<D>(p, xs); },
      [&](const v16f(&xs)[D], int valid, std::int32_t* lab, Lanes16<D, K>& L) {
        masked16_step<D, K>(xs, c, valid, lab, L);
      });
}
#endif

#if defined(__AVX512F__)
// The sixteen-lane loop for k = K <= 8 (past that its sums spill out of
// the registers and the wide loop is faster).
template <int D, int K>
bool masked16_if(std::int64_t k, const float* x, std::int64_t n, const float* c, std::int32_t* labels, double* sums,
                 std::int64_t* counts, double* inertia) {
  if (k != K) return false;
  kmeans_assign_masked16<D, K>(x, n, c, labels, sums, counts, inertia);
  return true;
}
template <int D, int... Ks>
bool masked16_any(std::int64_t k, const float* x, std::int64_t n, const float* c, std::int32_t* labels,
                  double* sums, std::int64_t* counts, double* inertia, std::integer_sequence<int, Ks...>) {
  return (masked16_if<D, Ks + 1>(k, x, n, c, labels, sums, counts, inertia) || ...);
}
#endif

// Compile-time k for the common small cases, run-time k otherwise.
template <int D>
void masked_dispatch(const float* x, std::int64_t n, const float* c, std::int64_t k, std::int32_t* labels,
                     double* sums, std::int64_t* counts, double* inertia, int lanes) {
#if defined(__AVX512F__)
  if (lanes != 8 && masked16_any<D>(k, x, n, c, labels, sums, counts, inertia, std::make_integer_sequence<int, 8>{}))
    return;
#else
  (void)lanes;
#endif
  switch (k) {
    case 2: return masked_eight<D, 2>(x, n, c, k, labels, sums, counts, inertia);
    case 3: return masked_eight<D, 3>(x, n, c, k, labels, sums, counts, inertia);
    case 4: return masked_eight<D, 4>(x, n, c, k, labels, sums, counts, inertia);
    case 5: return masked_eight<D, 5>(x, n, c, k, labels, sums, counts, inertia);
    case 6: return masked_eight<D, 6>(x, n, c, k, labels, sums, counts, inertia);
    case 7: return masked_eight<D, 7>(x, n, c, k, labels, sums, counts, inertia);
    case 8: return masked_eight<D, 8>(x, n, c, k, labels, sums, counts, inertia);
    default: return masked_eight<D, 0>(x, n, c, k, labels, sums, counts, inertia);
  }
}

}  // namespace

bool kmeans_assign_masked_fits(std::int64_t d, std::int64_t k) { return d <= 4 && k * d <= kMaskedMaxKD; }

void kmeans_assign_masked(const float* x, std::int64_t n, std::int64_t d, const float* c, std::int64_t k,
                          std::int32_t* labels, double* sums, std::int64_t* counts, double* inertia, int lanes) {
  switch (d) {
    case 1: return masked_dispatch<1>(x, n, c, k, labels, sums, counts, inertia, lanes);
    case 2: return masked_dispatch<2>(x, n, c, k, labels, sums, counts, inertia, lanes);
    case 3: return masked_dispatch<3>(x, n, c, k, labels, sums, counts, inertia, lanes);
    case 4: return masked_dispatch<4>(x, n, c, k, labels, sums, counts, inertia, lanes);
    default: throw std::invalid_argument("kmeans_assign_masked: d = " + std::to_string(d) + " is not 1..4");
  }
}

}  // namespace accel::cpu
