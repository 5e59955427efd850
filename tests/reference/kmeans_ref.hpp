// The plain reference every kmeans_assign implementation is checked against:
// direct squared distances in double, forward scan, ties to the lower index.
#pragma once

#include <cstdint>
#include <limits>
#include <vector>

namespace accel::ref {

struct KMeansAssignOut {
  std::vector<std::int32_t> labels;
  std::vector<double> sums;
  std::vector<std::int64_t> counts;
  double inertia = 0;
  // Distance gap between the best and second-best centroid per row; labels
  // of rows with a gap below float rounding may legitimately differ.
  std::vector<double> gap;
};

inline KMeansAssignOut kmeans_assign(const std::vector<float>& x, std::int64_t n, std::int64_t d,
                                     const std::vector<float>& c, std::int64_t k) {
  KMeansAssignOut o;
  o.labels.resize(n);
  o.sums.assign(k * d, 0.0);
  o.counts.assign(k, 0);
  o.gap.resize(n);
  for (std::int64_t i = 0; i < n; ++i) {
    double best = std::numeric_limits<double>::infinity(), second = best;
    std::int32_t arg = 0;
    for (std::int64_t kk = 0; kk < k; ++kk) {
      double s = 0;
      for (std::int64_t j = 0; j < d; ++j) {
        const double t = static_cast<double>(x[i * d + j]) - c[kk * d + j];
        s += t * t;
      }
      if (s < best) {
        second = best;
        best = s;
        arg = static_cast<std::int32_t>(kk);
      } else if (s < second) {
        second = s;
      }
    }
    o.labels[i] = arg;
    o.gap[i] = second - best;
    o.inertia += best;
    ++o.counts[arg];
    for (std::int64_t j = 0; j < d; ++j) o.sums[arg * d + j] += x[i * d + j];
  }
  return o;
}

}  // namespace accel::ref
