#include "workload.hpp"

#include <algorithm>
#include <cstdio>
#include <mutex>

#include "accel/codec.hpp"
#include "checkpoint.hpp"
#include "protocol.hpp"

namespace accel::cluster {
namespace {
std::map<std::string, std::unique_ptr<Workload>>& workloads() {
  static std::map<std::string, std::unique_ptr<Workload>> m;
  return m;
}
}  // namespace

AllToAllPartition& all_to_all(Partition& p) {
  if (auto* a = dynamic_cast<AllToAllPartition*>(&p)) return *a;
  throw std::logic_error("an all-to-all workload opened a partition of another kind");
}

StarPartition& star(Partition& p) {
  if (auto* s = dynamic_cast<StarPartition*>(&p)) return *s;
  throw std::logic_error("a central workload opened a partition of another kind");
}

std::string Job::option_text(double v) {
  char s[32];
  std::snprintf(s, sizeof s, "%.17g", v);
  return s;
}

Bytes Job::decide(std::int64_t, const std::map<std::uint32_t, Bytes>&) {
  throw std::logic_error("this workload does not use the central exchange");
}

// The rows are not the coordinator's: their pages go back as each block
// is read, with 2 MiB about it (the folio a touch may have mapped), where
// rows have one width (a dense job; others at the end).
std::uint64_t Job::digest(std::int64_t begin, std::int64_t end) {
  if (end <= begin) return 0;
  const auto bytes = data(begin, end);
  const auto rows = static_cast<std::size_t>(end - begin);
  const std::size_t width = bytes.size() % rows == 0 ? bytes.size() / rows : 0;
  const std::uint64_t d = rows_digest(bytes, [&](std::size_t at, std::size_t n) {
    if (width == 0) return;
    constexpr std::size_t kAbout = 2 << 20;
    const std::size_t from = at > kAbout ? (at - kAbout) / width : 0;
    const std::size_t to = std::min(rows, (at + n + kAbout) / width + 1);
    release(begin + static_cast<std::int64_t>(from), begin + static_cast<std::int64_t>(to));
  });
  release(begin, end);
  return d;
}

std::uint64_t Job::fingerprint() {
  const auto f = checkpoint_fingerprint(data(0, units()));
  release(0, units());
  return f;
}

Bytes encode_gathered(const RoundOutcome& out, std::span<const std::byte> state) {
  Out o;
  o.put<std::uint8_t>((out.stop ? 1 : 0) | (out.last ? 2 : 0));
  o.text(out.log.dump());
  o.bytes(state);
  return std::move(o.b);
}

Gathered decode_gathered(std::span<const std::byte> data, std::uint64_t max_bytes) {
  In i(data);
  Gathered g;
  const auto flags = i.get<std::uint8_t>();
  if (flags & ~3u) throw InputError("decision with unknown flags");
  g.outcome.stop = (flags & 1) != 0;
  g.outcome.last = (flags & 2) != 0;
  g.outcome.log = nlohmann::json::parse(i.text(std::uint64_t{1} << 16), nullptr, false);
  if (!g.outcome.log.is_object()) throw InputError("decision with a log that is not a JSON object");
  g.state = i.bytes(max_bytes);
  i.end();
  return g;
}

bool register_workload(const std::string& name, std::unique_ptr<Workload> w) {
  workloads()[name] = std::move(w);
  return true;
}

const Workload& find_workload(const std::string& name) {
  auto it = workloads().find(name);
  if (it == workloads().end()) throw InputError("task names workload '" + name + "', which this build does not have");
  return *it->second;
}

}  // namespace accel::cluster
