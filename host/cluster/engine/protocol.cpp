#include "protocol.hpp"

#include <zlib.h>

#include <algorithm>

namespace accel::cluster {
namespace {

void put_view(Out& o, const Membership& m) {
  o.array(m.active);
  o.array(m.inactive);
  o.array(m.recovering);
}

Membership get_view(In& i, std::uint64_t max) {
  Membership m;
  m.active = i.array<std::uint32_t>(max);
  m.inactive = i.array<std::uint32_t>(max);
  m.recovering = i.array<std::uint32_t>(max);
  return m;
}

void put_keys(Out& o, const std::vector<transport::MacKey>& keys) {
  o.put<std::uint64_t>(keys.size());
  for (const auto& k : keys) o.b.insert(o.b.end(), k.begin(), k.end());
}

std::vector<transport::MacKey> get_keys(In& i, const Limits& l) {
  const auto n = i.get<std::uint64_t>();
  if (n > static_cast<std::uint64_t>(l.max_peers) + 1) throw InputError("message with too many keys");
  std::vector<transport::MacKey> keys(n);
  for (auto& k : keys)
    for (auto& b : k) b = i.get<std::byte>();
  return keys;
}

void put_peers(Out& o, const std::vector<Peer>& ps) {
  o.put<std::uint64_t>(ps.size());
  for (const auto& p : ps) {
    o.put(p.id);
    o.bytes(p.address);
  }
}

std::vector<Peer> get_peers(In& i, const Limits& l) {
  const auto n = i.get<std::uint64_t>();
  if (n > static_cast<std::uint64_t>(l.max_peers)) throw InputError("message lists too many peers");
  std::vector<Peer> ps(n);
  for (auto& p : ps) {
    p.id = i.get<std::uint32_t>();
    p.address = i.bytes(l.max_address);
  }
  return ps;
}

}  // namespace

const char* type_name(std::uint16_t t) {
  switch (t) {
    case kHello: return "hello";
    case kProbe: return "probe";
    case kCapability: return "capability";
    case kTask: return "task";
    case kTicket: return "ticket";
    case kMoveTicket: return "move ticket";
    case kPartial: return "partial";
    case kAsk: return "ask";
    case kConfirm: return "confirm";
    case kReady: return "ready";
    case kStart: return "start";
    case kContribution: return "contribution";
    case kCurrent: return "current";
    case kResync: return "resync";
    case kDone: return "done";
    case kReject: return "reject";
    case kDecision: return "decision";
    case kEvicted: return "evicted";
    case kCounted: return "counted";
    case kNeed: return "need";
    case kLeave: return "leave";
    case kMovesReady: return "moves-ready";
    case kFailed: return "failed";
  }
  return "unknown";
}

std::uint64_t counted_digest(const std::map<std::uint32_t, std::vector<std::byte>>& members) {
  std::map<std::uint32_t, std::span<const std::byte>> spans;
  for (const auto& [id, data] : members) spans.emplace(id, data);
  return counted_digest(spans);
}

std::uint64_t counted_digest(const std::map<std::uint32_t, std::span<const std::byte>>& members) {
  uLong c = 0;
  std::uint64_t n = 0;
  for (const auto& [id, data] : members) {
    if (data.empty()) continue;  // counts nothing, as an absent member
    const std::uint64_t head[2] = {id, data.size()};
    c = ::crc32(c, reinterpret_cast<const Bytef*>(head), sizeof head);
    c = ::crc32_z(c, reinterpret_cast<const Bytef*>(data.data()), data.size());
    ++n;
  }
  const std::uint64_t d = (static_cast<std::uint64_t>(c) << 32) ^ ((n + 1) * 0x9E3779B97F4A7C15ull);
  return d == 0 ? 1 : d;
}

std::uint64_t rows_digest(std::span<const std::byte> data,
                          const std::function<void(std::size_t at, std::size_t n)>& read) {
  constexpr std::size_t kWhole = 4 << 20, kBlock = 64 << 10, kBlocks = 64;
  uLong c = 0;
  auto take = [&](std::size_t at, std::size_t n) {
    c = ::crc32(c, reinterpret_cast<const Bytef*>(data.data() + at), static_cast<uInt>(n));
    if (read) read(at, n);
  };
  if (data.size() <= kWhole) {
    take(0, data.size());
  } else {
    const std::size_t pitch = (data.size() - kBlock) / (kBlocks - 1);
    for (std::size_t b = 0; b + 1 < kBlocks; ++b) take(b * pitch, kBlock);
    take(data.size() - kBlock, kBlock);  // the last
  }
  const std::uint64_t d = (static_cast<std::uint64_t>(c) << 32) ^ (data.size() * 0x9E3779B97F4A7C15ull);
  return d == 0 ? 1 : d;
}

Bytes encode(const Task& t) {
  Out o;
  o.text(t.workload);
  o.put(t.self);
  o.put(t.units);
  o.put(t.begin);
  o.put(t.rows);
  o.put(t.max_rounds);
  o.put(t.data_bytes);
  o.text(t.input);
  o.put<std::uint8_t>((t.pull ? 1 : 0) | (t.gathered ? 2 : 0) | (t.tree ? 4 : 0) | (t.confirmed ? 8 : 0));
  o.put(t.digest);
  o.bytes(t.params);
  put_peers(o, t.peers);
  put_keys(o, t.pair_keys);
  return std::move(o.b);
}

Task decode_task(std::span<const std::byte> in, const Limits& l) {
  In i(in);
  Task t;
  t.workload = i.text(l.max_name);
  t.self = i.get<std::uint32_t>();
  t.units = i.get<std::int64_t>();
  t.begin = i.get<std::int64_t>();
  t.rows = i.get<std::int64_t>();
  t.max_rounds = i.get<std::int64_t>();
  t.data_bytes = i.get<std::uint64_t>();
  if (t.rows < 0 || t.begin < 0 || t.begin > t.units || t.rows > t.units - t.begin || t.max_rounds < 0 ||
      t.data_bytes > (std::uint64_t{1} << 46))
    throw InputError("task with an impossible partition");
  t.input = i.text(l.max_path);
  const auto flags = i.get<std::uint8_t>();
  if (flags & ~15u) throw InputError("task with unknown flags");
  t.pull = (flags & 1) != 0;
  t.gathered = (flags & 2) != 0;
  t.tree = (flags & 4) != 0;
  t.confirmed = (flags & 8) != 0;
  t.digest = i.get<std::uint64_t>();
  t.params = i.bytes(l.max_data);
  t.peers = get_peers(i, l);
  t.pair_keys = get_keys(i, l);
  i.end();
  return t;
}

Bytes encode(const Contribution& c) {
  Out o;  // its arrays leave slack behind them: the small fields after the data do not copy it again
  o.bytes(c.data);
  o.put<std::uint8_t>(c.has_view);
  if (c.has_view) put_view(o, c.view);
  o.bytes(c.reply_address);
  o.put<std::uint64_t>(c.stand_ins.size());
  for (const auto& [id, data] : c.stand_ins) {
    o.put(id);
    o.bytes(data);
  }
  o.put(c.work_rows);
  o.put(c.work_seconds);
  o.put(c.room);
  o.put<std::uint64_t>(c.trims.size());
  for (const auto& [id, rows] : c.trims) {
    o.put(id);
    o.put(rows);
  }
  o.put(c.commit_moves);
  o.put(c.moves_from);
  o.put<std::uint8_t>(c.has_moves);
  if (c.has_moves) {
    o.put(c.moves_id);
    o.put<std::uint64_t>(c.moves.size());
    for (const auto& m : c.moves) {
      o.put(m.home);
      o.put(m.by);
      o.put(m.begin);
      o.put(m.rows);
      o.put(m.bytes);
      o.put(m.digest);
    }
  }
  put_peers(o, c.peers);
  o.put(c.counted);
  return std::move(o.b);
}

Contribution decode_contribution(std::span<const std::byte> in, const Limits& l) {
  In i(in);
  Contribution c;
  c.data = i.bytes(l.max_data);
  c.has_view = i.get<std::uint8_t>() != 0;
  if (c.has_view) c.view = get_view(i, static_cast<std::uint64_t>(l.max_peers));
  c.reply_address = i.bytes(l.max_address);
  const auto n = i.get<std::uint64_t>();
  if (n > static_cast<std::uint64_t>(l.max_peers)) throw InputError("contribution with too many stand-ins");
  for (std::uint64_t k = 0; k < n; ++k) {
    const auto id = i.get<std::uint32_t>();
    c.stand_ins.emplace_back(id, i.bytes(l.max_data));
  }
  c.work_rows = i.get<std::int64_t>();
  c.work_seconds = i.get<double>();
  if (c.work_rows < 0 || !(c.work_seconds >= 0) || c.work_seconds > 1e9)
    throw InputError("contribution with impossible work figures");
  c.room = i.get<std::int64_t>();
  if (c.room < -1) throw InputError("contribution with a negative memory room");
  const auto t = i.get<std::uint64_t>();
  if (t > static_cast<std::uint64_t>(l.max_peers)) throw InputError("contribution with too many trims");
  for (std::uint64_t k = 0; k < t; ++k) {
    const auto id = i.get<std::uint32_t>();
    const auto rows = i.get<std::int64_t>();
    if (rows < 0) throw InputError("contribution with a negative trim");
    c.trims.emplace_back(id, rows);
  }
  c.commit_moves = i.get<std::uint64_t>();
  c.moves_from = i.get<std::int64_t>();
  if (c.commit_moves != 0 && c.moves_from < 1)
    throw InputError("contribution with moves from round " + std::to_string(c.moves_from));
  c.has_moves = i.get<std::uint8_t>() != 0;
  if (c.has_moves) {
    c.moves_id = i.get<std::uint64_t>();
    if (c.moves_id == 0) throw InputError("contribution with a plan of moves of id 0");
    const auto m = i.get<std::uint64_t>();
    // At most one piece per (home, worker) pair.
    if (m > static_cast<std::uint64_t>(l.max_peers) * 64) throw InputError("contribution with too many moves");
    for (std::uint64_t k = 0; k < m; ++k) {
      Move mv;
      mv.home = i.get<std::uint32_t>();
      mv.by = i.get<std::uint32_t>();
      mv.begin = i.get<std::int64_t>();
      mv.rows = i.get<std::int64_t>();
      mv.bytes = i.get<std::uint64_t>();
      mv.digest = i.get<std::uint64_t>();
      if (mv.begin < 0 || mv.rows < 1 || mv.begin > (std::int64_t{1} << 46) - mv.rows ||
          mv.bytes > (std::uint64_t{1} << 46) || mv.by == 0 || mv.by == mv.home)
        throw InputError("contribution with an impossible move");
      c.moves.push_back(mv);
    }
  }
  c.peers = get_peers(i, l);
  c.counted = i.get<std::uint64_t>();
  i.end();
  return c;
}

Bytes encode(const Current& c) {
  Out o;
  o.put(c.round);
  o.bytes(c.state);
  put_view(o, c.view);
  put_peers(o, c.peers);
  o.put<std::uint8_t>(c.counts);
  put_keys(o, c.pair_keys);
  return std::move(o.b);
}

Current decode_current(std::span<const std::byte> in, const Limits& l) {
  In i(in);
  Current c;
  c.round = i.get<std::int64_t>();
  if (c.round < 1) throw InputError("current-round message with a bad round");
  c.state = i.bytes(l.max_data);
  c.view = get_view(i, static_cast<std::uint64_t>(l.max_peers));
  c.peers = get_peers(i, l);
  c.counts = i.get<std::uint8_t>() != 0;
  c.pair_keys = get_keys(i, l);
  i.end();
  return c;
}

Bytes encode_hello(bool resume, std::int64_t iteration, const Ticket& ticket) {
  Out o;
  o.put<std::uint8_t>(resume);
  o.put(iteration);
  for (const std::byte b : ticket) o.put(b);
  return std::move(o.b);
}

void decode_hello(std::span<const std::byte> in, bool& resume, std::int64_t& iteration, Ticket& ticket) {
  In i(in);
  resume = i.get<std::uint8_t>() != 0;
  iteration = i.get<std::int64_t>();
  for (std::byte& b : ticket) b = i.get<std::byte>();
  i.end();
}

Bytes encode_counted(std::uint32_t member, const Bytes* data) {
  Out o;
  o.put(member);
  o.put<std::uint8_t>(data != nullptr);
  if (data) o.bytes(*data);
  return std::move(o.b);
}

std::pair<std::uint32_t, std::optional<Bytes>> decode_counted(std::span<const std::byte> in, const Limits& l) {
  In i(in);
  const auto id = i.get<std::uint32_t>();
  std::optional<Bytes> data;
  if (i.get<std::uint8_t>() != 0) data = i.bytes(l.max_data);
  i.end();
  return {id, std::move(data)};
}

Bytes encode_ids(const std::vector<std::uint32_t>& ids) {
  Out o;
  o.array(ids);
  return std::move(o.b);
}

std::vector<std::uint32_t> decode_ids(std::span<const std::byte> in, const Limits& l) {
  In i(in);
  auto ids = i.array<std::uint32_t>(static_cast<std::size_t>(l.max_peers) + 1);
  i.end();
  if (!std::is_sorted(ids.begin(), ids.end()) || std::adjacent_find(ids.begin(), ids.end()) != ids.end())
    throw InputError("confirmation with ids out of order");
  return ids;
}

Bytes encode_u32(std::uint32_t v) {
  Out o;
  o.put(v);
  return std::move(o.b);
}

std::uint32_t decode_u32(std::span<const std::byte> in) {
  In i(in);
  const auto v = i.get<std::uint32_t>();
  i.end();
  return v;
}

}  // namespace accel::cluster
