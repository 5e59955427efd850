#include "accel/perf_model.hpp"

#include <algorithm>
#include <cmath>
#include <numeric>

namespace accel {

void PerfModel::record(const ShapeKey& key, std::int64_t rows, double seconds) {
  if (rows <= 0 || !(seconds > 0)) return;
  const double r = rows / seconds;
  std::lock_guard lock(mu_);
  auto [it, fresh] = rate_.try_emplace(key, r);
  if (!fresh) it->second = 0.7 * it->second + 0.3 * r;
}

std::optional<double> PerfModel::rows_per_second(const ShapeKey& key) const {
  std::lock_guard lock(mu_);
  auto it = rate_.find(key);
  if (it == rate_.end()) return std::nullopt;
  return it->second;
}

std::vector<std::int64_t> rebalance(const std::vector<std::int64_t>& loads,
                                    const std::vector<double>& capability,
                                    double tolerance) {
  const std::size_t n = loads.size();
  std::vector<std::int64_t> out = loads;
  if (n == 0) return out;
  const std::int64_t total = std::accumulate(loads.begin(), loads.end(), std::int64_t{0});
  double cap_sum = 0;
  for (double c : capability) cap_sum += std::max(c, 0.0);
  if (cap_sum <= 0) return out;

  // Step 4: target loads, rounded so they still sum to the total.
  std::vector<std::int64_t> target(n);
  std::int64_t assigned = 0;
  for (std::size_t i = 0; i < n; ++i) {
    target[i] = static_cast<std::int64_t>(std::floor(total * std::max(capability[i], 0.0) / cap_sum));
    assigned += target[i];
  }
  for (std::size_t i = 0; assigned < total; i = (i + 1) % n) {
    if (capability[i] > 0) { ++target[i]; ++assigned; }
  }

  // Step 5: H (above target), L (below), E (within tolerance).
  const auto slack = static_cast<std::int64_t>(std::ceil(tolerance * total / static_cast<double>(n)));
  std::vector<std::size_t> high, low;
  for (std::size_t i = 0; i < n; ++i) {
    if (out[i] > target[i] + slack) high.push_back(i);
    else if (out[i] < target[i] - slack) low.push_back(i);
  }
  // Steps 6-8: move load from an H unit to an L unit until one set empties.
  while (!high.empty() && !low.empty()) {
    const std::size_t h = high.back(), l = low.back();
    const std::int64_t move = std::min(out[h] - target[h], target[l] - out[l]);
    out[h] -= move;
    out[l] += move;
    if (out[h] <= target[h] + slack) high.pop_back();
    if (out[l] >= target[l] - slack) low.pop_back();
  }
  return out;
}

}  // namespace accel
