// Text part files as the bytes of one file (io.hpp: map_joined_text).
#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "accel/error.hpp"
#include "accel/io.hpp"
#include "spill_file.hpp"

namespace accel {
namespace {

// put(bytes) for each piece of the joined text, in order.
template <class Put>
void join_parts(const std::vector<InputPart>& parts, Put put) {
  static const std::byte newline{'\n'};
  for (std::size_t k = 0; k < parts.size(); ++k) {
    check_file_bytes(parts[k].path, parts[k].file_bytes);
    const MappedFile f(parts[k].path);
    const auto b = f.bytes();
    put(b);
    f.release();
    if (k + 1 < parts.size() && !b.empty() && b.back() != newline) put(std::span<const std::byte>(&newline, 1));
  }
}

}  // namespace

std::unique_ptr<MappedFile> map_joined_text(const std::vector<InputPart>& parts) {
  if (parts.size() == 1) return std::make_unique<MappedFile>(parts[0].path);
  std::string name = io::spill_dir() + "/accel-joined-XXXXXX";
  const int fd = ::mkstemp(name.data());
  if (fd < 0) throw InputError(parts.front().path + ": cannot make a file for its parts in " + io::spill_dir() + ": " +
                               std::strerror(errno));
  // Gone with the mapping, or at once should anything throw.
  const std::shared_ptr<void> cleanup(nullptr, [&](void*) {
    ::close(fd);
    ::unlink(name.c_str());
  });
  join_parts(parts, [&](std::span<const std::byte> b) {
    const char* p = reinterpret_cast<const char*>(b.data());
    for (std::size_t left = b.size(); left > 0;) {
      const ssize_t got = ::write(fd, p, left);
      if (got < 0 && errno == EINTR) continue;
      if (got <= 0) throw InputError(name + ": cannot write the joined parts: " + std::strerror(errno));
      p += got;
      left -= static_cast<std::size_t>(got);
    }
  });
  return std::make_unique<MappedFile>(name);
}

void read_joined_text(const std::vector<InputPart>& parts, std::span<std::byte> out, const std::string& spec) {
  std::size_t at = 0;
  const auto other = [&] { return InputError(spec + ": not the coordinator's training set (another size)"); };
  join_parts(parts, [&](std::span<const std::byte> b) {
    if (b.size() > out.size() - at) throw other();
    std::copy(b.begin(), b.end(), out.begin() + static_cast<std::ptrdiff_t>(at));
    at += b.size();
  });
  if (at != out.size()) throw other();
}

}  // namespace accel
