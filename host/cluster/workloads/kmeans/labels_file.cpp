#include "labels_file.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <vector>

#include "accel/error.hpp"
#include "accel/io.hpp"

namespace accel::cluster {
namespace {

std::string labels_header(std::int64_t rows) { return npy_header({rows}, "<i4"); }

std::string why(const std::string& file, const char* what) { return file + ": " + what + ": " + std::strerror(errno); }

// All of b at offset `at`, or InputError naming the file.
void pwrite_all(int fd, const void* b, std::size_t n, std::int64_t at, const std::string& file) {
  const auto* p = static_cast<const char*>(b);
  while (n > 0) {
    const ssize_t got = ::pwrite(fd, p, n, at);
    if (got < 0 && errno == EINTR) continue;
    if (got <= 0) throw InputError(why(file, "cannot write labels"));
    p += got;
    n -= static_cast<std::size_t>(got);
    at += got;
  }
}

constexpr std::int64_t kBlock = 1 << 18;  // labels per block (1 MiB)

}  // namespace

LabelsFile::LabelsFile(std::string path, std::int64_t rows, bool keep)
    : path_(std::move(path)), partial_(partial_of(path_)), rows_(rows) {
  const std::string header = labels_header(rows);
  const auto size = static_cast<std::int64_t>(header.size()) + rows * 4;
  struct stat st {};
  if (keep && ::stat(partial_.c_str(), &st) == 0 && st.st_size == size) return;
  const int fd = ::open(partial_.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) throw InputError(why(partial_, "cannot create the labels"));
  try {
    pwrite_all(fd, header.data(), header.size(), 0, partial_);
    const std::vector<std::int32_t> none(static_cast<std::size_t>(std::min(rows, kBlock)), -1);
    for (std::int64_t at = 0; at < rows; at += kBlock)
      pwrite_all(fd, none.data(), static_cast<std::size_t>(std::min(kBlock, rows - at)) * 4,
                 static_cast<std::int64_t>(header.size()) + at * 4, partial_);
  } catch (...) {
    ::close(fd);
    std::remove(partial_.c_str());
    throw;
  }
  ::close(fd);
}

LabelsFile::~LabelsFile() {
  if (!committed_) std::remove(partial_.c_str());
}

std::int64_t LabelsFile::unlabelled() const {
  const int fd = ::open(partial_.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) throw InputError(why(partial_, "cannot read the labels back"));
  const auto at0 = static_cast<std::int64_t>(labels_header(rows_).size());
  std::vector<std::int32_t> b(static_cast<std::size_t>(std::min(rows_, kBlock)));
  std::int64_t missing = 0;
  for (std::int64_t at = 0; at < rows_; at += kBlock) {
    const std::int64_t n = std::min(kBlock, rows_ - at);
    const ssize_t got = ::pread(fd, b.data(), static_cast<std::size_t>(n) * 4, at0 + at * 4);
    if (got != n * 4) {
      ::close(fd);
      throw InputError(partial_ + ": the labels file was cut short");
    }
    for (std::int64_t i = 0; i < n; ++i) missing += b[static_cast<std::size_t>(i)] < 0;
  }
  ::close(fd);
  return missing;
}

void LabelsFile::commit() {
  std::filesystem::rename(partial_, path_);
  committed_ = true;
}

LabelsWriter::LabelsWriter(std::string partial, std::int64_t units)
    : partial_(std::move(partial)), units_(units), offset_(static_cast<std::int64_t>(labels_header(units).size())) {
  fd_ = ::open(partial_.c_str(), O_WRONLY | O_CLOEXEC);
  if (fd_ < 0) throw InputError(why(partial_, "cannot open the labels for writing (--output-labels needs storage "
                                              "every member shares)"));
  struct stat st {};
  if (::fstat(fd_, &st) != 0 || st.st_size != offset_ + units * 4) {
    ::close(fd_);
    fd_ = -1;
    throw InputError(partial_ + ": not the job's labels file (another size)");
  }
}

LabelsWriter::~LabelsWriter() {
  if (fd_ >= 0) ::close(fd_);
}

void LabelsWriter::write(std::int64_t begin, std::span<const std::int32_t> labels) {
  if (begin < 0 || begin + static_cast<std::int64_t>(labels.size()) > units_)
    throw std::logic_error("labels of rows outside the input");
  pwrite_all(fd_, labels.data(), labels.size_bytes(), offset_ + begin * 4, partial_);
}

void LabelsWriter::sync() {
  if (::fdatasync(fd_) != 0) throw InputError(why(partial_, "cannot sync the labels"));
}

}  // namespace accel::cluster
