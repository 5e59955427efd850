// The transport interface the cluster engine talks through: endpoints to
// peers (by listener address or by a worker address relayed out of band),
// framed control messages, and bulk transfers into buffers the receiver
// prepared. UcxTransport (ucx_transport.hpp) is the one that ships; a
// simulator gives the engine another, which is the whole seam between the
// engine and the network.
//
// Threading: a Transport is used by one thread. Nothing happens in the
// background: every send, receive and error is advanced by progress() (or the
// waiting calls, which call it), and no callback ever calls progress itself.
//
// Errors: a failed peer (dead process, broken connection, keepalive timeout)
// turns into an error string on the affected endpoint and on every operation
// that involved it; nothing blocks without a timeout. Bytes from the network
// are validated; anything malformed is logged and dropped.
#pragma once

#include <array>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "accel/transport/bulk_wire.hpp"
#include "accel/transport/control_message.hpp"

namespace accel::transport {

using EndpointId = std::uint64_t;
inline constexpr EndpointId kNoEndpoint = 0;

struct Options {
  std::uint64_t job_token = 0;     // every control message must carry it
  std::uint32_t self_id = 0;       // our sender id in control messages
  std::uint32_t incarnation = 0;   // our incarnation in control messages
  // UCX_TLS for this context ("tcp", "posix,cma,self", "sm", ...). Empty: the
  // environment's UCX_TLS or UCX's default.
  std::string tls;
  // UCX_KEEPALIVE_INTERVAL: how soon an idle dead peer is noticed (UCX default 20 s).
  std::optional<std::chrono::milliseconds> keepalive_interval;
  // UCP_ERR_HANDLING_MODE_PEER: every request to a dead peer completes with
  // an error. UCX 1.13 offers it only on transports with peer-failure support
  // (tcp, rdma, cma for RMA), so with it on, processes of one host talk over
  // tcp loopback: posix/sysv shared memory has no peer-failure handler (UCX
  // says "no active messages transport ... no peer failure handler"). Turn it
  // off to use shared memory; a dead peer is then only noticed by our
  // timeouts (every wait here is bounded) and its requests never complete.
  bool peer_failure_detection = true;
  // UCP_FEATURE_WAKEUP: an idle progress_until() sleeps on the worker's
  // event fd (ucp_worker_arm + poll) and wakes when a message arrives,
  // instead of polling every 50 us. Worth it when processes outnumber cores
  // (a barrier waits on peers that need the CPU); transports without event
  // support are then not selected, so it is off by default.
  bool wakeup = false;
  // Any other UCP configuration (name without the UCX_ prefix, value).
  std::vector<std::pair<std::string, std::string>> ucx_config;
  std::uint32_t max_control_payload = kDefaultMaxControlPayload;
  std::size_t max_queued_messages = 4096;   // received, not yet taken; more are dropped
  std::size_t max_endpoints = 1024;         // further connection requests are rejected
  // Bulk push: block size ([Antimatroid]'s 64 MiB); blocks in flight at once are
  // bounded by both a count and bytes (small blocks need a deeper pipeline:
  // with few of them in flight the link idles between blocks).
  std::size_t block_bytes = 64u << 20;
  std::size_t max_blocks_in_flight = 64;
  std::size_t max_bytes_in_flight = 256u << 20;
  BulkProtocol protocol = BulkProtocol::Auto;
  // How long the destructor waits for pending sends, then for flushes of the
  // endpoints, before it force-closes them (each step bounded by this).
  std::chrono::milliseconds shutdown_timeout{2000};
};

// State of an asynchronous operation, updated by progress().
struct Completion {
  bool done = false;
  std::string error;                            // empty when it succeeded
  BulkProtocol protocol = BulkProtocol::Auto;   // bulk transfers: the protocol used
  bool ok() const { return done && error.empty(); }
};
using CompletionRef = std::shared_ptr<const Completion>;

struct Received {
  // The endpoint it arrived on when this Transport created that endpoint
  // (connect or accept). A peer that connected by our worker address has no
  // endpoint of ours behind it: kNoEndpoint; identify it by header.sender.
  EndpointId from = kNoEndpoint;
  ControlMessage message;         // validated: job token, version, lengths
};

// What expect() prepared: send `ticket` to the pushing side (inside a control
// message); `completion` finishes when all bytes are in place.
struct BulkReceiveHandle {
  std::uint64_t transfer_id = 0;
  std::vector<std::byte> ticket;
  CompletionRef completion;
};

struct Stats {
  std::uint64_t messages_received = 0;
  std::uint64_t messages_dropped = 0;   // malformed, wrong token, oversized, queue full
  std::uint64_t blocks_rejected = 0;    // bulk blocks that matched no expected transfer
  std::uint64_t connections_rejected = 0;
};

// Diagnostics (drops, refused connections) go to accel/log.hpp's sink as
// warnings from "accel transport".

class Transport {
 public:
  Transport() = default;
  virtual ~Transport() = default;
  Transport(const Transport&) = delete;
  Transport& operator=(const Transport&) = delete;

  virtual const Options& options() const = 0;

