#include "accel/faults.hpp"

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <thread>

#include "accel/error.hpp"

namespace accel {
namespace {

Faults& plan() {
  static Faults f;
  return f;
}

Slowdown slowdown(const char* var) {
  Slowdown s;
  const char* v = std::getenv(var);
  if (!v) return s;
  if (std::sscanf(v, "%lld:%lf", &s.from, &s.factor) != 2 || s.from < 0 || !(s.factor >= 1) || s.factor > 100)
    throw InputError(std::string(var) + ": not R:F with R >= 0 and 1 <= F <= 100: " + v);
  return s;
}

}  // namespace

double Slowdown::slow(double seconds) const {
  std::this_thread::sleep_for(std::chrono::duration<double>((factor - 1) * seconds));
  return factor * seconds;
}

const Faults& faults() { return plan(); }
void set_faults(const Faults& f) { plan() = f; }

Faults faults_from_environment() {
  Faults f;
  f.rounds = slowdown("ACCEL_FAULT_SLOW_ROUNDS");
  f.rows = slowdown("ACCEL_FAULT_SLOW_ROWS");
  if (const char* v = std::getenv("ACCEL_FAULT_PARTIAL_SEND")) {
    long long r = -1;
    std::size_t n = 0;
    if (std::sscanf(v, "%lld:%zu", &r, &n) != 2 || r < 0)
      throw InputError(std::string("ACCEL_FAULT_PARTIAL_SEND: not R:S: ") + v);
    f.partial_send_round = r;
    f.partial_send_peers = n;
  }
  return f;
}

}  // namespace accel
