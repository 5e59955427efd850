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
#include <utility>

#include "accel/error.hpp"
#include "accel/transport/address.hpp"
#include "errors.hpp"

namespace accel::cluster {
namespace {

using Clock = std::chrono::steady_clock;
using Mac = std::array<std::byte, 32>;
using Nonce = std::array<std::byte, 32>;

constexpr char kMagic[8] = {'A', 'C', 'C', 'E', 'L', 'B', '1', '\0'};
constexpr std::uint32_t kMaxAddress = 65536;                 // the transport's bound on a worker address
constexpr std::chrono::milliseconds kHandshake{2000};        // per connection, on the coordinator
enum Verdict : std::uint8_t { kAccepted = 0, kRefused = 1 };

// A connection's bytes with one deadline for the whole exchange; a peer
// that stalls, closes early or sends too much ends it.
class Wire {
 public:
  Wire(int fd, Clock::time_point deadline) : fd_(fd), deadline_(deadline) {}
  void read(void* out, std::size_t n) {
    auto* p = static_cast<char*>(out);
    while (n > 0) {
      wait(POLLIN);
      const ssize_t got = ::recv(fd_, p, n, 0);
      if (got == 0) throw InputError("the peer closed the connection");
      if (got < 0) {
        if (errno == EINTR || errno == EAGAIN) continue;
        throw InputError(std::string("receive: ") + std::strerror(errno));
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
        throw InputError(std::string("send: ") + std::strerror(errno));
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
      const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline_ - Clock::now()).count();
      if (left <= 0) throw InputError("timed out");
      pollfd p{fd_, events, 0};
      const int r = ::poll(&p, 1, static_cast<int>(left));
      if (r > 0) return;
      if (r < 0 && errno != EINTR) throw InputError(std::string("poll: ") + std::strerror(errno));
    }
  }
  int fd_;
  Clock::time_point deadline_;
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

}  // namespace

BootServer::BootServer(const std::string& ip, std::uint16_t port, std::uint64_t token, std::uint32_t max_id,
                       std::vector<std::byte> address)
    : token_(token), max_id_(max_id), address_(std::move(address)) {
  sockaddr_in sa = transport::ipv4_sockaddr(ip, port);
  fd_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd_ < 0) throw InputError(std::string("socket: ") + std::strerror(errno));
  const int one = 1;
  ::setsockopt(fd_, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  if (::bind(fd_, reinterpret_cast<sockaddr*>(&sa), sizeof sa) != 0 || ::listen(fd_, 64) != 0) {
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
  ::close(fd_);
}

// One connection at a time, each bounded by kHandshake: a client that
// stalls holds the door for 2 s at most.
void BootServer::serve() {
  for (;;) {
    {
      std::lock_guard lock(mu_);
      if (stop_) return;
    }
    pollfd p{fd_, POLLIN, 0};
    if (::poll(&p, 1, 100) <= 0) continue;
    sockaddr_in peer{};
    socklen_t len = sizeof peer;
    const int c = ::accept4(fd_, reinterpret_cast<sockaddr*>(&peer), &len, SOCK_CLOEXEC);
    if (c < 0) continue;
    Fd conn(c);
    char ip[INET_ADDRSTRLEN] = "?";
    ::inet_ntop(AF_INET, &peer.sin_addr, ip, sizeof ip);
    const std::string from = std::string(ip) + ":" + std::to_string(ntohs(peer.sin_port));
    try {
      handshake(c);
    } catch (const std::exception& e) {
      std::lock_guard lock(mu_);
      if (refusals_.size() < 64) refusals_.push_back("refused a connection from " + from + ": " + e.what());
    }
  }
}

void BootServer::handshake(int fd) {
  Wire w(fd, Clock::now() + kHandshake);
  const Nonce ns = random_nonce();
  w.write(kMagic, sizeof kMagic);
  w.write(ns.data(), ns.size());
  char magic[sizeof kMagic];
  w.read(magic, sizeof magic);
  if (std::memcmp(magic, kMagic, sizeof kMagic) != 0) throw InputError("not an accel worker");
  const auto id = w.get<std::uint32_t>();
  const auto flag = w.get<std::uint8_t>();
  Nonce nc;
  w.read(nc.data(), nc.size());
  const std::vector<std::byte> address = w.bytes(kMaxAddress);
  Mac theirs;
  w.read(theirs.data(), theirs.size());
  if (!same(theirs, mac(token_, "client", ns, nc, id, flag, address))) {
    w.put(static_cast<std::uint8_t>(kRefused));
    throw InputError("wrong job token (id " + std::to_string(id) + ")");
  }
  if (id < 1 || id > max_id_ || flag > 1) {
    w.put(static_cast<std::uint8_t>(kRefused));
    throw InputError("unknown worker id " + std::to_string(id));
  }
  w.put(static_cast<std::uint8_t>(kAccepted));
  w.bytes(address_);
  const Mac ours = mac(token_, "server", ns, nc, id, flag, address_);
  w.write(ours.data(), ours.size());
  std::lock_guard lock(mu_);
  admitted_[id] = {address, ticket_of(token_, ns, nc, id), flag == 1, session_key(token_, ns, nc, id)};
  addresses_[id] = address;
  keys_[id] = session_key(token_, ns, nc, id);
}

std::optional<transport::MacKey> BootServer::key_of(std::uint32_t id) const {
  std::lock_guard lock(mu_);
  auto it = keys_.find(id);
  if (it == keys_.end()) return std::nullopt;
  return it->second;
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
  auto it = admitted_.find(id);
  if (it == admitted_.end() || it->second.ticket != ticket) return std::nullopt;
  Admission a = std::move(it->second);
  admitted_.erase(it);
  return a;
}

std::optional<std::vector<std::byte>> BootServer::address_of(std::uint32_t id) const {
  std::lock_guard lock(mu_);
  auto it = addresses_.find(id);
  if (it == addresses_.end()) return std::nullopt;
  return it->second;
}

std::vector<std::string> BootServer::refusals() {
  std::lock_guard lock(mu_);
  return std::exchange(refusals_, {});
}

BootReply boot_connect(const std::string& ip, std::uint16_t port, std::uint64_t token, std::uint32_t id, bool resume,
                       const std::vector<std::byte>& address, std::chrono::milliseconds timeout) {
  sockaddr_in sa = transport::ipv4_sockaddr(ip, port);
  Fd conn(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
  if (conn.fd < 0) throw InputError(std::string("socket: ") + std::strerror(errno));
  if (::connect(conn.fd, reinterpret_cast<sockaddr*>(&sa), sizeof sa) != 0) {
    if (errno == ECONNREFUSED || errno == ENETUNREACH || errno == EHOSTUNREACH)
      throw NotListening("nothing listens at " + ip + ":" + std::to_string(port));
    throw InputError("cannot reach " + ip + ":" + std::to_string(port) + ": " + std::strerror(errno));
  }
  const int one = 1;
  ::setsockopt(conn.fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  Wire w(conn.fd, Clock::now() + timeout);
  char magic[sizeof kMagic];
  w.read(magic, sizeof magic);
  if (std::memcmp(magic, kMagic, sizeof kMagic) != 0)
    throw InputError(ip + ":" + std::to_string(port) + " is not an accel coordinator");
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
    throw TokenRefused("the coordinator refused this worker: a different job token, or an id it does not know");
  BootReply reply;
  reply.address = w.bytes(kMaxAddress);
  Mac theirs;
  w.read(theirs.data(), theirs.size());
  if (!same(theirs, mac(token, "server", ns, nc, id, flag, reply.address)))
    throw InputError("the coordinator at " + ip + ":" + std::to_string(port) + " does not hold this job's token");
  reply.ticket = ticket_of(token, ns, nc, id);
  reply.key = session_key(token, ns, nc, id);
  return reply;
}

}  // namespace accel::cluster
