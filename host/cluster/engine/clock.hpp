// The engine's time is accel::Clock (accel/clock.hpp): steady_clock, or a
// simulator's virtual time.
#pragma once

#include <algorithm>
#include <chrono>

#include "accel/clock.hpp"

namespace accel::cluster {
using accel::Clock;
using accel::ClockHook;
using accel::set_clock_hook;
using accel::sleep_for;

// What is left until `deadline` in whole milliseconds, rounded up: the
// transport waits in milliseconds, and a wait rounded down to 0 ms spins
// on the CPU for the last fraction of one (in virtual time, forever).
inline std::chrono::milliseconds ms_until(Clock::time_point deadline) {
  return std::max(std::chrono::milliseconds(0), std::chrono::ceil<std::chrono::milliseconds>(deadline - Clock::now()));
}
}  // namespace accel::cluster
