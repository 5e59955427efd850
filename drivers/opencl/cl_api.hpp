// The OpenCL C API as this driver uses it: version 1.2 (what PoCL, ROCm,
// Intel's and NVIDIA's runtimes all offer), errors as DeviceError with the
// code's name, and typed queries.
#pragma once

#define CL_TARGET_OPENCL_VERSION 120
#define CL_USE_DEPRECATED_OPENCL_1_2_APIS
#include <CL/cl.h>
#include <CL/cl_ext.h>

#include <string>
#include <vector>

#include "accel/error.hpp"

namespace accel::opencl {

std::string error_name(cl_int err);

inline void check(cl_int err, const std::string& what) {
  if (err != CL_SUCCESS) throw DeviceError("opencl: " + what + ": " + error_name(err));
}

template <class T>
T device_value(cl_device_id d, cl_device_info what) {
  T v{};
  check(clGetDeviceInfo(d, what, sizeof v, &v, nullptr), "clGetDeviceInfo");
  return v;
}

inline std::string device_string(cl_device_id d, cl_device_info what) {
  std::size_t n = 0;
  check(clGetDeviceInfo(d, what, 0, nullptr, &n), "clGetDeviceInfo");
  std::string s(n, '\0');
  check(clGetDeviceInfo(d, what, n, s.data(), nullptr), "clGetDeviceInfo");
  while (!s.empty() && (s.back() == '\0' || s.back() == ' ')) s.pop_back();
  return s;
}

inline std::string platform_string(cl_platform_id p, cl_platform_info what) {
  std::size_t n = 0;
  check(clGetPlatformInfo(p, what, 0, nullptr, &n), "clGetPlatformInfo");
  std::string s(n, '\0');
  check(clGetPlatformInfo(p, what, n, s.data(), nullptr), "clGetPlatformInfo");
  while (!s.empty() && (s.back() == '\0' || s.back() == ' ')) s.pop_back();
  return s;
}

// clSetKernelArg for each argument in order.
template <class... A>
void set_args(cl_kernel k, const A&... args) {
  cl_uint i = 0;
  (check(clSetKernelArg(k, i++, sizeof(A), &args), "clSetKernelArg"), ...);
}

}  // namespace accel::opencl
