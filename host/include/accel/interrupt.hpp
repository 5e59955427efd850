// Stopping a long computation from outside it. The loops of k-means
// (iterations, seeding) and of the SVM solvers (rounds, binary problems)
// pass interruption points on the caller's thread; where the caller has
// installed a check that says stop, the point throws Interrupted and the
// computation unwinds (its buffers freed, its OpenMP regions ended). The
// Python binding checks for Ctrl-C there: a fit ends in KeyboardInterrupt.
#pragma once

#include <functional>
#include <stdexcept>

namespace accel {

struct Interrupted : std::runtime_error {
  Interrupted() : std::runtime_error("interrupted") {}
};

// Installs `stop` (returns true to stop) for this thread while the scope
// lives; the check installed before comes back after it.
class InterruptScope {
 public:
  explicit InterruptScope(std::function<bool()> stop);
  ~InterruptScope();
  InterruptScope(const InterruptScope&) = delete;
  InterruptScope& operator=(const InterruptScope&) = delete;

 private:
  std::function<bool()> previous_;
};

// Throws Interrupted when this thread's check says stop. The check runs at
// most every 50 ms, so a point costs a clock read; call it between units of
// work on the calling thread, never inside an OpenMP region.
void interruption_point();

}  // namespace accel
