// Every backend compiled into this build, and the devices they found.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "accel/device.hpp"

namespace accel {

struct BackendReport {
  std::string backend;
  std::size_t devices = 0;
  std::string why_none;  // set when devices == 0
};

class Registry {
 public:
  // Runs discovery on every backend built in. Never throws for missing
  // hardware; the reasons end up in reports().
  static Registry discover_all();

  const std::vector<std::unique_ptr<Device>>& devices() const { return devices_; }
  const std::vector<BackendReport>& reports() const { return reports_; }

  // "cpu", "fpga-emu", "cuda" (every CUDA device), "cuda:1", "auto" (the
  // fastest kind present for the kernel), "all". Unknown or absent names
  // throw InputError naming them.
  std::vector<Device*> select(const std::string& spec, KernelId kernel) const;

 private:
  std::vector<std::unique_ptr<Device>> devices_;
  std::vector<BackendReport> reports_;
};

}  // namespace accel
