// CPU topk_histogram. Each thread walks L1-sized blocks: a vectorised loop
// accumulates the moments of the block and, for a window (lo > 0), lists the
// values at or above lo in the same loop, so DRAM is read once; the full
// range is binned by a scalar loop over the same cache-hot block. Counters
// are 32-bit per thread (n <= 2^31 per thread) to keep the histogram small
// enough for L2, merged into the 64-bit output once.
#include "topk_histogram.hpp"

#include <immintrin.h>
#include <omp.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <type_traits>
#include <vector>

namespace accel::cpu {
namespace {

constexpr std::int64_t kBlock = 2048;  // 8 KiB of floats
// Software prefetch this many floats (8 KiB) ahead of the loops that read
// R. The loops carry a few vector operations per load, so a core has too
// few cache lines in flight for memory's latency without it: the window
// pass took 1.5 streaming reads of its time without, 1.1 with.
constexpr std::int64_t kPrefetch = 2048;

// Two cache lines, 32 floats, ahead of x.
inline void prefetch_ahead(const float* x) {
  __builtin_prefetch(x + kPrefetch);
  __builtin_prefetch(x + kPrefetch + 16);
}
constexpr std::uint32_t kInfBits = 0x7f800000u;

inline std::uint32_t abs_bits(float v) {
  std::uint32_t u;
  std::memcpy(&u, &v, 4);
  return u & 0x7fffffffu;
}

// Copies of the histogram, used round-robin: runs of values in one hot bin
// (most of a Laplacian sits in a few bins) then update different counters
// instead of waiting on one read-modify-write chain.
constexpr int kHistCopies = 4;

// A thread's histogram and list of window values. Kept between calls
// (OpenMP's threads persist): memory allocated afresh each call pays its
// page faults again.
struct Scratch {
  std::vector<std::uint32_t> hist;  // kHistCopies x bins
  std::vector<std::int64_t> idx;
  std::vector<float> val;
};
thread_local Scratch t_scratch;
// A list that grew past this (a window far below the tail) is freed after
// the call rather than held for the thread's life.
constexpr std::size_t kKeptListEntries = std::size_t{1} << 22;

struct Local {
  Scratch* list = nullptr;          // this thread's t_scratch
  std::uint32_t* hist = nullptr;    // its histogram, zeroed
  std::int64_t listed = 0;          // valid entries of *list, ascending indices
  std::int64_t windowed = 0;        // values the window loop read
  double sum = 0, sumsq = 0;
  float maxabs = 0;
  std::uint64_t below = 0, above = 0, nonfinite = 0;

