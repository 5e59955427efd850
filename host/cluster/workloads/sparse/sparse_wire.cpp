#include "sparse_wire.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <optional>
#include <utility>

#include "accel/error.hpp"
#include "accel/sparse_allreduce.hpp"

namespace accel::cluster::sparse {

Bytes encode(Kind kind, std::uint64_t n, std::span<const std::uint32_t> indices, std::span<const float> values,
             std::uint64_t tag, const Route& route) {
  Out o;
  o.b.reserve(11 * 8 + indices.size() * sizeof(std::uint32_t) + values.size() * sizeof(float) +
              route.owners.size() * 4 + route.tags.size() * 8);
  o.put(static_cast<std::uint64_t>(kind));
  o.put(n);
  o.put(tag);
  o.array(indices);
  o.array(values);
  o.put(static_cast<std::uint64_t>(route.next));
  o.put(static_cast<std::uint64_t>(route.to));
  o.put(static_cast<std::uint64_t>(route.complete));
  o.put(route.inputs);
  o.array(route.owners);
  o.array(route.tags);
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
  if (head[0] > static_cast<std::uint64_t>(Kind::Reduced)) throw InputError("sparse step of unknown kind");
  StepView s{static_cast<Kind>(head[0]), head[1], head[2], {}, {}, {}};
  std::size_t pos = 24;
  s.indices = array_at<std::uint32_t>(in, pos);
  s.values = array_at<float>(in, pos);
  In r(in.subspan(pos));
  const auto next = r.get<std::uint64_t>(), to = r.get<std::uint64_t>(), complete = r.get<std::uint64_t>();
  if (next > static_cast<std::uint64_t>(Mode::ReduceScatter) || to > 0xffffffffu || complete > 1)
    throw InputError("sparse step with a bad route");
  s.route.next = static_cast<Mode>(next);
  s.route.to = static_cast<std::uint32_t>(to);
  s.route.complete = complete != 0;
  s.route.inputs = r.get<std::uint64_t>();
  s.route.owners = r.array<std::uint32_t>(kMaxOwners);
  s.route.tags = r.array<std::uint64_t>(kMaxOwners);
  if (r.left()) throw InputError("sparse step has " + std::to_string(r.left()) + " trailing bytes");
  return s;
}

void set_next(Bytes& b, Mode next) {
  const StepView s = view(b);
  const std::size_t route = 4 * 8 + 8 + s.route.owners.size() * 4 + 8 + s.route.tags.size() * 8;
  const auto v = static_cast<std::uint64_t>(next);
  std::memcpy(b.data() + b.size() - route, &v, 8);
}

StepView validate(std::span<const std::byte> in) {
  StepView s = view(in);
  check_pairs(s.n, s.indices, s.values);
  const auto& owners = s.route.owners;
  for (std::size_t i = 1; i < owners.size(); ++i)
    if (owners[i] <= owners[i - 1]) throw InputError("sparse step's owners are not ascending");
  if ((s.kind == Kind::Shard || s.kind == Kind::Reduced) &&
      (owners.empty() || std::find(owners.begin(), owners.end(), s.route.to) == owners.end()))
    throw InputError("sparse step routed to " + std::to_string(s.route.to) + ", not one of its owners");
  return s;
}

namespace {

// v where `take` is 1, -0.0 where it is 0, by masks on the bits: a
// conditional on the float itself compiled to a branch.
inline float or_negative_zero(float v, std::uint32_t take) {
  std::uint32_t u;
  std::memcpy(&u, &v, sizeof u);
  u = (u & (0u - take)) | (0x80000000u & (take - 1u));
  std::memcpy(&v, &u, sizeof v);
  return v;
}

// a (+) b into out (room for both), ascending; returns the length. One
// output a step, branch free: the indices interleave at random, and a
// branch on which head is smaller mispredicts about every other time (so
// do the branches a compiler may make of the selects). Each step's loads
// wait on the last step's compare, so a merge runs at the latency of that
// chain: a long one is cut at a's middle index (and where it falls in b)
// into two merges of disjoint index ranges stepped together, whose chains
// overlap (1.45x; four, whose state no longer fits in registers, were
// slower than two). The upper half is written where it would begin if
// the lower had no index in common, and closed up after.
std::size_t merge_two(std::span<const std::uint32_t> ai, std::span<const float> av, std::span<const std::uint32_t> bi,
                      std::span<const float> bv, std::uint32_t* oi, float* ov) {
  const std::size_t na = ai.size(), nb = bi.size();
  struct Half {
    std::size_t i, ie, j, je, o;
  };
  auto live = [](const Half& h) { return h.i < h.ie && h.j < h.je; };
  auto step = [&](Half& h) {
    const std::uint32_t a = ai[h.i], b = bi[h.j];
    const std::uint32_t ta = a <= b, tb = b <= a;
    oi[h.o] = std::min(a, b);
    ov[h.o] = or_negative_zero(av[h.i], ta) + or_negative_zero(bv[h.j], tb);
    h.i += ta;
    h.j += tb;
    ++h.o;
  };
  auto finish = [&](Half& h) {
    while (live(h)) step(h);
    for (; h.i < h.ie; ++h.i, ++h.o) oi[h.o] = ai[h.i], ov[h.o] = av[h.i];
    for (; h.j < h.je; ++h.j, ++h.o) oi[h.o] = bi[h.j], ov[h.o] = bv[h.j];
  };
  if (na < 4096 || nb < 4096) {
    Half h{0, na, 0, nb, 0};
    finish(h);
    return h.o;
  }
  const std::size_t am = na / 2;
  const auto bm = static_cast<std::size_t>(std::lower_bound(bi.begin(), bi.end(), ai[am]) - bi.begin());
  Half lo{0, am, 0, bm, 0}, hi{am, na, bm, nb, am + bm};
  while (live(lo) && live(hi)) step(lo), step(hi);
  finish(lo);
  finish(hi);
  const std::size_t upper = hi.o - (am + bm);
  if (lo.o != am + bm) {
    std::memmove(oi + lo.o, oi + am + bm, upper * sizeof *oi);
    std::memmove(ov + lo.o, ov + am + bm, upper * sizeof *ov);
  }
  return lo.o + upper;
}

// Grows v to at least `size` elements, never shrinking it: kept buffers
// are zero-filled only where they grow.
template <class T>
T* at_least(std::vector<T>& v, std::size_t size) {
  if (v.size() < size) v.resize(size);
  return v.data();
}

}  // namespace

void merge_into(const std::map<std::uint32_t, StepView>& steps, Kind counted, Merged& m, MergeScratch& scratch) {
  m.n = 0;
  m.members.clear();
  m.tags.clear();
  m.closing = false;
  m.error.clear();
  std::vector<const StepView*> pairs;
  std::optional<std::uint32_t> first;
  std::size_t total = 0;
  for (const auto& [id, s] : steps) {
    if (s.kind == Kind::Closing && id == 0) m.closing = true;  // another member closing only leaves
    if (s.kind != counted) continue;
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
    m.indices.clear();
    m.values.clear();
    return;
  }
  // An index present on one side only keeps its value, which is what
  // adding -0.0 (the additive identity of every float, signed zeros
  // included) would give, so the sum is bitwise the left-to-right sum of
  // the values present.
  //
  // Member by member: sum <- sum (+) member p, in member order, each a
  // two-way merge, alternating between the output and a scratch pair so
  // that the last lands in the output. (Sorting all the pairs by index at
  // once moves each pair once a digit, where this moves the earlier
  // members' again for each later one, but its scattered writes took
  // longer at 4 members.)
  std::uint32_t* oi = at_least(m.indices, total);
  float* ov = at_least(m.values, total);
  std::size_t out = 0;
  if (pairs.size() == 1) {
    out = merge_two({}, {}, pairs[0]->indices, pairs[0]->values, oi, ov);
  } else if (pairs.size() > 1) {
    std::uint32_t* ti = at_least(scratch.indices, pairs.size() > 2 ? total : 0);
    float* tv = at_least(scratch.values, pairs.size() > 2 ? total : 0);
    // Merge p (p = 1 .. size - 1) writes buffer (size - 1 - p) % 2: the output for the last.
    std::uint32_t* bi[2] = {oi, ti};
    float* bv[2] = {ov, tv};
    const std::size_t last = pairs.size() - 1;
    out = merge_two(pairs[0]->indices, pairs[0]->values, pairs[1]->indices, pairs[1]->values, bi[(last - 1) % 2],
                    bv[(last - 1) % 2]);
    for (std::size_t p = 2; p < pairs.size(); ++p) {
      const std::size_t from = (last - p + 1) % 2, to = (last - p) % 2;
      out = merge_two({bi[from], out}, {bv[from], out}, pairs[p]->indices, pairs[p]->values, bi[to], bv[to]);
    }
  }
  m.indices.resize(out);
  m.values.resize(out);
}

Merged merge(const std::map<std::uint32_t, StepView>& steps, Kind counted) {
  Merged m;
  MergeScratch scratch;
  merge_into(steps, counted, m, scratch);
  return m;
}

}  // namespace accel::cluster::sparse
