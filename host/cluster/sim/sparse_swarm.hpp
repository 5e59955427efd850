// The sparse allreduce's job in the swarm: the processes' bodies, and the
// invariants its sums must keep. Every sum a member receives is bitwise the
// member-order sum of the steps it says it holds (each member's pairs are a
// function of its rank and tag: sparse_pairs), holds the member's own step,
// and equals every other member's sum of the same round; rank 0 receives a
// sum for each of its steps; and members no fault touched count in every
// one of them.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "swarm.hpp"

namespace accel::cluster::sim {

struct SparsePairs {
  std::vector<std::uint32_t> indices;
  std::vector<float> values;
};
// Member `rank`'s pairs for the step tagged `tag` (of a length-2048 vector).
SparsePairs sparse_pairs(std::uint32_t rank, std::uint64_t tag);
// The sum of those members' steps, each index's values added in member order.
SparsePairs sparse_expected(const std::vector<std::uint32_t>& members, const std::vector<std::uint64_t>& tags);

// Rank 0: o.iterations steps, then close; its exit (0 or 2) and error go to out.
void run_sparse_rank0(const SwarmOptions& o, int workers, int joins, const std::string& dir, JobRun& out);
// Rank `id` (0: a joiner, given its rank): steps until the group ends, or
// closes at the first step end from `leave` on. A restart (incarnation
// > 1) resumes from the snapshot the first wrote.
void run_sparse_member(const SwarmOptions& o, World& w, int id, std::uint32_t incarnation, int workers,
                       const std::string& dir, std::optional<Clock::duration> leave, JobRun& out);

// The first invariant `run` breaks (empty: none); `steps`: rank 0's.
std::string sparse_violation(const JobRun& run, const std::vector<FaultAt>& faults, int workers, int steps);

}  // namespace accel::cluster::sim
