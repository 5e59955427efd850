// Swarm runs (issue 30): one seed draws a job and a fault schedule, runs
// the engine's coordinator and workers in a World, and checks the
// invariants. A failing seed replays bit for bit from its number.
//
// The job: k-means (move: lost rows are computed by the others) of a
// coordinator and 3 to 8 workers. The nemesis, drawn from the seed:
// workers killed (some restarted later, several at once), and workers
// paused under or past the barrier's timeout. Invariants: the coordinator
// exits 0; every participant logged the same inertia for each round it
// counted; the centroids equal the failure-free run's within 1e-6
// (relative); every process ended before the time limit.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "world.hpp"

namespace accel::cluster::sim {

struct SwarmOptions {
  std::string dir;  // scratch: the input, logs, outputs
  int min_workers = 3, max_workers = 8;
  int iterations = 60;
  LinkModel link{std::chrono::milliseconds(1), 1.25e8};  // 1 ms, 1 Gbit/s
  int timeout_ms = 50;
};

struct SeedResult {
  std::uint64_t seed = 0;
  bool ok = true;
  std::string violation;               // the first invariant violated
  std::vector<std::string> schedule;   // the job and the faults, one line each
  double virtual_seconds = 0;
  std::uint64_t messages = 0;
};

SeedResult run_seed(std::uint64_t seed, const SwarmOptions& o);

}  // namespace accel::cluster::sim
