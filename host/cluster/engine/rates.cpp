#include "rates.hpp"

#include <algorithm>

namespace accel::cluster {

void RateCollector::record(std::uint32_t member, double units, double seconds) {
  if (!(seconds > 0) || !(units > 0)) return;
  const double r = units / seconds;
  auto [it, fresh] = rate_.try_emplace(member, r);
  // Half weight to the newest round: a member that slows down is followed
  // within a few rounds, one noisy round moves the rate half way at most.
  if (!fresh) it->second = 0.5 * it->second + 0.5 * r;
}

std::optional<double> RateCollector::rate(std::uint32_t member) const {
  auto it = rate_.find(member);
  if (it == rate_.end()) return std::nullopt;
  return it->second;
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
