// The OpenCL C sources of kernels_opencl/, compiled into the library by
// CMake (opencl_kernels.cpp is generated from the .cl files).
#pragma once

#include <string_view>

namespace accel::opencl {

// The text of kernels_opencl/<name>.cl; empty when there is none.
std::string_view opencl_source(std::string_view name);

}  // namespace accel::opencl
