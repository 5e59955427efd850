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
  // is room for: what it keeps stays its first rows. One that takes lost
  // rows (the others had no room for them) gives none: it would have to
  // take its own rows back.
  for (std::size_t i = 0; i < in.workers.size() && room > 0; ++i) {
    const auto w = in.workers[i];
    const std::int64_t give = std::min(in.kept[w] - target[i], room);
    if (give <= 0 || give * 64 < target[i] || deficit[i] > 0) continue;
    sources.push_back({w, in.begin[w] + in.kept[w] - give, give});
    room -= give;
  }
  // The sources fit in the deficits of workers other than their home (a
  // giver has none), so each source finds its workers. Should rounding
  // leave rows of one all the same, they go to the worker with the most
  // room left, past nobody's room where any has it.
  const std::vector<std::int64_t> planned = deficit;
  std::vector<Move> out;
  // Each worker holds one piece of a member's rows at most (pieces are kept
  // by home): one with a piece of this source other than its last is out.
  const auto roomiest = [&](std::uint32_t home, std::size_t first) {
    std::size_t best = deficit.size();
    std::int64_t left = -1;
    for (std::size_t j = 0; j < deficit.size(); ++j) {
      if (in.workers[j] == home) continue;
      if (std::any_of(out.begin() + static_cast<std::ptrdiff_t>(first), out.end(),
                      [&](const Move& m) { return m.by == in.workers[j] && &m != &out.back(); }))
        continue;
      const std::int64_t most = most_of(in, j);
      const std::int64_t l = most == kAny ? kAny : most - (planned[j] - deficit[j]);
      if (l > left) best = j, left = l;
    }
    return best;
  };
  for (const Source& s : sources) {
    const std::size_t first = out.size();
    std::size_t i = 0;  // each worker takes one piece of a source at most: i only moves on within it
    for (std::int64_t at = s.begin, end = s.begin + s.rows; at < end;) {
      while (i < deficit.size() && (deficit[i] == 0 || in.workers[i] == s.home)) ++i;
      if (i == deficit.size()) {
        const std::size_t j = roomiest(s.home, first);
        if (j == deficit.size()) break;  // a lone worker's own rows: nobody else to give them to
        if (out.size() > first && out.back().by == in.workers[j]) out.back().rows += end - at;
        else out.push_back({s.home, in.workers[j], at, end - at, 0});
        deficit[j] -= end - at;
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
