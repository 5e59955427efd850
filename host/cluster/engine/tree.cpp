#include "tree.hpp"

#include <algorithm>
#include <set>

#include "errors.hpp"

namespace accel::cluster {

namespace {

// The tree's members breadth first: the coordinator, then the others by id.
std::vector<std::uint32_t> tree_order(const std::vector<std::uint32_t>& active) {
  std::vector<std::uint32_t> order(active);
  std::sort(order.begin(), order.end());
  order.erase(std::unique(order.begin(), order.end()), order.end());
  if (order.empty() || order[0] != 0) order.insert(order.begin(), 0u);  // sorted: 0 leads where it is there
  return order;
}

}  // namespace

std::map<std::uint32_t, std::uint32_t> tree_parents(const std::vector<std::uint32_t>& active) {
  const auto order = tree_order(active);
  std::map<std::uint32_t, std::uint32_t> parent;
  for (std::size_t k = 1; k < order.size(); ++k) parent[order[k]] = order[(k - 1) / kTreeFanout];
  return parent;
}

std::optional<TreeSpot> tree_spot(const std::vector<std::uint32_t>& active, std::uint32_t self) {
  const auto order = tree_order(active);
  const auto at = std::find(order.begin(), order.end(), self);
  if (at == order.end()) return std::nullopt;
  const std::size_t k = static_cast<std::size_t>(at - order.begin());
  TreeSpot s;
  s.parent = k == 0 ? 0 : order[(k - 1) / kTreeFanout];
  for (std::size_t c = k * kTreeFanout + 1; c <= k * kTreeFanout + kTreeFanout && c < order.size(); ++c)
    s.children.push_back(order[c]);
  return s;
}

Partial own_partial(std::uint32_t id, const Contribution& c) {
  Partial p;
  p.heads.push_back({id, 0, c.work_rows, c.work_seconds, c.room});
  p.sums.push_back(c.data);
  return p;
}

Bytes encode(const Partial& p) {
  Out o;
  o.put<std::uint64_t>(p.heads.size());
  for (const auto& h : p.heads) {
    o.put(h.id);
    o.put(h.sum);
    o.put(h.work_rows);
    o.put(h.work_seconds);
    o.put(h.room);
  }
  o.put<std::uint64_t>(p.sums.size());
  for (const auto& s : p.sums) o.bytes(s);
  return std::move(o.b);
}

Partial decode_partial(std::span<const std::byte> in, const Limits& l) {
  In i(in);
  Partial p;
  const auto n = i.get<std::uint64_t>();
  if (n == 0 || n > static_cast<std::uint64_t>(l.max_peers)) throw InputError("partial of " + std::to_string(n) + " members");
  std::set<std::uint32_t> ids;
  for (std::uint64_t k = 0; k < n; ++k) {
    Partial::Head h;
    h.id = i.get<std::uint32_t>();
    h.sum = i.get<std::uint32_t>();
    h.work_rows = i.get<std::int64_t>();
    h.work_seconds = i.get<double>();
    h.room = i.get<std::int64_t>();
    if (h.id == 0 || !ids.insert(h.id).second) throw InputError("partial names member " + std::to_string(h.id) + " wrongly");
    if (h.work_rows < 0 || !(h.work_seconds >= 0) || h.work_seconds > 1e9 || h.room < -1)
      throw InputError("partial with impossible work figures");
    p.heads.push_back(h);
  }
  const auto s = i.get<std::uint64_t>();
  if (s == 0 || s > n) throw InputError("partial of " + std::to_string(n) + " members in " + std::to_string(s) + " sums");
  std::vector<bool> used(s, false);
  for (const auto& h : p.heads) {
    if (h.sum >= s) throw InputError("partial with a member in no sum");
    used[h.sum] = true;
  }
  if (std::find(used.begin(), used.end(), false) != used.end()) throw InputError("partial with a sum of no member");
  for (std::uint64_t k = 0; k < s; ++k) p.sums.push_back(i.bytes(l.max_data));
  i.end();
  return p;
}

bool merge(Partial& into, const Partial& b, const Combine& combine) {
  for (const auto& h : b.heads)
    for (const auto& g : into.heads)
      if (g.id == h.id) return false;
  std::vector<std::uint32_t> where(b.sums.size());
  for (std::size_t j = 0; j < b.sums.size(); ++j) {
    std::optional<Bytes> c;
    if (!into.sums.empty()) c = combine(into.sums[0], b.sums[j]);
    if (c) {
      into.sums[0] = std::move(*c);
      where[j] = 0;
    } else {
      where[j] = static_cast<std::uint32_t>(into.sums.size());
      into.sums.push_back(b.sums[j]);
    }
  }
  for (auto h : b.heads) {
    h.sum = where[h.sum];
    into.heads.push_back(h);
  }
  return true;
}

}  // namespace accel::cluster
