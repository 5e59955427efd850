// Shared by the fuzz targets: the readers take paths, so an input's bytes
// go to a file of this process first (in /dev/shm where it exists: the
// fuzzer runs thousands of inputs a second).
#pragma once

#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <fstream>
#include <string>

namespace accel::fuzz {

inline std::string as_file(const std::uint8_t* data, std::size_t size, const std::string& suffix) {
  static const std::string dir = access("/dev/shm", W_OK) == 0 ? "/dev/shm" : "/tmp";
  const std::string path = dir + "/accel-fuzz-" + std::to_string(getpid()) + suffix;
  std::ofstream(path, std::ios::binary | std::ios::trunc).write(reinterpret_cast<const char*>(data),
                                                                 static_cast<std::streamsize>(size));
  return path;
}

}  // namespace accel::fuzz