  // --- endpoints ---------------------------------------------------------
  // This worker's address, to relay out of band (launcher, file, another
  // endpoint). Only connect to addresses from a channel you trust: UCX parses
  // them; we only bound their length.
  virtual std::vector<std::byte> worker_address() const = 0;
  virtual EndpointId connect(std::span<const std::byte> worker_address) = 0;
  // Listens on ip:port (port 0: an ephemeral one); returns the bound port.
  // UCX 1.13 builds listener connections over network transports only (tcp,
  // rdma), never shared memory, so UCX_TLS must include one (e.g. "sm,tcp").
  // For shared memory between processes of a host, relay worker addresses
  // (over a listener endpoint, a file, the launcher) and connect by address.
  virtual std::uint16_t listen(const std::string& ip, std::uint16_t port) = 0;
  virtual EndpointId connect(const std::string& ip, std::uint16_t port) = 0;
  // Endpoints created for incoming connections since the last call.
  virtual std::vector<EndpointId> take_accepted() = 0;
  virtual bool alive(EndpointId ep) const = 0;
  virtual std::string endpoint_error(EndpointId ep) const = 0;  // empty while alive
  // Closes (flushing what was sent) without waiting; the id stays known, not alive.
  virtual void disconnect(EndpointId ep) = 0;
  // The lanes UCX chose (ucp_ep_print_info), for logs and protocol choice.
  virtual std::string describe(EndpointId ep) const = 0;

  // --- progress ------------------------------------------------------------
  // One round: ucp_worker_progress, then our own queues. Returns events handled.
  virtual unsigned progress() = 0;
  // Progresses until pred() or the timeout; returns pred().
  virtual bool progress_until(const std::function<bool()>& pred, std::chrono::milliseconds timeout) = 0;
  bool wait(const CompletionRef& c, std::chrono::milliseconds timeout) {
    return progress_until([&] { return c->done; }, timeout);
  }

  // --- control messages ----------------------------------------------------
  // Sends an eager active message framed with our job token, id and
  // incarnation, sealed with `key` when given (message_mac.hpp). Throws
  // std::invalid_argument for an internal type or an oversized payload; a
  // dead endpoint gives a failed completion.
  virtual CompletionRef send(EndpointId ep, std::uint16_t type, std::uint64_t iteration,
                             std::span<const std::byte> payload, const std::array<std::byte, 16>* key = nullptr) = 0;
  virtual std::optional<Received> poll() = 0;
  // The next message within `timeout`; nothing when none came, or as soon
  // as a peer failure closed an endpoint meanwhile (check alive()).
  virtual std::optional<Received> receive(std::chrono::milliseconds timeout) = 0;

  // --- bulk transfers ------------------------------------------------------
  // Memory that UCX allocates and registers (ucp_mem_map with ALLOCATE).
  // Peers on this host can map it (posix shared memory), so a put into it
  // is one memcpy by the sender instead of a slower cross-process copy
  // through the kernel (cma). expect() into it reuses the registration.
  // Valid until deallocate() or ~Transport.
  virtual void* allocate(std::size_t bytes, MemoryType memory = MemoryType::Host) = 0;
  virtual void deallocate(void* p) = 0;

  // Receiver side: prepares `bytes` at dst (host or CUDA memory) for one
  // transfer. It registers the memory for put and accepts rendezvous blocks,
  // so the sender may use either protocol. If `from` is given, a failure of
  // that endpoint fails the transfer (it is not used to match the sender: the
  // random 64-bit transfer id and the job token do that).
  virtual BulkReceiveHandle expect(void* dst, std::size_t bytes, MemoryType memory = MemoryType::Host,
                                   EndpointId from = kNoEndpoint) = 0;
  // Drops an unfinished expected transfer (its memory is unregistered and
  // blocks still arriving are rejected). Only when no sender is writing.
  virtual void forget(std::uint64_t transfer_id) = 0;
  // Sender side: pushes src to the buffer a ticket describes, in blocks of
  // options().block_bytes. The completion finishes after the data is in place
  // remotely (put: ucp_ep_flush_nbx) and the receiver was told; src must stay
  // valid until then. Throws accel::InputError for a malformed ticket or a
  // size mismatch, std::invalid_argument for a protocol the ticket lacks.
  // Optional: window, the bytes in flight at once (0: the options'
  // max_bytes_in_flight), and sent(offset, bytes), called as each block's
  // request completes, after which UCX reads that block no more (a sender
  // pushing from a file mapping gives its pages back there).
  using BlockSent = std::function<void(std::size_t offset, std::size_t bytes)>;
  virtual CompletionRef push(EndpointId ep, std::span<const std::byte> ticket, const void* src, std::size_t bytes,
                             MemoryType memory = MemoryType::Host, BulkProtocol protocol = BulkProtocol::Auto,
                             std::size_t window = 0, BlockSent sent = {}) = 0;
  // What Auto means on this endpoint: Put when UCX gave it an RMA lane over
  // a transport with hardware or shared-memory put, else ActiveMessage (tcp
  // emulates put in software, orders of magnitude slower than rendezvous am).
  virtual BulkProtocol resolve_protocol(EndpointId ep) const = 0;

  virtual Stats stats() const = 0;
};

}  // namespace accel::transport
