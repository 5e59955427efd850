// Measured throughput per (device, kernel, problem shape), kept apart from the policy that uses it
// (StarPU's history model; the collectors of [SysInfo]
// and processors).
#pragma once

#include <cstdint>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <tuple>
#include <vector>

#include "accel/kernels.hpp"

namespace accel {

struct ShapeKey {
  std::string device;
  KernelId kernel;
  std::int64_t d = 0, k = 0;  // the dimensions that change cost per row
  auto operator<=>(const ShapeKey&) const = default;
};

class PerfModel {
 public:
  // Records that `rows` rows took `seconds`; an exponentially weighted
  // average smooths noise while still following a device that slows down.
  void record(const ShapeKey& key, std::int64_t rows, double seconds);
  std::optional<double> rows_per_second(const ShapeKey& key) const;

 private:
  mutable std::mutex mu_;
  std::map<ShapeKey, double> rate_;
};

// Algorithm 1 of [SysInfo]: from the current loads and
// each unit's measured capability, compute target loads proportional to capability, split units
// into over-loaded H, under-loaded L and balanced E (within `tolerance` of target, as a fraction),
// and move min(excess, deficit) from one H to one L until H or L is empty. Returns the new loads;
// their sum equals the old sum.
std::vector<std::int64_t> rebalance(const std::vector<std::int64_t>& loads,
                                    const std::vector<double>& capability,
                                    double tolerance = 0.02);

}  // namespace accel
