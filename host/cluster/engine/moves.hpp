// Which worker computes which rows, beyond the members' own partitions
// (--pull all-to-all jobs): the rows of members that are lost, returning
// or leaving go to the active workers, and so do the tails of those over
// their share when a worker joins. Shares follow measured rates (Algorithm
// 1 of [SysInfo]: targets
// proportional to capability). Pure functions of the membership: the
// coordinator plans, announces the plan in its contribution, and every
// side applies it from the next round (coordinator.cpp, member.cpp).
#pragma once

#include <cstdint>
#include <functional>
#include <vector>

#include "protocol.hpp"

namespace accel::cluster {

struct MovePlanInput {
  // By member id: the first row of its partition, and how many of them it
  // computes itself when present (its partition, or the first rows a
  // re-split by speed left it).
  std::vector<std::int64_t> begin, kept;
  // The workers that compute (active, not leaving), ascending, with their
  // rates (rows per second; any positive scale).
  std::vector<std::uint32_t> workers;
  std::vector<double> rates;
  // By worker, as `workers`: the most rows of others it may compute under
  // the plan (what its memory holds: memory_room.hpp), or -1 for any.
  // Empty: any, for all.
  std::vector<std::int64_t> most;
  // Members whose kept rows others compute, ascending.
  std::vector<std::uint32_t> lost;
};

// Bytes of rows [begin, end) in the workload's layout.
using RowBytes = std::function<std::uint64_t(std::int64_t begin, std::int64_t end)>;

// Every lost member's kept rows, then the ends of the rows of workers above
// their target, to the workers below theirs, in id order: each worker gets
// at most one piece of any member's rows. A worker gives an end under 1/64
// of its target to nobody (a read of the input is not worth it). No worker
// gets more than its `most`: what the others' room leaves of a lost
// member's rows are its first ones, which stay unmoved (own_rows: the
// coordinator goes on standing in for them, a block at a time).
std::vector<Move> plan_moves(const MovePlanInput& in, const RowBytes& bytes);

// How many of member q's first kept rows it still computes under `moves`
// (0 when its rows moved away; less when it gave a tail).
std::int64_t own_rows(std::uint32_t q, std::int64_t begin, std::int64_t kept, const std::vector<Move>& moves);

}  // namespace accel::cluster
