#include "memory_room.hpp"

#include <algorithm>
#include <fstream>
#include <sstream>

namespace accel::cluster {
namespace {

// "VmRSS:" of /proc/self/status, or a MemAvailable-style line of
// /proc/meminfo, in bytes (0 when absent).
std::int64_t kib_line(const char* file, const std::string& key) {
  std::ifstream in(file);
  std::string line;
  while (std::getline(in, line))
    if (line.rfind(key, 0) == 0) {
      std::istringstream s(line.substr(key.size()));
      std::int64_t kib = 0;
      s >> kib;
      return kib * 1024;
    }
  return 0;
}

std::optional<std::int64_t> number_in(const std::string& path) {
  std::ifstream in(path);
  std::string v;
  if (!(in >> v) || v == "max") return std::nullopt;
  try {
    const long long n = std::stoll(v);
    // v1 says "no limit" with a page-rounded LLONG_MAX.
    if (n <= 0 || n >= (std::int64_t{1} << 60)) return std::nullopt;
    return n;
  } catch (const std::exception&) {
    return std::nullopt;
  }
}

// The smallest limit on the way from the process's cgroup up to the root:
// a parent's limit binds its children.
std::optional<std::int64_t> limit_above(const std::string& root, std::string path, const std::string& file) {
  std::optional<std::int64_t> least;
  while (true) {
    if (auto v = number_in(root + path + "/" + file)) least = std::min(least.value_or(*v), *v);
    if (path.empty() || path == "/") return least;
    path = path.substr(0, path.rfind('/'));
  }
}

}  // namespace

std::optional<std::int64_t> cgroup_memory_limit() {
  // Lines of /proc/self/cgroup: "0::/path" (v2) or "N:memory:/path" (v1).
  std::ifstream in("/proc/self/cgroup");
  std::string line;
  while (std::getline(in, line)) {
    const auto a = line.find(':'), b = line.find(':', a + 1);
    if (a == std::string::npos || b == std::string::npos) continue;
    const std::string controllers = line.substr(a + 1, b - a - 1), path = line.substr(b + 1);
    if (controllers.empty()) {
      if (auto v = limit_above("/sys/fs/cgroup", path, "memory.max")) return v;
    } else if (controllers == "memory" || controllers.find("memory,") != std::string::npos ||
               controllers.find(",memory") != std::string::npos) {
      if (auto v = limit_above("/sys/fs/cgroup/memory", path, "memory.limit_in_bytes")) return v;
    }
  }
  return std::nullopt;
}

std::int64_t memory_room() {
  constexpr std::int64_t kReserve = std::int64_t{64} << 20;
  const std::int64_t rss = kib_line("/proc/self/status", "VmRSS:");
  const std::int64_t limit = cgroup_memory_limit().value_or(rss + kib_line("/proc/meminfo", "MemAvailable:"));
  return std::max<std::int64_t>(0, limit - rss - kReserve);
}

}  // namespace accel::cluster
