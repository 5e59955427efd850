#include "accel/interrupt.hpp"

#include <chrono>
#include <utility>

namespace accel {
namespace {

thread_local std::function<bool()> check;
thread_local std::chrono::steady_clock::time_point last;

}  // namespace

InterruptScope::InterruptScope(std::function<bool()> stop) : previous_(std::exchange(check, std::move(stop))) {}

InterruptScope::~InterruptScope() { check = std::move(previous_); }

void interruption_point() {
  if (!check) return;
  const auto now = std::chrono::steady_clock::now();
  if (now - last < std::chrono::milliseconds(50)) return;
  last = now;
  if (check()) throw Interrupted();
}

}  // namespace accel