  // Room for every value of a block of m to be listed.
  void reserve(std::int64_t m) {
    const auto need = static_cast<std::size_t>(listed + m);
    if (list->idx.size() >= need) return;
    const std::size_t grown = std::max(need, 2 * list->idx.size());
    list->idx.resize(grown);
    list->val.resize(grown);
  }
};

// Magnitude bits as signed lanes: |x|'s bits are below 2^31 and so is every
// window edge, so one signed compare (vpcmpgtd) orders them; the unsigned
// compare of the same lanes compiles to a min and an equality test.
typedef std::int32_t v8i __attribute__((vector_size(32)));

// One bit per lane of a comparison's result (all ones or all zeros per
// lane): a single movemask where AVX has it (the portable loop compiles
// to eight extracts and shifts, a large share of the window loop's time).
inline std::uint32_t lane_mask(v8i hit) {
#ifdef __AVX__
  __m256 h;
  std::memcpy(&h, &hit, sizeof h);
  return static_cast<std::uint32_t>(_mm256_movemask_ps(h));
#else
  std::uint32_t mask = 0;
  for (int q = 0; q < 8; ++q) mask |= (static_cast<std::uint32_t>(hit[q]) & 1u) << q;
  return mask;
#endif
}

// Whether any lane of a comparison's result is set.
inline bool any_lane(v8i hit) {
#ifdef __AVX__
  __m256i h;
  std::memcpy(&h, &hit, sizeof h);
  return !_mm256_testz_si256(h, h);
#else
  return lane_mask(hit) != 0;
#endif
}

typedef float v8f __attribute__((vector_size(32)));

// Lane-wise running sum, sum of squares and largest magnitude, in float. A
// NaN or Inf makes the sums non-finite, and the caller redoes the block in
// double.
struct MomentLanes {
  v8f a{}, q{}, mm{};
  // Adds eight values; returns their magnitudes' bits.
  v8i add(const float* p) {
    v8f v;
    std::memcpy(&v, p, sizeof v);
    a += v;
    q += v * v;
    v8i u;
    std::memcpy(&u, &v, sizeof u);
    u &= 0x7fffffff;
    std::memcpy(&v, &u, sizeof v);
    mm = mm > v ? mm : v;
    return u;
  }
  void merge(const MomentLanes& o) {
    a += o.a;
    q += o.q;
    mm = mm > o.mm ? mm : o.mm;
  }
  void finish(float& s, float& s2, float& mx) const {
    for (int l = 0; l < 8; ++l) {
      s += a[l];
      s2 += q[l];
      mx = std::max(mx, mm[l]);
    }
  }
};

// The same interface without the moments, for a window pass whose caller
// does not read them (the exact method): the loop is then a load, a mask
// and a compare per eight values, four vector operations fewer.
struct NoMoments {
  v8i add(const float* p) {
    v8i u;
    std::memcpy(&u, p, sizeof u);
    return u & 0x7fffffff;
  }
  void merge(const NoMoments&) {}
  void finish(float&, float&, float&) const {}
};

inline void add_moments(float v, float& s, float& s2, float& mx) {
  s += v;
  s2 += v * v;
  mx = std::max(mx, std::fabs(v));
}

// The moments of a block. Four sets of lanes: with one running sum (omp
// simd) every add waits on the previous one, and this loop becomes a large
// share of the kernel's time.
inline void block_moments(const float* x, std::int64_t m, float& s, float& s2, float& mx) {
  MomentLanes l0, l1, l2, l3;
  std::int64_t i = 0;
  for (; i + 32 <= m; i += 32) {
    prefetch_ahead(x + i);
    l0.add(x + i), l1.add(x + i + 8), l2.add(x + i + 16), l3.add(x + i + 24);
  }
  for (; i + 8 <= m; i += 8) l0.add(x + i);
  l0.merge(l1), l2.merge(l3), l0.merge(l2);
  l0.finish(s, s2, mx);
  for (; i < m; ++i) add_moments(x[i], s, s2, mx);
}

// lo > 0: the caller histograms a window (the upper tail around an
// estimate), and most values fall below it. Thirty-two values at a time are
// compared with lo in four vectors whose results are or-ed and tested once;
// a group with a lane at or above lo appends those lanes' indices and
// values to the thread's list, one 32-bit mask walked in one loop. Nothing
// else happens there: the group's branch is mispredicted whenever it is
// taken, and every further data-dependent branch (a loop per vector,
// the classification) would be mispredicted too, which took more time than
// reading the block. The listed values are classified after the pass
// (classify_listed), from the list. The block's moments are taken in the
// same pass: each value is loaded once, into registers.
template <class Lanes = MomentLanes>
void window_moments(const float* x, std::int64_t base, std::int64_t m, std::uint32_t lo, Local& L, float& s,
                    float& s2, float& mx) {
  Lanes l0, l1, l2, l3;
  L.reserve(m);
  L.windowed += m;
  std::int64_t* idx = L.list->idx.data() + L.listed;
  float* val = L.list->val.data() + L.listed;
  std::int64_t c = 0;
  const v8i edge = v8i{} + static_cast<std::int32_t>(lo);
  auto list = [&](std::uint32_t mask, std::int64_t i) {
    for (; mask; mask &= mask - 1) {
      const int l = __builtin_ctz(mask);
      idx[c] = base + i + l;
      val[c++] = x[i + l];
    }
  };
  std::int64_t i = 0;
  for (; i + 32 <= m; i += 32) {
    prefetch_ahead(x + i);
    const v8i a = l0.add(x + i), b = l1.add(x + i + 8), cc = l2.add(x + i + 16), d = l3.add(x + i + 24);
    if (!any_lane((a >= edge) | (b >= edge) | (cc >= edge) | (d >= edge))) [[likely]]
      continue;
    list(lane_mask(a >= edge) | lane_mask(b >= edge) << 8 | lane_mask(cc >= edge) << 16 | lane_mask(d >= edge) << 24, i);
  }
  for (; i + 8 <= m; i += 8) list(lane_mask(l0.add(x + i) >= edge), i);
  l0.merge(l1), l2.merge(l3), l0.merge(l2);
  l0.finish(s, s2, mx);
  for (; i < m; ++i) {
    if constexpr (std::is_same_v<Lanes, MomentLanes>) add_moments(x[i], s, s2, mx);
    if (abs_bits(x[i]) >= lo) list(1u, i);
  }
  L.listed += c;
}

// After the window pass: the thread's listed values (all at or above lo)
// into the histogram, `above` and `nonfinite`; non-finite ones leave the
// list, which stays in index order.
void classify_listed(std::uint32_t lo, std::uint32_t hi, int shift, std::int64_t bins, Local& L) {
  std::uint32_t* h = L.hist;
  std::int64_t* idx = L.list->idx.data();
  float* val = L.list->val.data();
  L.below += static_cast<std::uint64_t>(L.windowed - L.listed);
  std::int64_t kept = 0;
  for (std::int64_t j = 0; j < L.listed; ++j) {
    const std::uint32_t u = abs_bits(val[j]);
    if (u >= kInfBits) {
      ++L.nonfinite;
      continue;
    }
    if (u >= hi) ++L.above;
    else ++h[(j % kHistCopies) * bins + ((u - lo) >> shift)];
    idx[kept] = idx[j];
    val[kept++] = val[j];
  }
  L.listed = kept;
}

// Copies the thread's list to its place in the caller's arrays: threads
// own ascending, contiguous slices, so the lists concatenated in thread
// order are ascending. Entries past capacity are counted, not written.
void write_listed(const std::vector<Local>& locals, int t, std::int64_t* candidates, float* candidate_values,
                  std::int64_t capacity) {
  std::int64_t at = 0;
  for (int u = 0; u < t; ++u) at += locals[u].listed;
  const Local& L = locals[t];
  const std::int64_t count = std::clamp<std::int64_t>(capacity - at, 0, L.listed);
  if (count == 0) return;
  std::copy_n(L.list->idx.data(), count, candidates + at);
  if (candidate_values) std::copy_n(L.list->val.data(), count, candidate_values + at);
}

// lo = 0, no candidates (the full-range pass). FullRange: lo = 0 and hi =
// +inf bits, so only the non-finite test remains.
template <bool FullRange>
void bin_block(const float* x, std::int64_t m, std::uint32_t lo, std::uint32_t hi, int shift, std::int64_t bins,
               Local& L) {
  for (std::int64_t i = 0; i < m; ++i) {
    std::uint32_t* h = L.hist + (i % kHistCopies) * bins;
    const std::uint32_t u = abs_bits(x[i]);
    if (u >= kInfBits) {
      ++L.nonfinite;
    } else if (FullRange) {
      ++h[u >> shift];
    } else if (u < lo) {
      ++L.below;
    } else if (u >= hi) {
      ++L.above;
    } else {
      ++h[(u - lo) >> shift];
    }
  }
}

}  // namespace

void topk_histogram(const float* x, std::int64_t n, std::uint32_t lo, std::uint32_t hi, int shift,
                    std::int64_t bins, std::uint64_t* hist, double* moments, std::uint64_t* outside,
                    std::int64_t* candidates, std::uint64_t* candidate_count, std::int64_t capacity,
                    bool want_moments, float* candidate_values) {
  const bool collect = candidates != nullptr;
  const bool full = lo == 0 && hi == kInfBits;
  // Collecting with lo = 0 lists every finite value: allowed, through the
  // window loop, which lists.
  const bool window = collect || lo > 0;
  std::vector<Local> locals(omp_get_max_threads());
  const std::int64_t blocks = (n + kBlock - 1) / kBlock;
#pragma omp parallel
  {
    const int t = omp_get_thread_num();
    Local& L = locals[t];
    L.list = &t_scratch;
    L.list->hist.assign(kHistCopies * bins, 0);
    L.hist = L.list->hist.data();
#pragma omp for schedule(static)
    for (std::int64_t b = 0; b < blocks; ++b) {
      const float* xb = x + b * kBlock;
      const std::int64_t m = std::min(kBlock, n - b * kBlock);
      // Moments: float partial sums over one block (<= 2048 terms), added
      // into double. NaN/Inf (or float overflow) poison the block sums, and
      // only then is the block redone in double, skipping non-finite values.
      float s = 0, s2 = 0, mx = 0;
      if (window && !want_moments) window_moments<NoMoments>(xb, b * kBlock, m, lo, L, s, s2, mx);
      else if (window) window_moments(xb, b * kBlock, m, lo, L, s, s2, mx);
      else block_moments(xb, m, s, s2, mx);
      if (std::isfinite(s2) && std::isfinite(s) && std::isfinite(mx)) {
        L.sum += s;
        L.sumsq += s2;
        L.maxabs = std::max(L.maxabs, mx);
      } else {
        for (std::int64_t i = 0; i < m; ++i)
          if (std::isfinite(xb[i])) {
            L.sum += xb[i];
            L.sumsq += static_cast<double>(xb[i]) * xb[i];
            L.maxabs = std::max(L.maxabs, std::fabs(xb[i]));
          }
      }
      if (!window) {
        if (full) bin_block<true>(xb, m, lo, hi, shift, bins, L);
        else bin_block<false>(xb, m, lo, hi, shift, bins, L);
      }
    }
    if (window) classify_listed(lo, hi, shift, bins, L);
    if (collect) {
#pragma omp barrier
      write_listed(locals, t, candidates, candidate_values, capacity);
    }
    if (L.list->idx.size() > kKeptListEntries) L.list->idx = {}, L.list->val = {};
  }
  std::fill(hist, hist + bins, 0);
  double sum = 0, sumsq = 0;
  float maxabs = 0;
  std::uint64_t below = 0, above = 0, nonfinite = 0, listed = 0;
  for (auto& L : locals) {
    if (L.hist == nullptr) continue;
    for (int c = 0; c < kHistCopies; ++c)
      for (std::int64_t i = 0; i < bins; ++i) hist[i] += L.hist[c * bins + i];
    sum += L.sum;
    sumsq += L.sumsq;
    maxabs = std::max(maxabs, L.maxabs);
    below += L.below;
    above += L.above;
    nonfinite += L.nonfinite;
    listed += static_cast<std::uint64_t>(L.listed);
  }
  if (collect) candidate_count[0] = listed;
  moments[0] = sum;
  moments[1] = sumsq;
  moments[2] = maxabs;
  outside[0] = below;
  outside[1] = above;
  outside[2] = nonfinite;
}

}  // namespace accel::cpu
