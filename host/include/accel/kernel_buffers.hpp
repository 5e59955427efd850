// The buffers each kernel's arguments name and the bytes each must hold,
// written once for every backend: a buffer of another device, or one too
// short for the sizes in the arguments, is a DeviceError naming the device,
// the kernel and the argument, before any kernel reads or writes it.
#pragma once

#include <cstddef>
#include <functional>
#include <string>
#include <vector>

#include "accel/device.hpp"

namespace accel {

struct BufferArg {
  const char* name;  // as in kernels.hpp, e.g. "centroids"
  Buffer* buffer;
  std::size_t bytes;  // the least it must hold
};

// Every buffer argument that is set (optional ones left null are skipped).
// Throws DeviceError for negative sizes or byte counts that overflow.
std::vector<BufferArg> buffer_args(const KernelArgs& args);

// Checks each of them: mine(buffer) says whether the device owns it.
void check_buffers(const std::string& device, const KernelArgs& args, const std::function<bool(const Buffer&)>& mine);

// Limits of a device's kernels on the shapes they take (FPGAs: on-chip
// buffers), for its cannot_run() and DeviceInfo::limits; 0: no limit.
struct KernelLimits {
  std::int64_t kmeans_k = 0, kmeans_d = 0;
};
// Why a launch of this shape exceeds them; empty when it does not.
std::string exceeds(const KernelArgs& shape, const KernelLimits& limits);
// For people, e.g. "kmeans_assign: k <= 256, d <= 1024".
std::string describe(const KernelLimits& limits);

}  // namespace accel
