#include "snapshot.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>

#include <zlib.h>

#include "accel/error.hpp"

namespace accel::cluster {
namespace {
constexpr char kMagic[8] = {'A', 'C', 'C', 'S', 'N', 'A', 'P', '4'};
constexpr std::size_t kAlign = RowAllocator<std::byte>::kAlign;
std::size_t round_up(std::size_t v) { return (v + kAlign - 1) / kAlign * kAlign; }
std::uint32_t crc(const void* p, std::size_t n, std::uint32_t seed = 0) {
  // zlib's crc32 takes a uInt length: feed large data in pieces.
  auto c = static_cast<uLong>(seed);
  const auto* b = static_cast<const Bytef*>(p);
  for (std::size_t off = 0; off < n;) {
    const std::size_t len = std::min<std::size_t>(n - off, 1u << 30);
    c = ::crc32(c, b + off, static_cast<uInt>(len));
    off += len;
  }
  return static_cast<std::uint32_t>(c);
}
}  // namespace

std::string snapshot_path(const std::string& dir, std::uint32_t id) {
  return (std::filesystem::path(dir) / ("worker-" + std::to_string(id) + ".snapshot")).string();
}

void save_snapshot(const std::string& path, const Snapshot& s, bool with_data) {
  const auto task = encode(s.task);
  std::vector<char> buf(kMagic, kMagic + 8);
  auto put = [&](const void* p, std::size_t n) {
    buf.insert(buf.end(), static_cast<const char*>(p), static_cast<const char*>(p) + n);
  };
  const std::uint64_t tlen = task.size(), rlen = with_data ? s.data.size() : 0;
  put(&s.job, 8);
  put(&s.id, 4);
  put(&s.incarnation, 4);
  put(&tlen, 8);
  put(task.data(), task.size());
  put(&rlen, 8);
  const std::uint32_t sums[2] = {crc(buf.data(), buf.size()), crc(s.data.data(), rlen)};
  put(sums, 8);
  buf.resize(round_up(buf.size()), 0);  // the data starts on a page of the file
  const std::string tmp = path + ".tmp." + std::to_string(::getpid());
  // 0600: the task holds this worker's keys (bootstrap.hpp).
  const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  if (fd < 0) throw InputError(path + ": cannot write snapshot: " + std::strerror(errno));
  auto fail = [&](const char* what) {
    const std::string why = std::strerror(errno);
    ::close(fd);
    ::unlink(tmp.c_str());
    throw InputError(path + ": snapshot " + what + " failed: " + why);
  };
  auto write_at = [&](int to, const char* p, std::size_t n, std::size_t off) {
    std::size_t done = 0;
    while (done < n) {
      const ssize_t w = ::pwrite(to, p + done, n - done, static_cast<off_t>(off + done));
      if (w <= 0) return false;
      done += static_cast<std::size_t>(w);
    }
    return true;
  };
  if (!write_at(fd, buf.data(), buf.size(), 0)) fail("write");
  // The rows' whole pages with O_DIRECT: the disk reads them from memory
  // (next to no CPU, where copying them into the page cache would take
  // time from a core that is computing the first iteration). Where the
  // file system refuses it (tmpfs), or for the last partial page, plain writes.
  const char* rows = reinterpret_cast<const char*>(s.data.data());
  const std::size_t bytes = rlen;
  std::size_t direct = reinterpret_cast<std::uintptr_t>(rows) % kAlign == 0 ? bytes / kAlign * kAlign : 0;
  if (direct > 0) {
    const int dfd = ::open(tmp.c_str(), O_WRONLY | O_DIRECT);
    if (dfd < 0 || !write_at(dfd, rows, direct, buf.size())) direct = 0;
    if (dfd >= 0) ::close(dfd);
  }
  if (!write_at(fd, rows + direct, bytes - direct, buf.size() + direct)) fail("write");
  if (::fsync(fd) != 0) fail("fsync");
  if (::close(fd) != 0) {
    ::unlink(tmp.c_str());
    throw InputError(path + ": snapshot close failed: " + std::strerror(errno));
  }
  std::filesystem::rename(tmp, path);
  // The rename itself must reach the disk too.
  const int dfd = ::open(std::filesystem::path(path).parent_path().empty() ? "." : std::filesystem::path(path).parent_path().c_str(), O_RDONLY);
  if (dfd >= 0) {
    ::fsync(dfd);
    ::close(dfd);
  }
}

std::optional<Snapshot> load_snapshot(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return std::nullopt;
  std::error_code ec;
  const std::uint64_t size = std::filesystem::file_size(path, ec);
  if (ec) return std::nullopt;
  std::uint64_t pos = 0;  // read straight into place: the data is most of the file
  std::vector<char> head;  // what the header checksum covers: everything up to the data length
  bool capture = true;
  auto take = [&](void* p, std::uint64_t n) {
    if (size - pos < n || !in.read(static_cast<char*>(p), static_cast<std::streamsize>(n)))
      throw InputError(path + ": damaged snapshot (truncated)");
    pos += n;
    if (capture) head.insert(head.end(), static_cast<char*>(p), static_cast<char*>(p) + n);
  };
  char magic[8];
  take(magic, 8);
  if (std::memcmp(magic, kMagic, 8) != 0) throw InputError(path + ": not a worker snapshot");
  Snapshot s;
  std::uint64_t tlen = 0, rlen = 0;
  take(&s.job, 8);
  take(&s.id, 4);
  take(&s.incarnation, 4);
  take(&tlen, 8);
  if (tlen > size) throw InputError(path + ": damaged snapshot (task length)");
  std::vector<std::byte> task(tlen);
  take(task.data(), tlen);
  take(&rlen, 8);
  capture = false;
  const std::uint32_t head_crc = crc(head.data(), head.size());
  std::uint32_t sums[2];
  take(sums, 8);
  if (sums[0] != head_crc) throw InputError(path + ": damaged snapshot (header checksum)");
  try {
    s.task = decode_task(task, Limits{});
  } catch (const InputError& e) {
    throw InputError(path + ": damaged snapshot (" + e.what() + ")");
  }
  if (rlen != 0 && rlen != s.task.data_bytes) throw InputError(path + ": damaged snapshot (data length)");
  std::vector<char> pad(round_up(pos) - pos);
  take(pad.data(), pad.size());
  if (size - pos != rlen)
    throw InputError(path + ": damaged snapshot (" + (size - pos < rlen ? "truncated" : "trailing bytes") + ")");
  s.data.resize(rlen);
  take(s.data.data(), rlen);
  if (crc(s.data.data(), rlen) != sums[1]) throw InputError(path + ": damaged snapshot (data checksum)");
  return s;
}

}  // namespace accel::cluster
