#include "program_cache.hpp"

#include <cstdlib>
#include <fstream>
#include <iterator>

#include "opencl_kernels.hpp"

namespace accel::opencl {

std::uint64_t source_hash(std::string_view text) {
  std::uint64_t h = 0xcbf29ce484222325ull;
  for (unsigned char c : text) {
    h ^= c;
    h *= 0x100000001b3ull;
  }
  return h;
}

namespace {

// kernels_opencl/<name>.cl as built in, or, with ACCEL_OPENCL_KERNELS=DIR,
// as DIR/<name>.cl holds it now: a kernel edited there runs without a
// rebuild (a changed text is a new program).
std::string source_text(const std::string& device_name, const std::string& name) {
  if (const char* dir = std::getenv("ACCEL_OPENCL_KERNELS"); dir != nullptr && *dir != '\0') {
    const std::string path = std::string(dir) + "/" + name + ".cl";
    std::ifstream in(path, std::ios::binary);
    if (!in) throw DeviceError(device_name + ": cannot read " + path + " (ACCEL_OPENCL_KERNELS)");
    return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
  }
  const std::string_view text = opencl_source(name);
  if (text.empty()) throw DeviceError(device_name + ": no OpenCL source named " + name);
  return std::string(text);
}

// The first `lines` non-empty lines of a build log, on one line.
std::string first_lines(const std::string& log, int lines) {
  std::string out;
  std::size_t at = 0;
  while (lines > 0 && at < log.size()) {
    std::size_t end = log.find('\n', at);
    if (end == std::string::npos) end = log.size();
    std::string line = log.substr(at, end - at);
    while (!line.empty() && (line.back() == '\r' || line.back() == ' ' || line.back() == '\0')) line.pop_back();
    if (!line.empty()) {
      out += (out.empty() ? "" : " | ") + line;
      --lines;
    }
    at = end + 1;
  }
  return out.empty() ? "(no build log)" : out;
}

}  // namespace

cl_kernel ProgramCache::kernel(cl_context ctx, cl_device_id dev, const std::string& device_name,
                               const std::string& source, const std::string& name) {
  const std::string text = source_text(device_name, source);
  const std::uint64_t h = source_hash(text);
  std::lock_guard lock(mu_);
  if (auto k = kernels_.find({h, name}); k != kernels_.end()) return k->second;
  cl_program& prog = programs_[h];
  if (prog == nullptr) {
    const char* src = text.data();
    const std::size_t len = text.size();
    cl_int err = CL_SUCCESS;
    prog = clCreateProgramWithSource(ctx, 1, &src, &len, &err);
    check(err, device_name + ": clCreateProgramWithSource(" + source + ")");
    if (clBuildProgram(prog, 1, &dev, "-cl-std=CL1.2", nullptr, nullptr) != CL_SUCCESS) {
      std::size_t n = 0;
      clGetProgramBuildInfo(prog, dev, CL_PROGRAM_BUILD_LOG, 0, nullptr, &n);
      std::string log(n, '\0');
      clGetProgramBuildInfo(prog, dev, CL_PROGRAM_BUILD_LOG, n, log.data(), nullptr);
      clReleaseProgram(prog);
      programs_.erase(h);
      throw DeviceError(device_name + ": building " + source + ".cl failed: " + first_lines(log, 3));
    }
    ++built_;
  }
  cl_int err = CL_SUCCESS;
  cl_kernel k = clCreateKernel(prog, name.c_str(), &err);
  check(err, device_name + ": clCreateKernel(" + name + ")");
  kernels_[{h, name}] = k;
  return k;
}

void ProgramCache::clear() {
  std::lock_guard lock(mu_);
  for (auto& [key, k] : kernels_) clReleaseKernel(k);
  for (auto& [h, p] : programs_) clReleaseProgram(p);
  kernels_.clear();
  programs_.clear();
}

std::string error_name(cl_int err) {
  switch (err) {
#define ACCEL_CL_ERR(e) \
  case e: return #e;
    ACCEL_CL_ERR(CL_DEVICE_NOT_FOUND)
    ACCEL_CL_ERR(CL_DEVICE_NOT_AVAILABLE)
    ACCEL_CL_ERR(CL_COMPILER_NOT_AVAILABLE)
    ACCEL_CL_ERR(CL_MEM_OBJECT_ALLOCATION_FAILURE)
    ACCEL_CL_ERR(CL_OUT_OF_RESOURCES)
    ACCEL_CL_ERR(CL_OUT_OF_HOST_MEMORY)
    ACCEL_CL_ERR(CL_BUILD_PROGRAM_FAILURE)
    ACCEL_CL_ERR(CL_INVALID_VALUE)
    ACCEL_CL_ERR(CL_INVALID_DEVICE)
    ACCEL_CL_ERR(CL_INVALID_CONTEXT)
    ACCEL_CL_ERR(CL_INVALID_COMMAND_QUEUE)
    ACCEL_CL_ERR(CL_INVALID_MEM_OBJECT)
    ACCEL_CL_ERR(CL_INVALID_PROGRAM)
    ACCEL_CL_ERR(CL_INVALID_PROGRAM_EXECUTABLE)
    ACCEL_CL_ERR(CL_INVALID_KERNEL_NAME)
    ACCEL_CL_ERR(CL_INVALID_KERNEL)
    ACCEL_CL_ERR(CL_INVALID_ARG_INDEX)
    ACCEL_CL_ERR(CL_INVALID_ARG_VALUE)
    ACCEL_CL_ERR(CL_INVALID_ARG_SIZE)
    ACCEL_CL_ERR(CL_INVALID_KERNEL_ARGS)
    ACCEL_CL_ERR(CL_INVALID_WORK_DIMENSION)
    ACCEL_CL_ERR(CL_INVALID_WORK_GROUP_SIZE)
    ACCEL_CL_ERR(CL_INVALID_WORK_ITEM_SIZE)
    ACCEL_CL_ERR(CL_INVALID_GLOBAL_WORK_SIZE)
    ACCEL_CL_ERR(CL_INVALID_BUFFER_SIZE)
    ACCEL_CL_ERR(CL_INVALID_OPERATION)
    ACCEL_CL_ERR(CL_INVALID_PLATFORM)
#undef ACCEL_CL_ERR
    default: return "OpenCL error " + std::to_string(err);
  }
}

}  // namespace accel::opencl
