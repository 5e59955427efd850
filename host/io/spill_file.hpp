// A spill file: values written in order to an unlinked temporary file,
// then mapped read-only as a streamed matrix's view (text parsed once,
// float64 .npy converted once), so that a process passes over an input it
// does not hold. In ACCEL_SPILL_DIR, TMPDIR or /var/tmp (not /tmp: where
// that is a tmpfs the spill would live in memory).
#pragma once

#include <cstddef>
#include <memory>
#include <string>
#include <vector>

#include "accel/io.hpp"

namespace accel::io {

// ACCEL_SPILL_DIR, TMPDIR or /var/tmp.
std::string spill_dir();

class SpillFile {
 public:
  // Errors name `source`, the input being spilled.
  explicit SpillFile(const std::string& source);
  ~SpillFile();
  SpillFile(const SpillFile&) = delete;
  SpillFile& operator=(const SpillFile&) = delete;

  void write(const float* v, std::size_t n);
  // The values written, mapped; the file goes with the last view (none
  // when nothing was written).
  std::shared_ptr<const float> map();

 private:
  void flush();

  std::string source_, dir_;
  int fd_ = -1;
  std::vector<float> buf_;
  std::size_t bytes_ = 0;
};

// A .npy as a streamed matrix: float32 mapped in place (map_npy), else
// (float64, a misaligned header) converted a block at a time into a spill
// file and mapped (npy.cpp).
Matrix stream_npy(const std::string& path);
// A 2-D .npy's rows and columns, from its header alone.
void npy_shape(const std::string& path, std::int64_t* rows, std::int64_t* cols);

}  // namespace accel::io
