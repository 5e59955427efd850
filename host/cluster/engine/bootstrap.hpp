// The cluster's front door: a worker proves it holds the job token over a
// plain TCP connection before it learns the coordinator's UCX address, and
// the coordinator runs no UCX listener at all.
//
// Why: UCX's sockaddr listener parses unauthenticated bytes itself, and
// 1.13's aborts the whole process on a 9-byte packet (tcp_sockcm_ep.c:825).
// Here the listener is this project's socket: bounded reads, a deadline per
// connection, nothing kept before the handshake checks out. As MPI
// launchers and NCCL bootstrap, it exchanges UCX worker addresses, and
// endpoints are then created from those addresses.
//
// The handshake is a mutual challenge-response with HMAC-SHA256 keyed by the
// job token, so the token itself never crosses the wire:
//   coordinator -> worker  magic, 32-byte nonce Ns
//   worker -> coordinator  magic, id, resume flag, nonce Nc, its UCX address,
//                          HMAC(token, "client" Ns Nc id flag address)
//   coordinator -> worker  verdict; when accepted: its UCX address,
//                          HMAC(token, "server" Ns Nc id address)
// Both sides then derive a ticket, HMAC(token, "ticket" Ns Nc id), that the
// worker's UCX hello must carry: the coordinator admits a hello only for an
// id that authenticated here, from the address it authenticated with. They
// also derive a key, HMAC(token, "key" Ns Nc id), that never crosses the
// wire: every control message between the two is sealed with it
// (message_mac.hpp), so the sender's id is bound to this handshake rather
// than read from a header. Messages between two workers i and j are sealed
// with pair_key(S, i, j), S a secret the coordinator draws and never sends;
// it hands each admitted worker the keys of its own pairs (Task, Current).
#pragma once

#include <array>
#include <chrono>
#include <cstdint>
#include <algorithm>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "accel/transport/message_mac.hpp"

namespace accel::cluster {

using Ticket = std::array<std::byte, 16>;

// What a worker that passed the handshake may present in its UCX hello.
struct Admission {
  std::vector<std::byte> address;  // its UCX worker address
  Ticket ticket{};
  bool resume = false;
  transport::MacKey key{};  // seals the control messages between it and the coordinator
};

// The coordinator's secret for the workers' pair keys.
using JobSecret = std::array<std::byte, 32>;
JobSecret random_job_secret();
// The key of workers a and b (either order): HMAC(secret, "pair" min max).
transport::MacKey pair_key(const JobSecret& secret, std::uint32_t a, std::uint32_t b);

// Who passed the front door's handshake: the ids it gave, and each one's
// latest admission, address and key. Both doors (TCP and simulated) keep
// one; it takes no lock (BootServer holds its own around it).
class Admissions {
 public:
  Admissions(std::uint32_t max_id, std::uint32_t max_assigned)
      : max_id_(max_id), max_assigned_(max_assigned), last_assigned_(max_id) {}
  // The id a hello asking for `id` gets: `id` itself when it is a worker's,
  // or, asked with 0 by a worker that does not resume, the next id above
  // the launch's up to max_assigned (elastic membership); 0: refused.
  std::uint32_t id_for(std::uint32_t id, bool resume);
  // The most ids this door gives.
  std::uint32_t capacity() const { return std::max(max_id_, max_assigned_); }
  void record(std::uint32_t id, Admission a);
  // The latest admission of `id` when its ticket is `ticket`, consumed.
  std::optional<Admission> take(std::uint32_t id, const Ticket& ticket);
  std::optional<std::vector<std::byte>> address_of(std::uint32_t id) const;
  std::optional<transport::MacKey> key_of(std::uint32_t id) const;

