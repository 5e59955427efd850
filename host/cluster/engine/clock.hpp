// The engine's time is accel::Clock (accel/clock.hpp): steady_clock, or a
// simulator's virtual time.
#pragma once

#include "accel/clock.hpp"

namespace accel::cluster {
using accel::Clock;
using accel::ClockHook;
using accel::set_clock_hook;
using accel::sleep_for;
}  // namespace accel::cluster
