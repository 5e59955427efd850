#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "accel/error.hpp"
#include "accel/io.hpp"
#include "messages.hpp"

namespace accel {

MappedFile::MappedFile(const std::string& path) : path_(path) {
  io::require_file(path);
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) throw InputError(path + ": cannot open: " + std::strerror(errno));
  struct stat st {};
  if (::fstat(fd, &st) != 0) {
    const int e = errno;
    ::close(fd);
    throw InputError(path + ": cannot stat: " + std::strerror(e));
  }
  size_ = static_cast<std::size_t>(st.st_size);
  if (size_ > 0) {
    base_ = ::mmap(nullptr, size_, PROT_READ, MAP_PRIVATE, fd, 0);
    if (base_ == MAP_FAILED) {
      const int e = errno;
      ::close(fd);
      base_ = nullptr;
      throw InputError(path + ": cannot map: " + std::strerror(e));
    }
  }
  ::close(fd);
}

MappedFile::~MappedFile() {
  if (base_) ::munmap(base_, size_);
}

std::span<const std::byte> MappedFile::bytes() const { return {static_cast<const std::byte*>(base_), size_}; }

void MappedFile::release() const {
  // Read-only private pages never written: dropping them loses nothing.
  if (base_) ::madvise(base_, size_, MADV_DONTNEED);
}

void MappedFile::release(std::span<const std::byte> part) const {
  static const auto page = static_cast<std::uintptr_t>(::sysconf(_SC_PAGESIZE));
  const auto first = reinterpret_cast<std::uintptr_t>(part.data());
  const auto last = first + part.size();
  const std::uintptr_t from = (first + page - 1) / page * page, to = last / page * page;
  if (base_ && to > from) ::madvise(reinterpret_cast<void*>(from), to - from, MADV_DONTNEED);
}

}  // namespace accel