 private:
  std::uint32_t max_id_, max_assigned_, last_assigned_;
  std::map<std::uint32_t, Admission> admitted_;
  std::map<std::uint32_t, std::vector<std::byte>> addresses_;
  std::map<std::uint32_t, transport::MacKey> keys_;
};

// The coordinator's front door, as it uses it: BootServer over TCP, or a
// simulated world's (sim/, through set_boot_network).
class FrontDoor {
 public:
  virtual ~FrontDoor() = default;
  virtual std::uint16_t port() const = 0;
  // The latest admission of `id` when its ticket is `ticket`, consumed (a
  // hello is accepted once per handshake).
  virtual std::optional<Admission> admit(std::uint32_t id, const Ticket& ticket) = 0;
  // The address `id` last authenticated with (a resuming worker asks for
  // its rows before its hello).
  virtual std::optional<std::vector<std::byte>> address_of(std::uint32_t id) const = 0;
  // The key of the handshake `id` last passed.
  virtual std::optional<transport::MacKey> key_of(std::uint32_t id) const = 0;
  // Lines about refused connections since the last call (the coordinator
  // prints them from its own thread).
  virtual std::vector<std::string> refusals() = 0;
  // Connections refused or dropped since the start.
  virtual std::uint64_t refused() const = 0;
};

class BootServer final : public FrontDoor {
 public:
  // Listens on ip:port (0: any free port) for workers 1..max_id; answers
  // with `address` (this process's UCX worker address). A worker that asks
  // with id 0 (elastic membership: started without --id) is given the next
  // id above max_id, up to max_assigned, and may come back with it.
  BootServer(const std::string& ip, std::uint16_t port, std::uint64_t token, std::uint32_t max_id,
             std::vector<std::byte> address, std::uint32_t max_assigned = 0);
  ~BootServer() override;
  BootServer(const BootServer&) = delete;
  BootServer& operator=(const BootServer&) = delete;

  std::uint16_t port() const override { return port_; }
  std::optional<Admission> admit(std::uint32_t id, const Ticket& ticket) override;
  std::optional<std::vector<std::byte>> address_of(std::uint32_t id) const override;
  std::optional<transport::MacKey> key_of(std::uint32_t id) const override;
  // One line a refusal, at most 10 in 10 s, then one line counting the rest.
  std::vector<std::string> refusals() override;
  std::uint64_t refused() const override;

 private:
  struct Conn;
  void serve();
  void accept_all();
  void make_room(const std::string& ip);
  void close_conn(std::size_t i);
  bool step(Conn& c);
  void answer(Conn& c);
  void refuse(const Conn& c, const std::string& why);
  void roll_window();

  std::uint64_t token_;
  std::vector<std::byte> address_;
  int fd_ = -1;
  std::uint16_t port_ = 0;
  mutable std::mutex mu_;
  Admissions admissions_;
  std::vector<std::string> refusals_;
  std::uint64_t refused_total_ = 0;
  std::chrono::steady_clock::time_point window_start_ = std::chrono::steady_clock::now();
  std::size_t window_lines_ = 0;
  std::uint64_t window_suppressed_ = 0;
  bool stop_ = false;
  // The event loop's own (its thread only).
  std::vector<std::unique_ptr<Conn>> conns_;
  std::uint64_t next_order_ = 0;
  std::thread thread_;
};

// The worker's side: the coordinator's UCX address and this session's
// ticket. Throws NotListening when nothing accepts at ip:port, TokenRefused
// when the coordinator refuses the token or id, InputError on a coordinator
// that fails to prove it holds the token (or a broken exchange).
struct BootReply {
  std::uint32_t id = 0;  // the id asked for, or the one the coordinator gave (asked with 0)
  std::vector<std::byte> address;
  Ticket ticket{};
  transport::MacKey key{};
};
BootReply boot_connect(const std::string& ip, std::uint16_t port, std::uint64_t token, std::uint32_t id, bool resume,
                       const std::vector<std::byte>& address, std::chrono::milliseconds timeout);
// An id for a worker started without one: a handshake with id 0, which the
// coordinator answers with a fresh id (TokenRefused when the job is full).
std::uint32_t boot_assign_id(const std::string& ip, std::uint16_t port, std::uint64_t token,
                             std::chrono::milliseconds timeout);

// The front doors of a simulated world: open_front_door and boot_connect
// go through it on a thread that set one (one thread per simulated
// process); null: TCP again.
class BootNetwork {
 public:
  virtual ~BootNetwork() = default;
  virtual std::unique_ptr<FrontDoor> open(const std::string& ip, std::uint16_t port, std::uint64_t token,
                                          std::uint32_t max_id, std::vector<std::byte> address,
                                          std::uint32_t max_assigned) = 0;
  virtual BootReply connect(const std::string& ip, std::uint16_t port, std::uint64_t token, std::uint32_t id,
                            bool resume, const std::vector<std::byte>& address, std::chrono::milliseconds timeout) = 0;
};
void set_boot_network(BootNetwork* network);

// A BootServer, or the simulated world's door (same arguments).
std::unique_ptr<FrontDoor> open_front_door(const std::string& ip, std::uint16_t port, std::uint64_t token,
                                           std::uint32_t max_id, std::vector<std::byte> address,
                                           std::uint32_t max_assigned = 0);

}  // namespace accel::cluster
