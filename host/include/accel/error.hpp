#pragma once

#include <stdexcept>
#include <string>

namespace accel {

// Bad input from a user, a file or the network: the CLI prints what() on one
// line and exits 2. Everything else is a bug or an environment failure.
class InputError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// A device could not run a launch (unsupported shape, driver failure).
class DeviceError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// What a driver throws for a kernel its device does not list in
// DeviceInfo::kernels (callers check Device::supports first).
template <class Args>
[[noreturn]] void throw_unsupported(const std::string& device, const Args&) {
  throw DeviceError(device + ": kernel not implemented on this device");
}

}  // namespace accel
