#include "bootstrap.hpp"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/rand.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <thread>
#include <utility>

#include "accel/error.hpp"
#include "accel/transport/address.hpp"
#include "errors.hpp"

namespace accel::cluster {
namespace {

using WallClock = std::chrono::steady_clock;  // sockets wait in real time (accel::Clock may be virtual)
using Mac = std::array<std::byte, 32>;
using Nonce = std::array<std::byte, 32>;

constexpr char kMagic[8] = {'A', 'C', 'C', 'E', 'L', 'B', '1', '\0'};
constexpr std::uint32_t kMaxAddress = 65536;                 // the transport's bound on a worker address
constexpr std::chrono::milliseconds kHandshake{2000};        // per connection, on the coordinator
constexpr std::size_t kMaxPending = 512;                     // unauthenticated connections at once
constexpr std::size_t kMaxPendingPerIp = 128;                // ... from one address (loopback: every local worker)
constexpr std::size_t kRefusalLines = 10;                    // refusal lines a window
constexpr std::chrono::seconds kRefusalWindow{10};
// A worker's hello up to its address: magic, id, resume flag, nonce, address length.
constexpr std::size_t kHelloFixed = sizeof kMagic + sizeof(std::uint32_t) + 1 + 32 + sizeof(std::uint32_t);
enum Verdict : std::uint8_t { kAccepted = 0, kRefused = 1 };

// What ends a connection but may not end the next one (a stall, a reset, a
// close): the worker tries again.
struct WireError : InputError {
  using InputError::InputError;
};

// A connection's bytes with one deadline for the whole exchange; a peer
// that stalls, closes early or sends too much ends it.
class Wire {
 public:
  Wire(int fd, WallClock::time_point deadline) : fd_(fd), deadline_(deadline) {}
  void read(void* out, std::size_t n) {
    auto* p = static_cast<char*>(out);
    while (n > 0) {
      wait(POLLIN);
      const ssize_t got = ::recv(fd_, p, n, 0);
      if (got == 0) throw WireError("the peer closed the connection");
      if (got < 0) {
        if (errno == EINTR || errno == EAGAIN) continue;
        throw WireError(std::string("receive: ") + std::strerror(errno));
      }
      p += got;
      n -= static_cast<std::size_t>(got);
    }
  }
  void write(const void* in, std::size_t n) {
    const auto* p = static_cast<const char*>(in);
    while (n > 0) {
      wait(POLLOUT);
      const ssize_t put = ::send(fd_, p, n, MSG_NOSIGNAL);
      if (put < 0) {
        if (errno == EINTR || errno == EAGAIN) continue;
        throw WireError(std::string("send: ") + std::strerror(errno));
      }
      p += put;
      n -= static_cast<std::size_t>(put);
    }
  }
  template <class T>
  T get() {
    T v;
    read(&v, sizeof v);
    return v;
  }
  template <class T>
  void put(const T& v) {
    write(&v, sizeof v);
  }
  std::vector<std::byte> bytes(std::uint32_t max) {
    const auto n = get<std::uint32_t>();
    if (n == 0 || n > max) throw InputError("an address of " + std::to_string(n) + " bytes");
    std::vector<std::byte> b(n);
    read(b.data(), n);
    return b;
  }
  void bytes(const std::vector<std::byte>& b) {
    put(static_cast<std::uint32_t>(b.size()));
    write(b.data(), b.size());
  }

