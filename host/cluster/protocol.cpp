#include "protocol.hpp"

#include <cstring>

#include "accel/error.hpp"

namespace accel::cluster {
namespace {

class Out {
 public:
  template <class T>
  void put(T v) {
    const auto* p = reinterpret_cast<const std::byte*>(&v);
    b.insert(b.end(), p, p + sizeof v);
  }
  template <class T>
  void array(const std::vector<T>& v) {
    put<std::uint64_t>(v.size());
    const auto* p = reinterpret_cast<const std::byte*>(v.data());
    b.insert(b.end(), p, p + v.size() * sizeof(T));
  }
  void bytes(std::span<const std::byte> v) {
    put<std::uint64_t>(v.size());
    b.insert(b.end(), v.begin(), v.end());
  }
  void view(const Membership& m) {
    array(m.active);
    array(m.inactive);
    array(m.recovering);
  }
  void peers(const std::vector<Peer>& ps) {
    put<std::uint64_t>(ps.size());
    for (const auto& p : ps) {
      put(p.id);
      bytes(p.address);
    }
  }
  std::vector<std::byte> b;
};

class In {
 public:
  In(std::span<const std::byte> s) : s_(s) {}
  template <class T>
  T get() {
    T v;
    std::memcpy(&v, take(sizeof v), sizeof v);
    return v;
  }
  template <class T>
  std::vector<T> array(std::uint64_t max) {
    const auto n = get<std::uint64_t>();
    if (n > max) throw InputError("message array of " + std::to_string(n) + " exceeds " + std::to_string(max));
    std::vector<T> v(n);
    if (n) std::memcpy(v.data(), take(n * sizeof(T)), n * sizeof(T));
    return v;
  }
  std::vector<std::byte> bytes(std::uint64_t max) { return array<std::byte>(max); }
  Membership view(std::uint64_t max) {
    Membership m;
    m.active = array<std::uint32_t>(max);
    m.inactive = array<std::uint32_t>(max);
    m.recovering = array<std::uint32_t>(max);
    return m;
  }
  std::vector<Peer> peers(const Limits& l) {
    const auto n = get<std::uint64_t>();
    if (n > static_cast<std::uint64_t>(l.max_peers)) throw InputError("message lists too many peers");
    std::vector<Peer> ps(n);
    for (auto& p : ps) {
      p.id = get<std::uint32_t>();
      p.address = bytes(l.max_address);
    }
    return ps;
  }
  void end() const {
    if (pos_ != s_.size()) throw InputError("message has " + std::to_string(s_.size() - pos_) + " trailing bytes");
  }

