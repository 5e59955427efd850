// Every backend compiled into this build, and the devices they found.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "accel/device.hpp"

namespace accel {

// Backends register themselves (ggml's registry): a backend's folder adds
// its sources to the build and one ACCEL_REGISTER_BACKEND line in them;
// nothing else names it. `order` sorts discovery (and `accel devices`);
// `family` is what --device calls its devices (DeviceInfo::family), with
// ":N" for one of several when `numbered`.
using BackendFactory = std::unique_ptr<Backend> (*)();
bool register_backend(int order, const char* name, const char* family, bool numbered, BackendFactory factory);

#define ACCEL_REGISTER_BACKEND(order, type, family, numbered)                                        \
  [[maybe_unused]] static const bool accel_backend_registered_ = ::accel::register_backend(         \
      order, #type, family, numbered, []() -> std::unique_ptr<::accel::Backend> { return std::make_unique<type>(); })

// The --device option's help, from the backends built in: `what` (the
// devices' use in this command), then the selectors select() takes.
std::string device_option_help(const std::string& what);

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
