#include "rates.hpp"

#include <algorithm>
#include <vector>

namespace accel::cluster {

void RateCollector::record(std::uint32_t member, double units, double seconds) {
  if (!(seconds > 0) || !(units > 0)) return;
  auto& last = last_[member];
  last.push_back(units / seconds);
  if (last.size() > kKept) last.pop_front();
}

std::optional<double> RateCollector::rate(std::uint32_t member) const {
  auto it = last_.find(member);
  if (it == last_.end() || it->second.empty()) return std::nullopt;
  std::vector<double> v(it->second.begin(), it->second.end());
  std::nth_element(v.begin(), v.begin() + v.size() / 2, v.end());
  return v[v.size() / 2];
}

bool DriftPolicy::drifted(const std::map<std::uint32_t, double>& seconds) {
  if (settling_ > 0) {
    --settling_;
    return false;
  }
  if (seconds.size() < 2) {
    streak_ = 0;
    return false;
  }
  double sum = 0, worst = 0;
  for (const auto& [id, s] : seconds) {
    sum += s;
    worst = std::max(worst, s);
  }
  const double mean = sum / static_cast<double>(seconds.size());
  streak_ = worst >= floor_ && worst > over_ * mean ? streak_ + 1 : 0;
  if (streak_ < rounds_) return false;
  streak_ = 0;
  return true;
}

}  // namespace accel::cluster
