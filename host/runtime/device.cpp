#include <algorithm>

#include "accel/device.hpp"

namespace accel {

std::string to_string(DeviceKind kind) {
  switch (kind) {
    case DeviceKind::Cpu: return "cpu";
    case DeviceKind::Cuda: return "cuda";
    case DeviceKind::Fpga: return "fpga";
    case DeviceKind::FpgaEmu: return "fpga-emu";
  }
  return "unknown";
}

std::string to_string(KernelId id) {
  switch (id) {
    case KernelId::KMeansAssign: return "kmeans_assign";
    case KernelId::CsrKernelRows: return "csr_kernel_rows";
    case KernelId::TopKHistogram: return "topk_histogram";
  }
  return "unknown";
}

bool Device::supports(KernelId id) const {
  const auto& ks = info().kernels;
  return std::find(ks.begin(), ks.end(), id) != ks.end();
}

}  // namespace accel
