#include "workload.hpp"

#include <cstdio>
#include <mutex>

namespace accel::cluster {
namespace {
std::map<std::string, std::unique_ptr<Workload>>& workloads() {
  static std::map<std::string, std::unique_ptr<Workload>> m;
  return m;
}
}  // namespace

RoundOutcome Partition::absorb(std::int64_t, const std::map<std::uint32_t, Bytes>&) {
  throw std::logic_error("this workload does not use the all-to-all exchange");
}
RoundOutcome Partition::apply(std::int64_t, std::span<const std::byte>) {
  throw std::logic_error("this workload does not use the central exchange");
}
void Partition::validate_decision(std::span<const std::byte>) const {}
std::string Job::option_text(double v) {
  char s[32];
  std::snprintf(s, sizeof s, "%.17g", v);
  return s;
}

Bytes Job::decide(std::int64_t, const std::map<std::uint32_t, Bytes>&) {
  throw std::logic_error("this workload does not use the central exchange");
}

bool register_workload(const std::string& name, std::unique_ptr<Workload> w) {
  workloads()[name] = std::move(w);
  return true;
}

const Workload& find_workload(const std::string& name) {
  auto it = workloads().find(name);
  if (it == workloads().end()) throw InputError("task names workload '" + name + "', which this build does not have");
  return *it->second;
}

}  // namespace accel::cluster
