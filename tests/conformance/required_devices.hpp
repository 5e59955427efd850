// ACCEL_CONFORMANCE_REQUIRE: a comma-separated list of device-name prefixes
// ("cuda", "cuda,opencl"). Each conformance case then fails unless a device
// of every listed prefix ran it, so a GPU check cannot pass by skipping the
// GPU (a missing kernel image or a driver the backend turned down would
// otherwise leave only cpu and fpga-emu running, and every case green).
#pragma once

#include <gtest/gtest.h>

#include <cstdlib>
#include <sstream>
#include <string>
#include <vector>

namespace accel::test {

inline std::vector<std::string> required_device_prefixes() {
  std::vector<std::string> out;
  const char* env = std::getenv("ACCEL_CONFORMANCE_REQUIRE");
  if (env == nullptr) return out;
  std::stringstream ss(env);
  for (std::string p; std::getline(ss, p, ',');)
    if (!p.empty()) out.push_back(p);
  return out;
}

// Call with the names of the devices that ran the case.
inline void expect_required_ran(const std::vector<std::string>& ran) {
  for (const auto& prefix : required_device_prefixes()) {
    bool found = false;
    for (const auto& name : ran) found = found || name.rfind(prefix, 0) == 0;
    EXPECT_TRUE(found) << "ACCEL_CONFORMANCE_REQUIRE names " << prefix << ", but no " << prefix
                       << " device ran this case";
  }
}

}  // namespace accel::test
