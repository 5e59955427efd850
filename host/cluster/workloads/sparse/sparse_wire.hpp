// A member's step of the sparse allreduce on the wire, and the merge that
// turns the members' pairs into their sum.
//
// Layout (little-endian): u64 kind, u64 n, u64 tag, u64 count, u32
// indices[count], u64 count, f32 values[count]. Every field is 8 bytes
// before the arrays, so both arrays sit 4-byte aligned in a received
// buffer and are read in place (StepView), without copies.
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
};

// A step read in place from its bytes (which must outlive it).
struct StepView {
  Kind kind = Kind::Pairs;
  std::uint64_t n = 0;  // length of the dense vector
  std::uint64_t tag = 0;  // the member's own label of the step (its training step)
  std::span<const std::uint32_t> indices;
  std::span<const float> values;
};

// An owning step, for building one (and for tests).
struct Step {
  Kind kind = Kind::Pairs;
  std::uint64_t n = 0;
  std::vector<std::uint32_t> indices;
  std::vector<float> values;
  std::uint64_t tag = 0;
  StepView view() const { return {kind, n, tag, indices, values}; }
};

Bytes encode(Kind kind, std::uint64_t n, std::span<const std::uint32_t> indices, std::span<const float> values,
             std::uint64_t tag = 0);
// The header and the arrays' bounds only (InputError when truncated, of an
// unknown kind, or over kMaxSparsePairs); for bytes validate() passed.
StepView view(std::span<const std::byte> in);
// view() and every pair checked: n at most 2^32, no more pairs than n,
// indices ascending, unique and below n, values finite (InputError naming
// the first bad pair). What a peer's bytes must pass before they count.
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

// The sum of the Pairs steps in one pass over all of them, each index's
// values added in member order (so every member that merges the same steps
// gets the bitwise same sum); Idle steps count for nothing.
Merged merge(const std::map<std::uint32_t, StepView>& steps);

}  // namespace accel::cluster::sparse
