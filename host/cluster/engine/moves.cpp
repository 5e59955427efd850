#include "moves.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>

#include "accel/perf_model.hpp"

namespace accel::cluster {
namespace {

struct Source {
  std::uint32_t home;
  std::int64_t begin, rows;
};

// Each worker's target share of the rows workers compute.
std::vector<std::int64_t> targets(const MovePlanInput& in, std::int64_t total) {
  std::vector<std::int64_t> t(in.workers.size(), 0);
  t[0] = total;
  return rebalance(t, in.rates, 0.0);
}

constexpr std::int64_t kAny = std::numeric_limits<std::int64_t>::max();

std::int64_t most_of(const MovePlanInput& in, std::size_t i) {
  return in.most.empty() || in.most[i] < 0 ? kAny : in.most[i];
}

// Deficits held to what each worker may take; of the lost rows that then
// find no place, each worker with room left takes a share by rate, as
// long as any has room.
void hold_to_room(const MovePlanInput& in, std::int64_t lost, std::vector<std::int64_t>& deficit) {
  for (std::size_t i = 0; i < deficit.size(); ++i) deficit[i] = std::min(deficit[i], most_of(in, i));
  for (std::size_t pass = 0; pass < deficit.size(); ++pass) {
    const std::int64_t placed = std::accumulate(deficit.begin(), deficit.end(), std::int64_t{0});
    if (placed >= lost) return;
    double rate = 0;
    for (std::size_t i = 0; i < deficit.size(); ++i)
      if (deficit[i] < most_of(in, i)) rate += in.rates[i];
    if (rate <= 0) return;
    for (std::size_t i = 0; i < deficit.size(); ++i)
      if (deficit[i] < most_of(in, i)) {
        const auto share = static_cast<std::int64_t>(std::ceil(static_cast<double>(lost - placed) * in.rates[i] / rate));
        deficit[i] += std::min(share, most_of(in, i) - deficit[i]);
      }
  }
}

}  // namespace

std::vector<Move> plan_moves(const MovePlanInput& in, const RowBytes& bytes) {
  if (in.workers.empty() || in.workers.size() != in.rates.size()) return {};
  std::int64_t total = 0;
  for (auto w : in.workers) total += in.kept[w];
  for (auto q : in.lost) total += in.kept[q];
  if (total == 0) return {};
  const auto target = targets(in, total);
  std::vector<Source> sources;
  for (auto q : in.lost)
    if (in.kept[q] > 0) sources.push_back({q, in.begin[q], in.kept[q]});
  std::vector<std::int64_t> deficit(in.workers.size(), 0);
  std::int64_t lost = 0;
  for (const Source& s : sources) lost += s.rows;
  for (std::size_t i = 0; i < in.workers.size(); ++i)
    deficit[i] = std::max<std::int64_t>(0, target[i] - in.kept[in.workers[i]]);
  hold_to_room(in, lost, deficit);
  // What the deficits take beyond the lost rows; when they take less, the
  // lost members' first rows stay where they are.
  std::int64_t room = std::accumulate(deficit.begin(), deficit.end(), std::int64_t{0});
  for (Source& s : sources) {
    const std::int64_t n = std::min(s.rows, room);
    s.begin += s.rows - n;
    s.rows = n;
    room -= n;
  }
  std::erase_if(sources, [](const Source& s) { return s.rows == 0; });
  // A worker over its target gives the end of its rows, as much as there
  // is room for: what it keeps stays its first rows.
  for (std::size_t i = 0; i < in.workers.size() && room > 0; ++i) {
    const auto w = in.workers[i];
    const std::int64_t give = std::min(in.kept[w] - target[i], room);
    if (give <= 0 || give * 64 < target[i]) continue;
    sources.push_back({w, in.begin[w] + in.kept[w] - give, give});
    room -= give;
  }
  // The deficits add up to the lost rows at least (the targets sum to the
  // rows workers compute), and the lost come first; should rounding leave
  // some, they extend the source's last piece, or go to the fastest.
  const auto fastest = static_cast<std::size_t>(std::max_element(in.rates.begin(), in.rates.end()) - in.rates.begin());
  std::vector<Move> out;
  for (const Source& s : sources) {
    const std::size_t first = out.size();
    std::size_t i = 0;  // each worker takes one piece of a source at most: i only moves on within it
    for (std::int64_t at = s.begin, end = s.begin + s.rows; at < end;) {
      while (i < deficit.size() && (deficit[i] == 0 || in.workers[i] == s.home)) ++i;
      if (i == deficit.size()) {
        if (out.size() > first) out.back().rows += end - at;
        else out.push_back({s.home, in.workers[in.workers[fastest] != s.home ? fastest : (fastest + 1) % deficit.size()],
                            at, end - at, 0});
        break;
      }
      const std::int64_t n = std::min(deficit[i], end - at);
      out.push_back({s.home, in.workers[i], at, n, 0});
      deficit[i] -= n;
      at += n;
    }
  }
  for (auto& m : out) m.bytes = bytes(m.begin, m.begin + m.rows);
  return out;
}

std::int64_t own_rows(std::uint32_t q, std::int64_t begin, std::int64_t kept, const std::vector<Move>& moves) {
  std::int64_t own = kept;
  for (const auto& m : moves)
    if (m.home == q) own = std::min(own, m.begin - begin);
  return std::max<std::int64_t>(own, 0);
}

}  // namespace accel::cluster
