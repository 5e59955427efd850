// How the engine's phases end, as types and codes (never message strings).
#pragma once

#include <stdexcept>
#include <cstddef>
#include <string>
#include <vector>

namespace accel::cluster {

// Process exit codes of coordinator and worker (docs/cluster.md, "Exit codes").
enum ExitCode : int {
  kExitOk = 0,
  kExitBadInput = 2,      // bad options, input, or a peer's bad bytes
  kExitLostJob = 3,       // a worker that lost its coordinator or could not rejoin
  kExitRowsLost = 4,      // the coordinator finished after losing every worker with --on-loss drop:
                          // their rows were left out, the result is not the whole input's
};

// Control flow between the engine's phases, never message strings.
// The coordinator's endpoint failed: the job is over for this worker.
struct CoordinatorGone : std::runtime_error {
  using std::runtime_error::runtime_error;
};
// The coordinator is reachable but this worker fell out of the job (it was
// stopped past the timeout): rejoin with a new incarnation.
struct Evicted : std::runtime_error {
  using std::runtime_error::runtime_error;
};
// A fresh worker found no coordinator to talk to (not listening yet: a
// launcher starts every rank at once): try again until the join timeout.
struct NotListening : std::runtime_error {
  using std::runtime_error::runtime_error;
};
// The coordinator's front door refused this worker's token or id.
struct TokenRefused : std::runtime_error {
  using std::runtime_error::runtime_error;
};
// A worker with no snapshot that said hello to a running job got its task
// instead of a probe (the payload, kTask): it takes the task as its
// snapshot and rejoins as a resuming worker.
struct JoinMidJob {
  std::vector<std::byte> task;
};
// The coordinator said the job is over.
struct JobDone {};
// The coordinator refused this worker: its job is over, or the id unknown.
struct Rejected : std::runtime_error {
  Rejected() : std::runtime_error("the coordinator rejected this worker (job over or unknown id)") {}
  explicit Rejected(const std::string& why) : std::runtime_error(why) {}
};

}  // namespace accel::cluster
