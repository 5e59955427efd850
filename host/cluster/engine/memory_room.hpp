// How much more memory a member can take for rows: what a plan of moves
// may give it (moves.hpp). A worker under a container's or a cgroup's
// memory limit that is handed a lost member's rows beyond it is killed by
// the kernel's OOM killer, and its own rows become lost in turn.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

namespace accel::cluster {

// This process's cgroup memory limit in bytes (v2 memory.max, else v1
// memory.limit_in_bytes), nothing when it has none.
std::optional<std::int64_t> cgroup_memory_limit();

// Bytes this process can still take: its cgroup's limit (or, without one,
// its resident set and the machine's available memory), less its resident
// set and a reserve of 64 MiB for buffers; never below 0.
std::int64_t memory_room();

}  // namespace accel::cluster
