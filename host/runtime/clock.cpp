#include "accel/clock.hpp"

#include <thread>

namespace accel {
namespace {
thread_local ClockHook* hook = nullptr;
}

void set_clock_hook(ClockHook* h) { hook = h; }
ClockHook* clock_hook() { return hook; }

Clock::time_point Clock::now() {
  if (hook) return hook->now();
  return time_point(std::chrono::steady_clock::now().time_since_epoch());
}

void sleep_for(Clock::duration d) {
  if (hook) return hook->sleep_for(d);
  std::this_thread::sleep_for(d);
}

}  // namespace accel
