// A device's OpenCL programs, built at first use and kept by the hash of
// their source (a changed .cl file is a new program), with their kernels.
#pragma once

#include <cstdint>
#include <map>
#include <mutex>
#include <string>

#include "cl_api.hpp"

namespace accel::opencl {

class ProgramCache {
 public:
  ProgramCache() = default;
  ~ProgramCache() { clear(); }
  ProgramCache(const ProgramCache&) = delete;
  ProgramCache& operator=(const ProgramCache&) = delete;

  // Kernel `kernel` of kernels_opencl/<source>.cl for `dev`; a build error
  // is a DeviceError carrying the compiler's log.
  cl_kernel kernel(cl_context ctx, cl_device_id dev, const std::string& device_name, const std::string& source,
                   const std::string& kernel);
  void clear();
  std::size_t programs_built() const { return built_; }

 private:
  std::mutex mu_;
  std::map<std::uint64_t, cl_program> programs_;  // by source hash
  std::map<std::pair<std::uint64_t, std::string>, cl_kernel> kernels_;
  std::size_t built_ = 0;
};

// FNV-1a, 64-bit: the cache key of a source text.
std::uint64_t source_hash(std::string_view text);

}  // namespace accel::opencl
