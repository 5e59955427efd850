// accel's measured time. It is steady_clock, unless a simulator runs the
// thread in virtual time (set_clock_hook, host/cluster/sim): then every
// timeout, deadline, measured compute time and pause of the cluster engine
// and the runtime reads the simulator's clock, and a run is the same from
// the same seed however fast the host is.
#pragma once

#include <chrono>

namespace accel {

struct Clock {
  using duration = std::chrono::steady_clock::duration;
  using rep = duration::rep;
  using period = duration::period;
  using time_point = std::chrono::time_point<Clock, duration>;
  static constexpr bool is_steady = true;
  static time_point now();
};

class ClockHook {
 public:
  virtual ~ClockHook() = default;
  virtual Clock::time_point now() = 0;
  virtual void sleep_for(Clock::duration d) = 0;
};

// For the calling thread only (one thread per simulated process); null:
// real time again. Work a thread hands to another (a device's queue) runs
// there under the hook it was submitted under (clock_hook()).
void set_clock_hook(ClockHook* hook);
ClockHook* clock_hook();

// std::this_thread::sleep_for in the calling thread's time.
void sleep_for(Clock::duration d);

}  // namespace accel
