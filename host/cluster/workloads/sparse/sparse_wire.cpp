#include "sparse_wire.hpp"

#include <cmath>
#include <optional>

#include "accel/error.hpp"
#include "accel/sparse_allreduce.hpp"

namespace accel::cluster::sparse {

Bytes encode(Kind kind, std::uint64_t n, std::span<const std::uint32_t> indices, std::span<const float> values,
             std::uint64_t tag) {
  Out o;
  o.b.reserve(1 + 4 * 8 + indices.size() * sizeof(std::uint32_t) + values.size() * sizeof(float));
  o.put(static_cast<std::uint8_t>(kind));
  o.put(n);
  o.put(tag);
  o.array(indices);
  o.array(values);
  return std::move(o.b);
}

void check_pairs(std::uint64_t n, std::span<const std::uint32_t> indices, std::span<const float> values) {
  if (n > (std::uint64_t{1} << 32)) throw InputError("sparse allreduce: length " + std::to_string(n) + " exceeds 2^32");
  if (indices.size() != values.size())
    throw InputError("sparse allreduce: " + std::to_string(indices.size()) + " indices but " +
                     std::to_string(values.size()) + " values");
  if (indices.size() > n || indices.size() > kMaxSparsePairs)
    throw InputError("sparse allreduce: " + std::to_string(indices.size()) + " pairs for length " + std::to_string(n) +
                     " (at most " + std::to_string(kMaxSparsePairs) + " a step)");
  for (std::size_t i = 0; i < indices.size(); ++i) {
    if (indices[i] >= n)
      throw InputError("sparse allreduce: index " + std::to_string(indices[i]) + " (pair " + std::to_string(i) +
                       ") is not below the length " + std::to_string(n));
    if (i > 0 && indices[i] <= indices[i - 1])
      throw InputError("sparse allreduce: indices not ascending and unique at pair " + std::to_string(i) + " (" +
                       std::to_string(indices[i - 1]) + ", " + std::to_string(indices[i]) + ")");
    if (!std::isfinite(values[i]))
      throw InputError("sparse allreduce: value at index " + std::to_string(indices[i]) + " is not finite");
  }
}

Step decode(std::span<const std::byte> in) {
  In i(in);
  Step s;
  const auto kind = i.get<std::uint8_t>();
  if (kind > static_cast<std::uint8_t>(Kind::Closing)) throw InputError("sparse step of unknown kind");
  s.kind = static_cast<Kind>(kind);
  s.n = i.get<std::uint64_t>();
  s.tag = i.get<std::uint64_t>();
  s.indices = i.array<std::uint32_t>(kMaxSparsePairs);
  s.values = i.array<float>(kMaxSparsePairs);
  i.end();
  check_pairs(s.n, s.indices, s.values);
  return s;
}

namespace {

// a + b for two ascending index lists; b's values added to a's.
void merge_into(std::vector<std::uint32_t>& ai, std::vector<float>& av, const Step& b) {
  std::vector<std::uint32_t> oi;
  std::vector<float> ov;
  oi.reserve(ai.size() + b.indices.size());
  ov.reserve(ai.size() + b.indices.size());
  std::size_t x = 0, y = 0;
  while (x < ai.size() || y < b.indices.size()) {
    if (y == b.indices.size() || (x < ai.size() && ai[x] < b.indices[y])) {
      oi.push_back(ai[x]);
      ov.push_back(av[x++]);
    } else if (x == ai.size() || b.indices[y] < ai[x]) {
      oi.push_back(b.indices[y]);
      ov.push_back(b.values[y++]);
    } else {
      oi.push_back(ai[x]);
      ov.push_back(av[x++] + b.values[y++]);
    }
  }
  ai.swap(oi);
  av.swap(ov);
}

}  // namespace

Merged merge(const std::map<std::uint32_t, Step>& steps) {
  Merged m;
  std::optional<std::uint32_t> first;
  for (const auto& [id, s] : steps) {
    if (s.kind == Kind::Closing && id == 0) m.closing = true;  // another member closing only leaves
    if (s.kind != Kind::Pairs) continue;
    if (!first) {
      first = id;
      m.n = s.n;
    } else if (s.n != m.n && m.error.empty()) {
      m.error = "sparse allreduce: members' lengths differ (member " + std::to_string(*first) +
                "'s is " + std::to_string(m.n) + ", member " + std::to_string(id) + "'s " + std::to_string(s.n) + ")";
    }
    m.members.push_back(id);
    m.tags.push_back(s.tag);
  }
  if (!m.error.empty()) {
    m.members.clear();
    m.tags.clear();
    return m;
  }
  for (const auto& [id, s] : steps)
    if (s.kind == Kind::Pairs) merge_into(m.indices, m.values, s);
  return m;
}

}  // namespace accel::cluster::sparse