 private:
  void wait(short events) {
    for (;;) {
      const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline_ - WallClock::now()).count();
      if (left <= 0) throw WireError("timed out");
      pollfd p{fd_, events, 0};
      const int r = ::poll(&p, 1, static_cast<int>(left));
      if (r > 0) return;
      if (r < 0 && errno != EINTR) throw WireError(std::string("poll: ") + std::strerror(errno));
    }
  }
  int fd_;
  WallClock::time_point deadline_;
};

struct Fd {
  int fd;
  explicit Fd(int f) : fd(f) {}
  ~Fd() {
    if (fd >= 0) ::close(fd);
  }
};

Nonce random_nonce() {
  Nonce n;
  if (RAND_bytes(reinterpret_cast<unsigned char*>(n.data()), static_cast<int>(n.size())) != 1)
    throw std::runtime_error("no random bytes for the handshake");
  return n;
}

// HMAC-SHA256 keyed by the token over a label and the handshake's fields.
Mac mac(std::uint64_t token, const char* label, const Nonce& ns, const Nonce& nc, std::uint32_t id,
        std::uint8_t flag, const std::vector<std::byte>& address) {
  std::vector<unsigned char> msg(label, label + std::strlen(label) + 1);
  auto add = [&](const void* p, std::size_t n) {
    const auto* b = static_cast<const unsigned char*>(p);
    msg.insert(msg.end(), b, b + n);
  };
  add(ns.data(), ns.size());
  add(nc.data(), nc.size());
  add(&id, sizeof id);
  add(&flag, sizeof flag);
  add(address.data(), address.size());
  Mac out;
  unsigned len = 0;
  if (HMAC(EVP_sha256(), &token, sizeof token, msg.data(), msg.size(), reinterpret_cast<unsigned char*>(out.data()),
           &len) == nullptr ||
      len != out.size())
    throw std::runtime_error("HMAC-SHA256 failed");
  return out;
}

bool same(const Mac& a, const Mac& b) { return CRYPTO_memcmp(a.data(), b.data(), a.size()) == 0; }

transport::MacKey session_key(std::uint64_t token, const Nonce& ns, const Nonce& nc, std::uint32_t id) {
  const Mac m = mac(token, "key", ns, nc, id, 0, {});
  transport::MacKey k;
  std::copy(m.begin(), m.begin() + k.size(), k.begin());
  return k;
}

Ticket ticket_of(std::uint64_t token, const Nonce& ns, const Nonce& nc, std::uint32_t id) {
  const Mac m = mac(token, "ticket", ns, nc, id, 0, {});
  Ticket t;
  std::copy(m.begin(), m.begin() + t.size(), t.begin());
  return t;
}

void append(std::vector<std::byte>& out, const void* p, std::size_t n) {
  const auto* b = static_cast<const std::byte*>(p);
  out.insert(out.end(), b, b + n);
}

}  // namespace

// One unauthenticated connection, served by the event loop: the greeting
// goes out, the worker's hello comes in as its bytes arrive, and the
// verdict goes out once the hello is whole. A connection never holds the
// door: the loop serves all of them together.
struct BootServer::Conn {
  int fd = -1;
  std::string ip, from;
  std::uint64_t order = 0;         // accept order: the oldest is dropped first
  WallClock::time_point deadline;      // for the whole exchange
  Nonce ns{};
  std::vector<std::byte> in;       // the hello so far
  std::size_t need = kHelloFixed;  // its length, once the address length is known
  std::vector<std::byte> out;      // to send
  std::size_t sent = 0;
  bool answered = false;           // the verdict is queued: close once it is sent
};

