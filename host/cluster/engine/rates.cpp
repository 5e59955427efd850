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

static int direction(std::int64_t from, std::int64_t to) { return to > from ? 1 : to < from ? -1 : 0; }

bool SwingDamper::reverses(const std::vector<std::uint32_t>& ids, const std::vector<std::int64_t>& loads,
                           const std::vector<std::int64_t>& target) const {
  for (std::size_t i = 0; i < ids.size(); ++i) {
    const auto it = last_.find(ids[i]);
    const int d = direction(loads[i], target[i]);
    if (it != last_.end() && d != 0 && d == -it->second) return true;
  }
  return false;
}

// The fraction of Algorithm 1's move to `target` that the next move makes.
// Not below 1/16: a member must still follow a load that changes later.
double SwingDamper::next_step(const std::vector<std::uint32_t>& ids, const std::vector<std::int64_t>& loads,
                              const std::vector<std::int64_t>& target) const {
  if (reverses(ids, loads, target)) return std::max(step_ / 2, 1.0 / 16);
  return std::min(step_ * 1.5, 1.0);
}

std::vector<std::int64_t> SwingDamper::damp(const std::vector<std::uint32_t>& ids,
                                            const std::vector<std::int64_t>& loads,
                                            const std::vector<std::int64_t>& target) const {
  const double step = next_step(ids, loads, target);
  if (step == 1) return target;
  std::vector<std::int64_t> next(loads.size());
  std::int64_t left = 0;  // rows the truncated steps did not place
  std::size_t largest = 0;
  for (std::size_t i = 0; i < loads.size(); ++i) {
    next[i] = loads[i] + static_cast<std::int64_t>(step * static_cast<double>(target[i] - loads[i]));
    left += target[i] - next[i];
    if (next[i] > next[largest]) largest = i;
  }
  // target and loads have one sum: `left` is what the truncations lost, at
  // most a row per member, and the largest load can take it either way.
  next[largest] += left;
  return next;
}

void SwingDamper::moved(const std::vector<std::uint32_t>& ids, const std::vector<std::int64_t>& loads,
                        const std::vector<std::int64_t>& next) {
  // `next` lies between loads and the target, in the target's direction:
  // it reverses what the target reverses.
  step_ = next_step(ids, loads, next);
  for (std::size_t i = 0; i < ids.size(); ++i)
    if (const int d = direction(loads[i], next[i])) last_[ids[i]] = d;
}

}  // namespace accel::cluster
