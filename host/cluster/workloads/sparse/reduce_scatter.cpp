#include "reduce_scatter.hpp"

#include <algorithm>

#include "accel/sparse_allreduce.hpp"

namespace accel::cluster::sparse {

std::uint64_t range_begin(std::uint64_t n, std::size_t m, std::size_t j) {
  // n <= 2^32 and j <= m <= 2^16: the product fits in 64 bits.
  return m == 0 ? 0 : n * j / m;
}

std::vector<Bytes> shards(const StepView& mine, const std::vector<std::uint32_t>& owners, Mode next) {
  std::vector<Bytes> out;
  out.reserve(owners.size());
  const auto* first = mine.indices.data();
  const auto* last = first + mine.indices.size();
  const auto* at = first;
  for (std::size_t j = 0; j < owners.size(); ++j) {
    const auto* end = std::lower_bound(at, last, range_begin(mine.n, owners.size(), j + 1));
    Route r{next, owners[j], false, mine.indices.size(), owners, {mine.tag}};
    const auto b = static_cast<std::size_t>(at - first), c = static_cast<std::size_t>(end - at);
    out.push_back(encode(Kind::Shard, mine.n, mine.indices.subspan(b, c), mine.values.subspan(b, c), mine.tag, r));
    at = end;
  }
  return out;
}

namespace {

// Whether `s` is a shard for `self` split by `owners` over length n, its
// pairs inside self's range.
bool meant_for(const StepView& s, std::uint32_t self, const std::vector<std::uint32_t>& owners, std::uint64_t n) {
  if (s.kind != Kind::Shard || s.route.to != self || s.route.owners != owners || s.n != n) return false;
  const auto j = static_cast<std::size_t>(std::find(owners.begin(), owners.end(), self) - owners.begin());
  if (j == owners.size()) return false;
  return s.indices.empty() ||
         (s.indices.front() >= range_begin(n, owners.size(), j) && s.indices.back() < range_begin(n, owners.size(), j + 1));
}

}  // namespace

Bytes reduce(std::uint32_t self, const std::map<std::uint32_t, StepView>& steps,
             const std::vector<std::uint32_t>& owners, Mode next) {
  const auto mine = steps.find(self);
  const std::uint64_t n = mine == steps.end() ? 0 : mine->second.n;
  std::vector<std::uint32_t> senders;
  bool complete = mine != steps.end();
  for (const auto& [id, s] : steps) {
    if (s.kind != Kind::Shard) continue;
    senders.push_back(id);
    complete = complete && meant_for(s, self, owners, n);
  }
  complete = complete && senders == owners;
  Route r{next, self, complete, 0, owners, {}};
  if (!complete) return encode(Kind::Reduced, n, {}, {}, 0, r);
  const Merged m = merge(steps, Kind::Shard);
  if (m.indices.size() > kMaxSparsePairs) {
    // A sum longer than one contribution may be (its range drew more than
    // a member's worth of indices): every peer would refuse it. Incomplete
    // instead, and the step is redone as an allgather.
    r.complete = false;
    return encode(Kind::Reduced, n, {}, {}, 0, r);
  }
  for (const auto& [id, s] : steps) r.inputs += s.indices.size();
  r.tags = m.tags;
  return encode(Kind::Reduced, n, m.indices, m.values, 0, r);
}

std::optional<Merged> assemble(const std::map<std::uint32_t, StepView>& steps) {
  const StepView* lead = nullptr;  // the lowest id's Reduced: its owners are the step's
  for (const auto& [id, s] : steps)
    if (s.kind == Kind::Reduced) {
      lead = &s;
      break;
    }
  if (!lead) return std::nullopt;
  const auto& owners = lead->route.owners;
  if (owners.empty()) return std::nullopt;
  Merged m;
  m.n = lead->n;
  m.members = owners;
  m.tags = lead->route.tags;
  if (m.tags.size() != owners.size()) return std::nullopt;
  std::size_t total = 0;
  for (std::size_t j = 0; j < owners.size(); ++j) {
    const auto it = steps.find(owners[j]);
    if (it == steps.end()) return std::nullopt;
    const StepView& s = it->second;
    if (s.kind != Kind::Reduced || !s.route.complete || s.route.owners != owners || s.route.tags != m.tags ||
        s.n != m.n)
      return std::nullopt;
    if (!s.indices.empty() && (s.indices.front() < range_begin(m.n, owners.size(), j) ||
                               s.indices.back() >= range_begin(m.n, owners.size(), j + 1)))
      return std::nullopt;  // outside its range: the sums would not ascend
    total += s.indices.size();
  }
  m.indices.reserve(total);
  m.values.reserve(total);
  for (auto o : owners) {  // ranges ascend with the owners
    const StepView& s = steps.at(o);
    m.indices.insert(m.indices.end(), s.indices.begin(), s.indices.end());
    m.values.insert(m.values.end(), s.values.begin(), s.values.end());
  }
  return m;
}

Mode choose(std::size_t members, std::uint64_t inputs, std::uint64_t sum_pairs) {
  if (members < 2) return Mode::AllGather;
  const double m = static_cast<double>(members), share = (m - 1) / m;
  const double all_gather = 8.0 * static_cast<double>(inputs) * share;
  const double reduce_scatter = 8.0 * (static_cast<double>(inputs) / m + static_cast<double>(sum_pairs)) * share;
  return reduce_scatter + static_cast<double>(kRoundBytes) < all_gather ? Mode::ReduceScatter : Mode::AllGather;
}

}  // namespace accel::cluster::sparse
