#pragma once

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <thread>

#include "accel/error.hpp"

namespace accel {

// Fault injection for the re-split tests: the environment variable `var`
// set to "R:F" makes a member F times slower from its step R on (steps
// counted from 0, as its caller counts them): each slowed step waits
// (F - 1) times its own time inside the timed part, so the slowdown is the
// same in every round. A busy process on the member's core slowed short
// rounds only by chance (the scheduler lets a process that sleeps between
// rounds run first, and a slow spell of a shared host hid it), and the
// re-split tests need it repeatable.
class SlowFault {
 public:
  explicit SlowFault(const char* var) {
    const char* f = std::getenv(var);
    if (!f) return;
    if (std::sscanf(f, "%lld:%lf", &from_, &factor_) != 2 || from_ < 0 || !(factor_ >= 1) || factor_ > 100)
      throw InputError(std::string(var) + ": not R:F with R >= 0 and 1 <= F <= 100: " + f);
  }
  bool at(long long step) const { return from_ >= 0 && step >= from_; }
  // The step's time, slowed: waits the difference and returns it all.
  double slow(double seconds) const {
    std::this_thread::sleep_for(std::chrono::duration<double>((factor_ - 1) * seconds));
    return factor_ * seconds;
  }

 private:
  long long from_ = -1;
  double factor_ = 1;
};

}  // namespace accel
