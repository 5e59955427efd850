#include "workload.hpp"

#include <cstdio>
#include <mutex>

#include "checkpoint.hpp"
#include "protocol.hpp"

namespace accel::cluster {
namespace {
std::map<std::string, std::unique_ptr<Workload>>& workloads() {
  static std::map<std::string, std::unique_ptr<Workload>> m;
  return m;
}
}  // namespace

AllToAllPartition& all_to_all(Partition& p) {
  if (auto* a = dynamic_cast<AllToAllPartition*>(&p)) return *a;
  throw std::logic_error("an all-to-all workload opened a partition of another kind");
}

StarPartition& star(Partition& p) {
  if (auto* s = dynamic_cast<StarPartition*>(&p)) return *s;
  throw std::logic_error("a central workload opened a partition of another kind");
}

std::string Job::option_text(double v) {
  char s[32];
  std::snprintf(s, sizeof s, "%.17g", v);
  return s;
}

Bytes Job::decide(std::int64_t, const std::map<std::uint32_t, Bytes>&) {
  throw std::logic_error("this workload does not use the central exchange");
}

std::uint64_t Job::digest(std::int64_t begin, std::int64_t end) {
  if (end <= begin) return 0;
  const std::uint64_t d = rows_digest(data(begin, end));
  release(begin, end);  // they are not the coordinator's rows
  return d;
}

std::uint64_t Job::fingerprint() {
  const auto f = checkpoint_fingerprint(data(0, units()));
  release(0, units());
  return f;
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
