// The gathered exchange's tree (Task::tree): past a member count, members
// send their contribution up a binary tree instead of to the coordinator,
// each summing its children's partials with its own (the workload's
// combine()), so a member receives at most two partials a round and the
// coordinator two, whatever P (docs/design.md, "Aggregation past tens of
// members").
//
// The count stays exact by one rule: the coordinator takes a partial only
// if none of its members is counted yet and every one is still awaited;
// at half the timeout it asks each member it still misses for its own
// contribution directly (members keep theirs until the decision), so a
// late partial of a slow parent is dropped whole rather than counted twice.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <span>
#include <vector>

#include "protocol.hpp"

namespace accel::cluster {

// Two children a member: an interior member receives two partials of K x d
// doubles and the decision, within the 3 x K x d x 8 bytes a round that
// the scale target allows; a wider tree would be shallower but not that.
constexpr std::size_t kTreeFanout = 2;

// Where `self` sits in round t's tree over `active` (the view's active
// members, the coordinator 0 among them): the coordinator is the root, the
// others follow in id order, breadth first. parent is 0 for the root's
// children; nullopt where self is not in the view.
struct TreeSpot {
  std::uint32_t parent = 0;
  std::vector<std::uint32_t> children;
};
std::optional<TreeSpot> tree_spot(const std::vector<std::uint32_t>& active, std::uint32_t self);
// Every member's parent in the same tree (the coordinator's children: 0).
std::map<std::uint32_t, std::uint32_t> tree_parents(const std::vector<std::uint32_t>& active);

// Members' contributions on their way up: each member's engine fields
// (`heads`, its data left empty) and the workload bytes they sum to, one
// sum per run of contributions the workload could combine.
struct Partial {
  struct Head {
    std::uint32_t id = 0;
    std::uint32_t sum = 0;  // index into sums
    std::int64_t work_rows = 0;
    double work_seconds = 0;
    std::int64_t room = -1;
  };
  std::vector<Head> heads;
  std::vector<Bytes> sums;
};

// One member's own contribution as a partial.
Partial own_partial(std::uint32_t id, const Contribution& c);
Bytes encode(const Partial& p);
// Throws InputError: ids repeated, a sum nobody is in, or past the limits.
Partial decode_partial(std::span<const std::byte> in, const Limits& l);

// a's sums combined with b's (a workload's combine(): nullopt where two
// contributions do not add up, then b's stays a sum of its own). False,
// leaving `into` as it was, where b shares a member with it.
using Combine = std::function<std::optional<Bytes>(std::span<const std::byte>, std::span<const std::byte>)>;
bool merge(Partial& into, const Partial& b, const Combine& combine);

}  // namespace accel::cluster
