#include "checkpoint.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>

#include <zlib.h>

#include "accel/error.hpp"

namespace accel::cluster {
namespace {

constexpr char kCheckpointMagic[8] = {'A', 'C', 'C', 'C', 'K', 'P', 'T', '3'};  // 3: the job's options
// Far above any real checkpoint (k x d centroids and a few vectors), far
// below what a damaged length could make us allocate.
constexpr std::uint64_t kMaxPayload = std::uint64_t{1} << 31;
constexpr std::uint64_t kMaxItems = std::uint64_t{1} << 20;

std::uint32_t crc(std::span<const std::byte> b) {
  uLong c = 0;
  for (std::size_t off = 0; off < b.size();) {
    const std::size_t len = std::min<std::size_t>(b.size() - off, 1u << 30);
    c = ::crc32(c, reinterpret_cast<const Bytef*>(b.data() + off), static_cast<uInt>(len));
    off += len;
  }
  return static_cast<std::uint32_t>(c);
}

Bytes encode_checkpoint(const Checkpoint& c) {
  Out o;
  o.b.reserve(256 + c.workload.size() + c.listen.size() + c.job_file.size() + c.params.size() + c.state.size() + c.job_state.size() +
              8 * (c.begin.size() + c.loads.size()) +
              4 * (c.members.active.size() + c.members.inactive.size() + c.members.recovering.size()));
  o.put(c.job);
  o.text(c.workload);
  o.put(c.units);
  o.put(c.workers);
  o.text(c.listen);
  o.text(c.job_file);
  o.put(c.input_fingerprint);
  o.put(static_cast<std::uint32_t>(c.options.size()));
  for (const auto& [name, value] : c.options) {
    o.text(name);
    o.text(value);
  }
  o.bytes(c.params);
  o.put(c.round);
  o.bytes(c.state);
  o.bytes(c.job_state);
  o.array(c.begin);
  o.array(c.loads);
  o.array(c.members.active);
  o.array(c.members.inactive);
  o.array(c.members.recovering);
  o.put(c.all_lost_at);
  return std::move(o.b);
}

Checkpoint decode_checkpoint(std::span<const std::byte> b) {
  In i(b);
  Checkpoint c;
  c.job = i.get<std::uint64_t>();
  c.workload = i.text(1024);
  c.units = i.get<std::int64_t>();
  c.workers = i.get<std::uint32_t>();
  c.listen = i.text(1024);
  c.job_file = i.text(4096);
  c.input_fingerprint = i.get<std::uint64_t>();
  const auto options = i.get<std::uint32_t>();
  if (options > 256) throw InputError(std::to_string(options) + " options");
  for (std::uint32_t k = 0; k < options; ++k) {
    std::string name = i.text(256);
    c.options.emplace_back(std::move(name), i.text(4096));
  }
  c.params = i.bytes(kMaxPayload);
  c.round = i.get<std::int64_t>();
  c.state = i.bytes(kMaxPayload);
  c.job_state = i.bytes(kMaxPayload);
  c.begin = i.array<std::int64_t>(kMaxItems);
  c.loads = i.array<std::int64_t>(kMaxItems);
  c.members.active = i.array<std::uint32_t>(kMaxItems);
  c.members.inactive = i.array<std::uint32_t>(kMaxItems);
  c.members.recovering = i.array<std::uint32_t>(kMaxItems);
  c.all_lost_at = i.get<std::int64_t>();
  i.end();
  const auto parts = static_cast<std::size_t>(c.workers) + 1;
  if (c.units < 0 || c.round < 0 || c.begin.size() != parts || c.loads.size() != parts)
    throw InputError("inconsistent partition map");
  std::int64_t next = 0;
  for (std::size_t w = 0; w < parts; ++w) {
    if (c.begin[w] != next || c.loads[w] < 0 || c.loads[w] > c.units - next)
      throw InputError("inconsistent partition map");
    next += c.loads[w];
  }
  if (next != c.units) throw InputError("inconsistent partition map");
  return c;
}

bool write_all(int fd, const void* p, std::size_t n) {
  const auto* c = static_cast<const char*>(p);
  while (n > 0) {
    const ssize_t w = ::write(fd, c, n);
    if (w <= 0) return false;
    c += w;
    n -= static_cast<std::size_t>(w);
  }
  return true;
}

}  // namespace

std::string checkpoint_path(const std::string& dir) {
  return (std::filesystem::path(dir) / "coordinator.checkpoint").string();
}

void save_checkpoint(const std::string& path, const Checkpoint& c) {
  const Bytes payload = encode_checkpoint(c);
  const std::uint64_t len = payload.size();
  const std::uint32_t sum = crc(payload);
  const std::string tmp = path + ".tmp." + std::to_string(::getpid());
  const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  if (fd < 0) throw InputError(path + ": cannot write the checkpoint: " + std::strerror(errno));
  const bool ok = write_all(fd, kCheckpointMagic, sizeof kCheckpointMagic) && write_all(fd, &len, sizeof len) &&
                  write_all(fd, &sum, sizeof sum) && write_all(fd, payload.data(), payload.size()) &&
                  ::fsync(fd) == 0;
  const std::string why = std::strerror(errno);
  if (::close(fd) != 0 || !ok) {
    ::unlink(tmp.c_str());
    throw InputError(path + ": writing the checkpoint failed: " + why);
  }
  std::error_code ec;
  std::filesystem::rename(tmp, path, ec);
  if (ec) {
    ::unlink(tmp.c_str());
    throw InputError(path + ": cannot rename the checkpoint into place: " + ec.message());
  }
  // The rename must reach the disk too.
  const auto dir = std::filesystem::path(path).parent_path();
  const int dfd = ::open(dir.empty() ? "." : dir.c_str(), O_RDONLY | O_CLOEXEC);
  if (dfd >= 0) {
    ::fsync(dfd);
    ::close(dfd);
  }
}

Checkpoint load_checkpoint(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw InputError(path + ": no coordinator checkpoint there");
  std::error_code ec;
  const std::uint64_t size = std::filesystem::file_size(path, ec);
  char magic[8] = {};
  std::uint64_t len = 0;
  std::uint32_t sum = 0;
  constexpr std::uint64_t head = sizeof magic + sizeof len + sizeof sum;
  if (ec || size < head || !in.read(magic, sizeof magic) || std::memcmp(magic, kCheckpointMagic, sizeof magic) != 0)
    throw InputError(path + ": not a coordinator checkpoint");
  in.read(reinterpret_cast<char*>(&len), sizeof len);
  in.read(reinterpret_cast<char*>(&sum), sizeof sum);
  if (!in || len > kMaxPayload || len != size - head)
    throw InputError(path + ": damaged checkpoint (its length disagrees with the file's)");
  Bytes payload(len);
  if (!in.read(reinterpret_cast<char*>(payload.data()), static_cast<std::streamsize>(len)))
    throw InputError(path + ": damaged checkpoint (truncated)");
  if (crc(payload) != sum) throw InputError(path + ": damaged checkpoint (checksum)");
  try {
    return decode_checkpoint(payload);
  } catch (const InputError& e) {
    throw InputError(path + ": damaged checkpoint (" + e.what() + ")");
  }
}

double young_interval(double cost_s, double mtbf_s, double floor_s) {
  return std::max(std::sqrt(2.0 * std::max(cost_s, 0.0) * std::max(mtbf_s, 0.0)), floor_s);
}

std::uint64_t checkpoint_fingerprint(std::span<const std::byte> data) {
  constexpr std::size_t kWhole = std::size_t{256} << 20, kEdge = 1 << 20, kBlocks = 4096, kBlock = 64 << 10;
  std::uint32_t sum = 0;
  if (data.size() <= kWhole) {
    sum = crc(data);
  } else {
    // One crc32 running over the pieces in order, read in place.
    uLong c = 0;
    auto take = [&](std::size_t at, std::size_t n) {
      c = ::crc32(c, reinterpret_cast<const Bytef*>(data.data() + at), static_cast<uInt>(n));
    };
    take(0, kEdge);
    const std::size_t pitch = (data.size() - kBlock) / (kBlocks - 1);
    for (std::size_t b = 0; b < kBlocks; ++b) take(b * pitch, kBlock);
    take(data.size() - kEdge, kEdge);
    sum = static_cast<std::uint32_t>(c);
  }
  return (static_cast<std::uint64_t>(sum) << 32 | (data.size() & 0xffffffffu)) ^ (data.size() * 0x9E3779B97F4A7C15ull);
}

}  // namespace accel::cluster