BootServer::BootServer(const std::string& ip, std::uint16_t port, std::uint64_t token, std::uint32_t max_id,
                       std::vector<std::byte> address, std::uint32_t max_assigned)
    : token_(token), address_(std::move(address)), admissions_(max_id, max_assigned) {
  sockaddr_in sa = transport::ipv4_sockaddr(ip, port);
  fd_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  if (fd_ < 0) throw InputError(std::string("socket: ") + std::strerror(errno));
  const int one = 1;
  ::setsockopt(fd_, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  if (::bind(fd_, reinterpret_cast<sockaddr*>(&sa), sizeof sa) != 0 || ::listen(fd_, 256) != 0) {
    const std::string e = std::strerror(errno);
    ::close(fd_);
    throw InputError("cannot listen on " + ip + ":" + std::to_string(port) + ": " + e);
  }
  socklen_t len = sizeof sa;
  ::getsockname(fd_, reinterpret_cast<sockaddr*>(&sa), &len);
  port_ = ntohs(sa.sin_port);
  thread_ = std::thread([this] { serve(); });
}

BootServer::~BootServer() {
  {
    std::lock_guard lock(mu_);
    stop_ = true;
  }
  if (thread_.joinable()) thread_.join();
  for (auto& c : conns_) ::close(c->fd);
  ::close(fd_);
}

// The event loop: every connection at once, each bounded by kHandshake, at
// most kMaxPending of them unauthenticated (kMaxPendingPerIp from one
// address); a new one past a cap pushes the oldest out. Idle and
// byte-a-second connections then cost the door a slot each for 2 s, not
// its attention: a worker's handshake is served as soon as its bytes are
// there.
void BootServer::serve() {
  std::vector<pollfd> fds;
  for (;;) {
    {
      std::lock_guard lock(mu_);
      if (stop_) return;
    }
    fds.assign(1, pollfd{fd_, POLLIN, 0});
    auto wake = WallClock::now() + std::chrono::milliseconds(100);  // stop_ is checked this often
    for (const auto& c : conns_) {
      fds.push_back({c->fd, static_cast<short>(c->sent < c->out.size() ? POLLOUT : POLLIN), 0});
      wake = std::min(wake, c->deadline);
    }
    const auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(wake - WallClock::now()).count();
    if (::poll(fds.data(), fds.size(), static_cast<int>(std::max<std::int64_t>(ms, 0) + 1)) < 0 && errno != EINTR)
      continue;
    // Connections first (the indices of fds match conns_ until accepts).
    std::vector<bool> done(conns_.size(), false);
    for (std::size_t i = 0; i < conns_.size(); ++i) {
      if (fds[i + 1].revents != 0) done[i] = !step(*conns_[i]);
      if (!done[i] && WallClock::now() >= conns_[i]->deadline) {
        refuse(*conns_[i], "timed out");
        done[i] = true;
      }
    }
    for (std::size_t i = conns_.size(); i-- > 0;)
      if (done[i]) close_conn(i);
    if (fds[0].revents & POLLIN) accept_all();
  }
}

void BootServer::accept_all() {
  for (;;) {
    sockaddr_in peer{};
    socklen_t len = sizeof peer;
    const int c = ::accept4(fd_, reinterpret_cast<sockaddr*>(&peer), &len, SOCK_CLOEXEC | SOCK_NONBLOCK);
    if (c < 0) return;  // EAGAIN: all taken; anything else: the next poll says so again
    char ip[INET_ADDRSTRLEN] = "?";
    ::inet_ntop(AF_INET, &peer.sin_addr, ip, sizeof ip);
    auto conn = std::make_unique<Conn>();
    conn->fd = c;
    conn->ip = ip;
    conn->from = std::string(ip) + ":" + std::to_string(ntohs(peer.sin_port));
    conn->order = next_order_++;
    conn->deadline = WallClock::now() + kHandshake;
    make_room(conn->ip);
    try {
      conn->ns = random_nonce();
    } catch (const std::exception& e) {
      refuse(*conn, e.what());
      ::close(c);
      continue;
    }
    append(conn->out, kMagic, sizeof kMagic);
    append(conn->out, conn->ns.data(), conn->ns.size());
    conns_.push_back(std::move(conn));
  }
}

// Past a cap, the oldest unauthenticated connection (from this address,
// for the per-address cap) is dropped, counted as a refusal.
void BootServer::make_room(const std::string& ip) {
  auto oldest = [&](bool same_ip) {
    std::size_t best = conns_.size();
    for (std::size_t i = 0; i < conns_.size(); ++i)
      if ((!same_ip || conns_[i]->ip == ip) && (best == conns_.size() || conns_[i]->order < conns_[best]->order))
        best = i;
    return best;
  };
  const auto from_ip = static_cast<std::size_t>(
      std::count_if(conns_.begin(), conns_.end(), [&](const auto& c) { return c->ip == ip; }));
  std::size_t drop = conns_.size();
  if (from_ip >= kMaxPendingPerIp) drop = oldest(true);
  else if (conns_.size() >= kMaxPending) drop = oldest(false);
  if (drop == conns_.size()) return;
  refuse(*conns_[drop], "dropped: the oldest of too many unauthenticated connections");
  close_conn(drop);
}

void BootServer::close_conn(std::size_t i) {
  ::close(conns_[i]->fd);
  conns_.erase(conns_.begin() + static_cast<std::ptrdiff_t>(i));
}

// Moves one connection's bytes; false when it is over (answered and sent,
// refused, or gone).
bool BootServer::step(Conn& c) {
  while (c.sent < c.out.size()) {
    const ssize_t put = ::send(c.fd, c.out.data() + c.sent, c.out.size() - c.sent, MSG_NOSIGNAL);
    if (put < 0) {
      if (errno == EAGAIN || errno == EINTR) return true;
      refuse(c, std::string("send: ") + std::strerror(errno));
      return false;
    }
    c.sent += static_cast<std::size_t>(put);
  }
  if (c.answered) return false;
  while (c.in.size() < c.need) {
    std::byte buf[4096];
    const ssize_t got = ::recv(c.fd, buf, std::min(sizeof buf, c.need - c.in.size()), 0);
    if (got == 0) {
      refuse(c, "the peer closed the connection");
      return false;
    }
    if (got < 0) {
      if (errno == EAGAIN || errno == EINTR) return true;
      refuse(c, std::string("receive: ") + std::strerror(errno));
      return false;
    }
    c.in.insert(c.in.end(), buf, buf + got);
    if (c.in.size() == kHelloFixed && c.need == kHelloFixed) {
      if (std::memcmp(c.in.data(), kMagic, sizeof kMagic) != 0) {
        refuse(c, "not an accel worker");
        return false;
      }
      std::uint32_t n = 0;
      std::memcpy(&n, c.in.data() + kHelloFixed - sizeof n, sizeof n);
      if (n == 0 || n > kMaxAddress) {
        refuse(c, "an address of " + std::to_string(n) + " bytes");
        return false;
      }
      c.need = kHelloFixed + n + sizeof(Mac);
    }
  }
  answer(c);
  return step(c);  // send what it can now
}

// The hello is whole: check it and queue the verdict.
void BootServer::answer(Conn& c) {
  const std::byte* p = c.in.data() + sizeof kMagic;
  std::uint32_t id = 0;
  std::uint8_t flag = 0;
  Nonce nc;
  std::memcpy(&id, p, sizeof id);
  std::memcpy(&flag, p + sizeof id, sizeof flag);
  std::memcpy(nc.data(), p + sizeof id + sizeof flag, nc.size());
  const std::vector<std::byte> address(c.in.begin() + kHelloFixed, c.in.end() - sizeof(Mac));
  Mac theirs;
  std::memcpy(theirs.data(), c.in.data() + c.in.size() - sizeof(Mac), theirs.size());
  c.answered = true;
  const std::uint8_t refused = kRefused;
  if (!same(theirs, mac(token_, "client", c.ns, nc, id, flag, address))) {
    append(c.out, &refused, 1);
    refuse(c, "wrong job token (id " + std::to_string(id) + ")");
    return;
  }
  std::unique_lock lock(mu_);
  const std::uint32_t given = flag > 1 ? 0 : admissions_.id_for(id, flag == 1);
  if (given == 0) {
    const std::uint32_t capacity = admissions_.capacity();
    lock.unlock();
    append(c.out, &refused, 1);
    refuse(c, id == 0 ? "a worker without an id, and the job is full (--max-workers " + std::to_string(capacity) + ")"
                      : "unknown worker id " + std::to_string(id));
    return;
  }
  id = given;
  const std::uint8_t accepted = kAccepted;
  append(c.out, &accepted, 1);
  append(c.out, &id, sizeof id);
  const auto n = static_cast<std::uint32_t>(address_.size());
  append(c.out, &n, sizeof n);
  append(c.out, address_.data(), address_.size());
  const Mac ours = mac(token_, "server", c.ns, nc, id, flag, address_);
  append(c.out, ours.data(), ours.size());
  admissions_.record(id, {address, ticket_of(token_, c.ns, nc, id), flag == 1, session_key(token_, c.ns, nc, id)});
}

// Every refusal is counted; the lines are bounded to kRefusalLines a
// kRefusalWindow, the rest summed up in one line when the window ends: a
// flood of bad handshakes must not flood the log as well.
void BootServer::refuse(const Conn& c, const std::string& why) {
  std::lock_guard lock(mu_);
  ++refused_total_;
  roll_window();
  if (window_lines_ < kRefusalLines) {
    ++window_lines_;
    refusals_.push_back("refused a connection from " + c.from + ": " + why);
  } else {
    ++window_suppressed_;
  }
}

// Under mu_.
void BootServer::roll_window() {
  const auto now = WallClock::now();
  if (now - window_start_ < kRefusalWindow) return;
  if (window_suppressed_ > 0)
    refusals_.push_back("refused " + std::to_string(window_suppressed_) + " more connections in " +
                        std::to_string(std::chrono::duration_cast<std::chrono::seconds>(now - window_start_).count()) +
                        " s (" + std::to_string(refused_total_) + " since the start)");
  window_start_ = now;
  window_lines_ = 0;
  window_suppressed_ = 0;
}

std::uint64_t BootServer::refused() const {
  std::lock_guard lock(mu_);
  return refused_total_;
}

std::optional<transport::MacKey> BootServer::key_of(std::uint32_t id) const {
  std::lock_guard lock(mu_);
  return admissions_.key_of(id);
}

JobSecret random_job_secret() {
  JobSecret s;
  if (RAND_bytes(reinterpret_cast<unsigned char*>(s.data()), static_cast<int>(s.size())) != 1)
    throw std::runtime_error("no random bytes for the job's secret");
  return s;
}

transport::MacKey pair_key(const JobSecret& secret, std::uint32_t a, std::uint32_t b) {
  const std::uint32_t ids[2] = {std::min(a, b), std::max(a, b)};
  unsigned char msg[5 + sizeof ids] = {'p', 'a', 'i', 'r', 0};
  std::memcpy(msg + 5, ids, sizeof ids);
  unsigned char out[32];
  unsigned len = 0;
  if (HMAC(EVP_sha256(), secret.data(), static_cast<int>(secret.size()), msg, sizeof msg, out, &len) == nullptr ||
      len != sizeof out)
    throw std::runtime_error("HMAC-SHA256 failed");
  transport::MacKey k;
  std::memcpy(k.data(), out, k.size());
  return k;
}

std::optional<Admission> BootServer::admit(std::uint32_t id, const Ticket& ticket) {
  std::lock_guard lock(mu_);
  return admissions_.take(id, ticket);
}

std::optional<std::vector<std::byte>> BootServer::address_of(std::uint32_t id) const {
  std::lock_guard lock(mu_);
  return admissions_.address_of(id);
}

std::uint32_t Admissions::id_for(std::uint32_t id, bool resume) {
  if (id == 0 && !resume && last_assigned_ < max_assigned_) return ++last_assigned_;  // elastic: a fresh id
  return id >= 1 && id <= std::max(max_id_, last_assigned_) ? id : 0;
}

void Admissions::record(std::uint32_t id, Admission a) {
  addresses_[id] = a.address;
  keys_[id] = a.key;
  admitted_[id] = std::move(a);
}

std::optional<Admission> Admissions::take(std::uint32_t id, const Ticket& ticket) {
  auto it = admitted_.find(id);
  if (it == admitted_.end() || it->second.ticket != ticket) return std::nullopt;
  Admission a = std::move(it->second);
  admitted_.erase(it);
  return a;
}

std::optional<std::vector<std::byte>> Admissions::address_of(std::uint32_t id) const {
  auto it = addresses_.find(id);
  if (it == addresses_.end()) return std::nullopt;
  return it->second;
}

std::optional<transport::MacKey> Admissions::key_of(std::uint32_t id) const {
  auto it = keys_.find(id);
  if (it == keys_.end()) return std::nullopt;
  return it->second;
}

std::vector<std::string> BootServer::refusals() {
  std::lock_guard lock(mu_);
  roll_window();
  return std::exchange(refusals_, {});
}

namespace {

// One handshake, bounded by `deadline`.
BootReply boot_attempt(const std::string& ip, std::uint16_t port, std::uint64_t token, std::uint32_t id, bool resume,
                       const std::vector<std::byte>& address, WallClock::time_point deadline) {
  sockaddr_in sa = transport::ipv4_sockaddr(ip, port);
  Fd conn(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
  if (conn.fd < 0) throw InputError(std::string("socket: ") + std::strerror(errno));
  if (::connect(conn.fd, reinterpret_cast<sockaddr*>(&sa), sizeof sa) != 0) {
    if (errno == ECONNREFUSED || errno == ENETUNREACH || errno == EHOSTUNREACH)
      throw NotListening("nothing listens at " + ip + ":" + std::to_string(port));
    throw WireError(std::string("cannot connect: ") + std::strerror(errno));
  }
  const int one = 1;
  ::setsockopt(conn.fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  Wire w(conn.fd, deadline);
  char magic[sizeof kMagic];
  w.read(magic, sizeof magic);
  if (std::memcmp(magic, kMagic, sizeof kMagic) != 0)
    throw InputError("worker " + std::to_string(id) + ": " + ip + ":" + std::to_string(port) +
                     " is not an accel coordinator");
  Nonce ns;
  w.read(ns.data(), ns.size());
  const Nonce nc = random_nonce();
  const std::uint8_t flag = resume ? 1 : 0;
  w.write(kMagic, sizeof kMagic);
  w.put(id);
  w.put(flag);
  w.write(nc.data(), nc.size());
  w.bytes(address);
  const Mac ours = mac(token, "client", ns, nc, id, flag, address);
  w.write(ours.data(), ours.size());
  if (w.get<std::uint8_t>() != kAccepted)
    throw TokenRefused((id == 0 ? std::string("a worker without --id") : "worker " + std::to_string(id)) +
                       ": the coordinator at " + ip + ":" + std::to_string(port) +
                       " refused it: a different job token, an id it does not know, or a job with no room for "
                       "another worker (--max-workers)");
  BootReply reply;
  reply.id = w.get<std::uint32_t>();
  reply.address = w.bytes(kMaxAddress);
  Mac theirs;
  w.read(theirs.data(), theirs.size());
  // The MAC covers the id given, so a man in the middle cannot change it.
  if (!same(theirs, mac(token, "server", ns, nc, reply.id, flag, reply.address)) || reply.id == 0 ||
      (id != 0 && reply.id != id))
    throw InputError("worker " + std::to_string(id) + ": the coordinator at " + ip + ":" + std::to_string(port) +
                     " does not hold this job's token");
  reply.ticket = ticket_of(token, ns, nc, reply.id);
  reply.key = session_key(token, ns, nc, reply.id);
  return reply;
}

}  // namespace

// Attempts of at most 3 s, 50 ms apart and then twice as far apart each
// time up to 1 s, until `timeout`: a door busy with other connections (or
// one that dropped this one to make room) gets another try.
namespace {
thread_local BootNetwork* boot_network = nullptr;
}

void set_boot_network(BootNetwork* network) { boot_network = network; }

std::unique_ptr<FrontDoor> open_front_door(const std::string& ip, std::uint16_t port, std::uint64_t token,
                                           std::uint32_t max_id, std::vector<std::byte> address,
                                           std::uint32_t max_assigned) {
  if (boot_network) return boot_network->open(ip, port, token, max_id, std::move(address), max_assigned);
  return std::make_unique<BootServer>(ip, port, token, max_id, std::move(address), max_assigned);
}

BootReply boot_connect(const std::string& ip, std::uint16_t port, std::uint64_t token, std::uint32_t id, bool resume,
                       const std::vector<std::byte>& address, std::chrono::milliseconds timeout) {
  if (boot_network) return boot_network->connect(ip, port, token, id, resume, address, timeout);
  const auto until = WallClock::now() + timeout;
  auto pause = std::chrono::milliseconds(50);
  for (int attempt = 1;; ++attempt) {
    try {
      return boot_attempt(ip, port, token, id, resume, address, std::min(until, WallClock::now() + std::chrono::seconds(3)));
    } catch (const WireError& e) {
      if (WallClock::now() + pause >= until)
        throw InputError("worker " + std::to_string(id) + ": no handshake with the coordinator at " + ip + ":" +
                         std::to_string(port) + " in " + std::to_string(timeout.count()) + " ms (" +
                         std::to_string(attempt) + " attempts; the last: " + e.what() + ")");
    }
    std::this_thread::sleep_for(pause);
    pause = std::min(pause * 2, std::chrono::milliseconds(1000));
  }
}

std::uint32_t boot_assign_id(const std::string& ip, std::uint16_t port, std::uint64_t token,
                             std::chrono::milliseconds timeout) {
  // No UCX address yet (the worker's transport is made for its id): one
  // byte stands in; the worker's own handshake with the id follows.
  return boot_connect(ip, port, token, 0, false, {std::byte{0}}, timeout).id;
}

}  // namespace accel::cluster
