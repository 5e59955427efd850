#include "snapshot.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>

#include "accel/error.hpp"

namespace accel::cluster {
namespace {
constexpr char kMagic[8] = {'A', 'C', 'C', 'S', 'N', 'A', 'P', '1'};
}

std::string snapshot_path(const std::string& dir, std::uint32_t id) {
  return (std::filesystem::path(dir) / ("worker-" + std::to_string(id) + ".snapshot")).string();
}

void save_snapshot(const std::string& path, const Snapshot& s) {
  const auto task = encode(s.task);
  std::vector<char> buf(kMagic, kMagic + 8);
  auto put = [&](const void* p, std::size_t n) {
    buf.insert(buf.end(), static_cast<const char*>(p), static_cast<const char*>(p) + n);
  };
  const std::uint64_t tlen = task.size(), rlen = s.rows.size();
  put(&s.job, 8);
  put(&s.id, 4);
  put(&s.incarnation, 4);
  put(&tlen, 8);
  put(task.data(), task.size());
  put(&rlen, 8);
  const std::string tmp = path + ".tmp." + std::to_string(::getpid());
  const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  if (fd < 0) throw InputError(path + ": cannot write snapshot: " + std::strerror(errno));
  // The header, then the rows straight from memory (no copy of the rows).
  auto write_all = [&](const char* p, std::size_t n) {
    std::size_t done = 0;
    while (done < n) {
      const ssize_t w = ::write(fd, p + done, n - done);
      if (w <= 0) {
        ::close(fd);
        ::unlink(tmp.c_str());
        throw InputError(path + ": snapshot write failed: " + std::strerror(errno));
      }
      done += static_cast<std::size_t>(w);
    }
  };
  write_all(buf.data(), buf.size());
  write_all(reinterpret_cast<const char*>(s.rows.data()), rlen * sizeof(float));
  if (::fsync(fd) != 0 || ::close(fd) != 0) {
    ::unlink(tmp.c_str());
    throw InputError(path + ": snapshot fsync failed: " + std::strerror(errno));
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
  std::vector<char> buf((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  std::size_t pos = 0;
  auto take = [&](void* p, std::size_t n) {
    if (buf.size() - pos < n) throw InputError(path + ": damaged snapshot (truncated)");
    std::memcpy(p, buf.data() + pos, n);
    pos += n;
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
  if (tlen > buf.size()) throw InputError(path + ": damaged snapshot (task length)");
  std::vector<std::byte> task(tlen);
  take(task.data(), tlen);
  s.task = decode_task(task, Limits{});
  take(&rlen, 8);
  if (rlen != static_cast<std::uint64_t>(s.task.rows * s.task.d)) throw InputError(path + ": damaged snapshot (rows)");
  s.rows.resize(rlen);
  take(s.rows.data(), rlen * 4);
  if (pos != buf.size()) throw InputError(path + ": damaged snapshot (trailing bytes)");
  return s;
}

}  // namespace accel::cluster