 private:
  const std::byte* take(std::size_t n) {
    if (s_.size() - pos_ < n) throw InputError("message payload truncated");
    const auto* p = s_.data() + pos_;
    pos_ += n;
    return p;
  }
  std::span<const std::byte> s_;
  std::size_t pos_ = 0;
};

}  // namespace

const char* type_name(std::uint16_t t) {
  switch (t) {
    case kHello: return "hello";
    case kProbe: return "probe";
    case kCapability: return "capability";
    case kTask: return "task";
    case kTicket: return "ticket";
    case kReady: return "ready";
    case kStart: return "start";
    case kPartial: return "partial";
    case kCurrent: return "current";
    case kResync: return "resync";
    case kDone: return "done";
    case kReject: return "reject";
  }
  return "unknown";
}

std::vector<std::byte> encode(const Task& t) {
  Out o;
  o.put(t.n_total);
  o.put(t.d);
  o.put(t.k);
  o.put(t.max_iter);
  o.put(t.tol);
  o.put(t.row_begin);
  o.put(t.rows);
  o.bytes(std::as_bytes(std::span(t.input)));
  o.put<std::uint8_t>(static_cast<std::uint8_t>((t.pull ? 1 : 0) | (t.bounds ? 2 : 0)));  // flags
  o.array(t.centroids);
  o.peers(t.peers);
  return std::move(o.b);
}

Task decode_task(std::span<const std::byte> in, const Limits& l) {
  In i(in);
  Task t;
  t.n_total = i.get<std::int64_t>();
  t.d = i.get<std::int64_t>();
  t.k = i.get<std::int64_t>();
  t.max_iter = i.get<std::int64_t>();
  t.tol = i.get<double>();
  t.row_begin = i.get<std::int64_t>();
  t.rows = i.get<std::int64_t>();
  if (t.d < 1 || t.d > l.max_d || t.k < 1 || t.k > l.max_k || t.rows < 0 || t.row_begin < 0 ||
      t.n_total < t.row_begin + t.rows || t.max_iter < 0 || !(t.tol >= 0))
    throw InputError("task with an impossible shape");
  const auto path = i.bytes(l.max_path);
  t.input.assign(reinterpret_cast<const char*>(path.data()), path.size());
  const auto flags = i.get<std::uint8_t>();
  if (flags & ~3u) throw InputError("task with unknown flags");
  t.pull = (flags & 1) != 0;
  t.bounds = (flags & 2) != 0;
  t.centroids = i.array<float>(static_cast<std::uint64_t>(t.k * t.d));
  if (static_cast<std::int64_t>(t.centroids.size()) != t.k * t.d) throw InputError("task centroids are not k x d");
  t.peers = i.peers(l);
  i.end();
  return t;
}

std::vector<std::byte> encode(const Partial& p) {
  Out o;
  o.array(p.sums);
  o.array(p.counts);
  o.put(p.inertia);
  o.put(p.rows);
  o.put<std::uint8_t>(p.has_view);
  if (p.has_view) o.view(p.view);
  o.bytes(p.reply_address);
  return std::move(o.b);
}

Partial decode_partial(std::span<const std::byte> in, std::int64_t k, std::int64_t d, const Limits& l) {
  In i(in);
  Partial p;
  p.sums = i.array<double>(static_cast<std::uint64_t>(k * d));
  p.counts = i.array<std::int64_t>(static_cast<std::uint64_t>(k));
  if (static_cast<std::int64_t>(p.sums.size()) != k * d || static_cast<std::int64_t>(p.counts.size()) != k)
    throw InputError("partial result is not k x d");
  p.inertia = i.get<double>();
  p.rows = i.get<std::int64_t>();
  p.has_view = i.get<std::uint8_t>() != 0;
  if (p.has_view) p.view = i.view(static_cast<std::uint64_t>(l.max_peers));
  p.reply_address = i.bytes(l.max_address);
  i.end();
  return p;
}

std::vector<std::byte> encode(const Current& c) {
  Out o;
  o.put(c.iteration);
  o.array(c.centroids);
  o.view(c.view);
  o.peers(c.peers);
  return std::move(o.b);
}

Current decode_current(std::span<const std::byte> in, std::int64_t k, std::int64_t d, const Limits& l) {
  In i(in);
  Current c;
  c.iteration = i.get<std::int64_t>();
  c.centroids = i.array<float>(static_cast<std::uint64_t>(k * d));
  if (c.iteration < 1 || static_cast<std::int64_t>(c.centroids.size()) != k * d)
    throw InputError("current-iteration message with a bad iteration or centroids");
  c.view = i.view(static_cast<std::uint64_t>(l.max_peers));
  c.peers = i.peers(l);
  i.end();
  return c;
}

std::vector<std::byte> encode_hello(bool resume, std::int64_t iteration, std::span<const std::byte> address) {
  Out o;
  o.put<std::uint8_t>(resume);
  o.put(iteration);
  o.bytes(address);
  return std::move(o.b);
}

void decode_hello(std::span<const std::byte> in, bool& resume, std::int64_t& iteration,
                  std::vector<std::byte>& address, const Limits& l) {
  In i(in);
  resume = i.get<std::uint8_t>() != 0;
  iteration = i.get<std::int64_t>();
  address = i.bytes(l.max_address);
  i.end();
}

std::vector<std::byte> encode_i64s(const std::vector<std::int64_t>& v) {
  Out o;
  o.array(v);
  return std::move(o.b);
}

std::vector<std::int64_t> decode_i64s(std::span<const std::byte> in, std::size_t expect) {
  In i(in);
  auto v = i.array<std::int64_t>(expect);
  if (v.size() != expect) throw InputError("message has " + std::to_string(v.size()) + " values, expected " + std::to_string(expect));
  i.end();
  return v;
}

std::vector<std::byte> encode_f64(double v) {
  Out o;
  o.put(v);
  return std::move(o.b);
}

double decode_f64(std::span<const std::byte> in) {
  In i(in);
  const double v = i.get<double>();
  i.end();
  return v;
}

}  // namespace accel::cluster
