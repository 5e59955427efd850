#include "sparse_wire.hpp"

#include <cmath>
#include <cstring>
#include <limits>
#include <optional>

#include "accel/error.hpp"
#include "accel/sparse_allreduce.hpp"

namespace accel::cluster::sparse {

Bytes encode(Kind kind, std::uint64_t n, std::span<const std::uint32_t> indices, std::span<const float> values,
             std::uint64_t tag) {
  Out o;
  o.b.reserve(5 * 8 + indices.size() * sizeof(std::uint32_t) + values.size() * sizeof(float));
  o.put(static_cast<std::uint64_t>(kind));
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

namespace {

template <class T>
std::span<const T> array_at(std::span<const std::byte> in, std::size_t& pos) {
  if (in.size() - pos < 8) throw InputError("sparse step truncated");
  std::uint64_t count;
  std::memcpy(&count, in.data() + pos, 8);
  pos += 8;
  if (count > kMaxSparsePairs) throw InputError("sparse step of " + std::to_string(count) + " pairs");
  if ((in.size() - pos) / sizeof(T) < count) throw InputError("sparse step truncated");
  const std::byte* at = in.data() + pos;
  // The layout keeps the arrays aligned; a buffer that is not (never one of
  // ours) is refused rather than read misaligned.
  if (reinterpret_cast<std::uintptr_t>(at) % alignof(T) != 0) throw InputError("sparse step misaligned");
  pos += count * sizeof(T);
  return {reinterpret_cast<const T*>(at), count};
}

}  // namespace

StepView view(std::span<const std::byte> in) {
  if (in.size() < 24) throw InputError("sparse step truncated");
  std::uint64_t head[3];
  std::memcpy(head, in.data(), 24);
  if (head[0] > static_cast<std::uint64_t>(Kind::Closing)) throw InputError("sparse step of unknown kind");
  StepView s{static_cast<Kind>(head[0]), head[1], head[2], {}, {}};
  std::size_t pos = 24;
  s.indices = array_at<std::uint32_t>(in, pos);
  s.values = array_at<float>(in, pos);
  if (pos != in.size()) throw InputError("sparse step has " + std::to_string(in.size() - pos) + " trailing bytes");
  return s;
}

StepView validate(std::span<const std::byte> in) {
  const StepView s = view(in);
  check_pairs(s.n, s.indices, s.values);
  return s;
}

Merged merge(const std::map<std::uint32_t, StepView>& steps) {
  Merged m;
  std::vector<const StepView*> pairs;
  std::optional<std::uint32_t> first;
  std::size_t total = 0;
  for (const auto& [id, s] : steps) {
    if (s.kind == Kind::Closing && id == 0) m.closing = true;  // another member closing only leaves
    if (s.kind != Kind::Pairs) continue;
    if (!first) {
      first = id;
      m.n = s.n;
    } else if (s.n != m.n && m.error.empty()) {
      m.error = "sparse allreduce: members' lengths differ (member " + std::to_string(*first) + "'s is " +
                std::to_string(m.n) + ", member " + std::to_string(id) + "'s " + std::to_string(s.n) + ")";
    }
    m.members.push_back(id);
    m.tags.push_back(s.tag);
    if (!s.indices.empty()) pairs.push_back(&s);  // counted, with nothing to merge
    total += s.indices.size();
  }
  if (!m.error.empty()) {
    m.members.clear();
    m.tags.clear();
    return m;
  }
  // k-way merge without data-dependent branches (the members' indices
  // interleave at random, and a branch per head mispredicted about every
  // other time): each member's head index (past its end: kDone), their
  // minimum, and that index's sum as -0.0 plus, in member order, each
  // member's value there or -0.0. -0.0 is the additive identity for every
  // float, signed zeros included, so the sum is bitwise the left-to-right
  // sum of the values present.
  m.indices.resize(total);
  m.values.resize(total);
  const std::size_t k = pairs.size();
  std::vector<std::size_t> at(k, 0), slot(k, 0), size(k);  // slot: at, or 0 past the end (always readable)
  std::vector<std::uint64_t> head(k);
  constexpr std::uint64_t kDone = std::numeric_limits<std::uint64_t>::max();
  for (std::size_t p = 0; p < k; ++p) {
    size[p] = pairs[p]->indices.size();  // never 0 here
    head[p] = pairs[p]->indices[0];
  }
  std::size_t out = 0;
  for (;;) {
    std::uint64_t next = kDone;
    for (std::size_t p = 0; p < k; ++p) next = std::min(next, head[p]);
    if (next == kDone) break;
    float sum = -0.0f;
    for (std::size_t p = 0; p < k; ++p) {
      const bool here = head[p] == next;
      const float v = pairs[p]->values[slot[p]];
      sum += here ? v : -0.0f;
      at[p] += here;
      slot[p] = at[p] < size[p] ? at[p] : 0;
      const std::uint64_t h = pairs[p]->indices[slot[p]];
      head[p] = at[p] < size[p] ? h : kDone;
    }
    m.indices[out] = static_cast<std::uint32_t>(next);
    m.values[out] = sum;
    ++out;
  }
  m.indices.resize(out);
  m.values.resize(out);
  return m;
}

}  // namespace accel::cluster::sparse
