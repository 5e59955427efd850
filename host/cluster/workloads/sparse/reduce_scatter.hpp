// The sparse allreduce's reduce-scatter exchange (sparse_wire.hpp's Mode):
// the index range [0, n) is split among the step's owners (the members, in
// id order); in a first round each member sends each owner its pairs in the
// owner's range (Shard), each owner sums what it got, and in a second round
// sends its sum to every member (Reduced), who puts the sums side by side.
// Each member receives its share of the pairs plus the union once, where
// the allgather receives every other member's pairs: less when the members'
// indices overlap (dense unions), more rounds' latency always.
//
// The engine's barrier decides who counts in each round, but not that the
// owners a member split by are that round's members: a member lost between
// or during the two rounds, or one back, leaves some range without its
// sum. Every participant then finds the same second round incomplete (the
// second round is an ordinary broadcast, which the engine makes the same
// everywhere) and redoes the step as an allgather, which completes in one
// round with whoever is there.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <vector>

#include "sparse_wire.hpp"

namespace accel::cluster::sparse {

// Where owner j of m owners' range begins (owner m: n).
std::uint64_t range_begin(std::uint64_t n, std::size_t m, std::size_t j);

// First round: `mine`'s pairs cut at the owners' ranges, one Shard for each
// owner, in owners' order.
std::vector<Bytes> shards(const StepView& mine, const std::vector<std::uint32_t>& owners, Mode next);

// Second round's bytes of owner `self`: the member-order sum of the shards
// meant for it. Complete when the round's Shard senders are exactly
// `owners`, each split by the same owners and the same n, and sent to
// `self` pairs of its range; otherwise a Reduced without pairs that says so.
Bytes reduce(std::uint32_t self, const std::map<std::uint32_t, StepView>& steps,
             const std::vector<std::uint32_t>& owners, Mode next);

// The step's sum from a second round: when every owner sent a complete sum
// split by the same owners (and the same tags), their sums side by side;
// else nullopt, and the step is redone. Rounds whose senders are not all
// Reduced count only the owners'.
std::optional<Merged> assemble(const std::map<std::uint32_t, StepView>& steps);

// Rank 0's choice for the next step from the last one's `members`, their
// pairs in all (`inputs`) and the pairs of their sum: the bytes each member
// receives either way, the second round priced as kRoundBytes.
inline constexpr std::uint64_t kRoundBytes = 64 << 10;
Mode choose(std::size_t members, std::uint64_t inputs, std::uint64_t sum_pairs);

}  // namespace accel::cluster::sparse
