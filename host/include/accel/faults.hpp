// Faults the tests inject, behind one seam. The code that ships asks the
// plan at named points and finds nothing there unless a test set one:
// unit tests call set_faults(); the cluster scenarios, which start real
// processes, set ACCEL_FAULT_* in their environment, which the accel
// command reads once at its start (faults_from_environment). Nothing else
// reads those variables.
#pragma once

#include <cstdint>

namespace accel {

// F times slower from step R on (steps counted from 0, as the caller
// counts them): a slowed step waits (F - 1) times its own time inside the
// timed part, so the slowdown is the same in every round. (A busy process
// on the member's core slows short rounds only by chance, and the
// re-split tests need it repeatable.)
struct Slowdown {
  long long from = -1;  // none
  double factor = 1;
  bool at(long long step) const { return from >= 0 && step >= from; }
  // The step's time, slowed: waits the difference and returns it all.
  double slow(double seconds) const;
};

struct Faults {
  // A cluster member's compute phase, by round (ACCEL_FAULT_SLOW_ROUNDS=R:F).
  Slowdown rounds;
  // An SVM member's kernel rows, by Rows op (ACCEL_FAULT_SLOW_ROWS=R:F).
  Slowdown rows;
  // The process dies in round R once its contribution reached S peers, as
  // SIGKILL would (ACCEL_FAULT_PARTIAL_SEND=R:S).
  std::int64_t partial_send_round = -1;
  std::size_t partial_send_peers = 0;
};

const Faults& faults();
void set_faults(const Faults& f);
// The ACCEL_FAULT_* variables; InputError naming one that is malformed.
Faults faults_from_environment();

}  // namespace accel
