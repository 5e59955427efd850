// Factories of the backends compiled into this build. Registry::discover_all
// calls them in this order; the configure step decides which exist.
#pragma once

#include <memory>

#include "accel/config.hpp"
#include "accel/device.hpp"

namespace accel {

std::unique_ptr<Backend> make_cpu_backend();
std::unique_ptr<Backend> make_fpga_emu_backend();
#if ACCEL_HAVE_CUDA
std::unique_ptr<Backend> make_cuda_backend();
#endif
#if ACCEL_HAVE_XRT
std::unique_ptr<Backend> make_xrt_backend();
#endif

}  // namespace accel
