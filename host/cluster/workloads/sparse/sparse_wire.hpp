// A member's step of the sparse allreduce on the wire, and the merge that
// turns the members' pairs into their sum.
#pragma once

#include <cstdint>
#include <map>
#include <span>
#include <string>
#include <vector>

#include "codec.hpp"

namespace accel::cluster::sparse {

enum class Kind : std::uint8_t {
  Pairs = 0,    // this member's pairs of the step
  Idle = 1,     // a returning member's first round (nobody counts it)
  Closing = 2,  // the member closed the group: member 0 ends the job, another leaves it
};

struct Step {
  Kind kind = Kind::Pairs;
  std::uint64_t n = 0;  // length of the dense vector
  std::vector<std::uint32_t> indices;
  std::vector<float> values;
  std::uint64_t tag = 0;  // the member's own label of the step (its training step)
};

Bytes encode(Kind kind, std::uint64_t n, std::span<const std::uint32_t> indices, std::span<const float> values,
             std::uint64_t tag = 0);
// Throws InputError for a malformed step: an unknown kind, n beyond 2^32,
// more pairs than n or than kMaxSparsePairs, indices not ascending or not
// below n, a value that is not finite (naming the first bad pair).
Step decode(std::span<const std::byte> in);
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

// The sum of the Pairs steps, in member order (so every member that merges
// the same steps gets the bitwise same sum); Idle steps count for nothing.
Merged merge(const std::map<std::uint32_t, Step>& steps);

}  // namespace accel::cluster::sparse
