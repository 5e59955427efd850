// Plain references for the top-k kernels: a histogram by direct
// classification, and the k-th largest magnitude by a full sort.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <functional>
#include <vector>

namespace accel::ref {

struct HistogramOut {
  std::vector<std::uint64_t> hist;
  double sum = 0, sumsq = 0, maxabs = 0;
  std::uint64_t below = 0, above = 0, nonfinite = 0;
  std::vector<std::int64_t> candidates;  // ascending
};

inline HistogramOut topk_histogram(const std::vector<float>& x, std::uint32_t lo, std::uint32_t hi, int shift,
                                   std::int64_t bins) {
  HistogramOut o;
  o.hist.assign(bins, 0);
  for (std::size_t i = 0; i < x.size(); ++i) {
    std::uint32_t u;
    std::memcpy(&u, &x[i], 4);
    u &= 0x7fffffffu;
    if (!std::isfinite(x[i])) {
      ++o.nonfinite;
      continue;
    }
    o.sum += x[i];
    o.sumsq += static_cast<double>(x[i]) * x[i];
    o.maxabs = std::max<double>(o.maxabs, std::fabs(x[i]));
    if (u < lo) {
      ++o.below;
      continue;
    }
    o.candidates.push_back(static_cast<std::int64_t>(i));
    if (u >= hi) ++o.above;
    else ++o.hist[(u - lo) >> shift];
  }
  return o;
}

// The k-th largest finite |x| (k >= 1).
inline float kth_largest_magnitude(const std::vector<float>& x, std::int64_t k) {
  std::vector<float> m;
  for (float v : x)
    if (std::isfinite(v)) m.push_back(std::fabs(v));
  std::sort(m.begin(), m.end(), std::greater<float>());
  return m[k - 1];
}

}  // namespace accel::ref
