// A member's step of the sparse allreduce on the wire, and the merge that
// turns the members' pairs into their sum.
//
// Layout (little-endian): u64 kind, u64 n, u64 tag, u64 count, u32
// indices[count], u64 count, f32 values[count], then the route: u64 next,
// u64 to, u64 complete, u64 inputs, u64 count, u32 owners[count], u64
// count, u64 tags[count]. Every field is 8 bytes before the arrays, so both
// pair arrays sit 4-byte aligned in a received buffer and are read in place
// (StepView), without copies; the route's few values are copied.
#pragma once

#include <cstdint>
#include <map>
#include <span>
#include <string>
#include <vector>

#include "codec.hpp"

namespace accel::cluster::sparse {

enum class Kind : std::uint64_t {
  Pairs = 0,    // this member's pairs of the step
  Idle = 1,     // a returning member's first round (nobody counts it)
  Closing = 2,  // the member closed the group: member 0 ends the job, another leaves it
  // Reduce-scatter (reduce_scatter.hpp), two rounds a step:
  Shard = 3,    // first: this member's pairs in one owner's index range, to that owner
  Reduced = 4,  // second: an owner's sum of its range, to every member
};

// The exchange of a step: every member's pairs to every member (one round;
// each merges all), or each owner of an index range gets the pairs there,
// sums them and sends its sum to all (two rounds; for unions dense enough
// that the sums are much shorter than the members' pairs together).
enum class Mode : std::uint64_t { AllGather = 0, ReduceScatter = 1 };

// What travels beside the pairs. Every kind carries `next`; the rest is
// reduce-scatter's.
struct Route {
  Mode next = Mode::AllGather;  // rank 0's exchange for the next new step (rank 0's word counts)
  std::uint32_t to = 0;         // Shard: the owner it is meant for
  bool complete = false;        // Reduced: the owner summed a shard meant for it from each owner
  std::uint64_t inputs = 0;     // Shard: the sender's pairs in all; Reduced: the pairs its shards held
  std::vector<std::uint32_t> owners;  // ascending: the members whose ranges split [0, n)
  std::vector<std::uint64_t> tags;    // Shard: the sender's tag; Reduced: the owners' tags, in owners' order
};
inline constexpr std::size_t kMaxOwners = 1 << 16;

// A step read in place from its bytes (which must outlive it).
struct StepView {
  Kind kind = Kind::Pairs;
  std::uint64_t n = 0;  // length of the dense vector
  std::uint64_t tag = 0;  // the member's own label of the step (its training step)
  std::span<const std::uint32_t> indices;
  std::span<const float> values;
  Route route;
};

// An owning step, for building one (and for tests).
struct Step {
  Kind kind = Kind::Pairs;
  std::uint64_t n = 0;
  std::vector<std::uint32_t> indices;
  std::vector<float> values;
  std::uint64_t tag = 0;
  Route route;
  StepView view() const { return {kind, n, tag, indices, values, route}; }
};

Bytes encode(Kind kind, std::uint64_t n, std::span<const std::uint32_t> indices, std::span<const float> values,
             std::uint64_t tag = 0, const Route& route = {});
// Rewrites the route's `next` of encoded bytes in place (a held step's,
// each time it is sent).
void set_next(Bytes& b, Mode next);
// The header and the arrays' bounds only (InputError when truncated, of an
// unknown kind, or over kMaxSparsePairs); for bytes validate() passed.
StepView view(std::span<const std::byte> in);
// view() and every pair checked: n at most 2^32, no more pairs than n,
// indices ascending, unique and below n, values finite (InputError naming
// the first bad pair); owners ascending. What a peer's bytes must pass
// before they count.
StepView validate(std::span<const std::byte> in);
// The same checks on a member's own pairs before they are sent.
void check_pairs(std::uint64_t n, std::span<const std::uint32_t> indices, std::span<const float> values);

struct Merged {
  std::uint64_t n = 0;
  std::vector<std::uint32_t> indices;
  std::vector<float> values;
  std::vector<std::uint32_t> members;  // whose pairs are in the sum
  std::vector<std::uint64_t> tags;     // their tags, in the same order
  bool closing = false;                // member 0 closed the group: the job ends
  std::string error;                   // members' n differ (the sum is empty then)
};

// Buffers a merge works in, kept between steps by whoever merges every
// step: freshly allocated each step, their pages were faulted in (and
// zeroed) again every step.
struct MergeScratch {
  std::vector<std::uint32_t> indices;
  std::vector<float> values;
};

// The sum of the steps of kind `counted` (Pairs; reduce-scatter's owners:
// Shard), each index's values added in member order (so every member that
// merges the same steps gets the bitwise same sum); other kinds count for
// nothing. merge_into reuses out's vectors and the scratch.
void merge_into(const std::map<std::uint32_t, StepView>& steps, Kind counted, Merged& out, MergeScratch& scratch);
Merged merge(const std::map<std::uint32_t, StepView>& steps, Kind counted = Kind::Pairs);

}  // namespace accel::cluster::sparse
