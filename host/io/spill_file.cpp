#include "spill_file.hpp"

#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>

#include "accel/error.hpp"

namespace accel::io {

std::string spill_dir() {
  const char* dir = std::getenv("ACCEL_SPILL_DIR");
  if (!dir || !*dir) dir = std::getenv("TMPDIR");
  return dir && *dir ? dir : "/var/tmp";
}

SpillFile::SpillFile(const std::string& source) : source_(source), dir_(spill_dir()) {
  std::string name = dir_ + "/accel-spill-XXXXXX";
  fd_ = ::mkstemp(name.data());
  if (fd_ < 0) throw InputError(source + ": cannot make a spill file in " + dir_ + ": " + std::strerror(errno));
  ::unlink(name.c_str());
}

SpillFile::~SpillFile() {
  if (fd_ >= 0) ::close(fd_);
}

void SpillFile::write(const float* v, std::size_t n) {
  buf_.insert(buf_.end(), v, v + n);
  if (buf_.size() >= (std::size_t{8} << 20) / sizeof(float)) flush();
}

std::shared_ptr<const float> SpillFile::map() {
  flush();
  if (bytes_ == 0) return {};
  void* p = ::mmap(nullptr, bytes_, PROT_READ, MAP_PRIVATE, fd_, 0);
  if (p == MAP_FAILED) throw InputError(source_ + ": cannot map its spill file: " + std::strerror(errno));
  const std::size_t len = bytes_;
  return std::shared_ptr<const float>(static_cast<const float*>(p),
                                      [len](const float* q) { ::munmap(const_cast<float*>(q), len); });
}

void SpillFile::flush() {
  const char* p = reinterpret_cast<const char*>(buf_.data());
  std::size_t left = buf_.size() * sizeof(float);
  while (left > 0) {
    const ssize_t got = ::write(fd_, p, left);
    if (got < 0 && errno == EINTR) continue;
    if (got <= 0) throw InputError(source_ + ": cannot write its spill file in " + dir_ + ": " + std::strerror(errno));
    p += got;
    left -= static_cast<std::size_t>(got);
    bytes_ += static_cast<std::size_t>(got);
  }
  buf_.clear();
}

}  // namespace accel::io
