// Internal state of a UcxTransport, shared by ucx_transport.cpp (context,
// endpoints, control messages) and ucx_bulk.cpp (bulk transfers).
#pragma once

#include <ucp/api/ucp.h>

#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "accel/transport/ucx_transport.hpp"

namespace accel::transport {

void log(const std::string& msg);
std::string status_text(ucs_status_t s);

// Active message ids of the transport.
inline constexpr unsigned kAmControl = 0x41c0;
inline constexpr unsigned kAmBulkBlock = 0x41c1;

struct EndpointRec {
  UcxTransport::Impl* impl = nullptr;
  EndpointId id = kNoEndpoint;
  ucp_ep_h ep = nullptr;
  std::string error;   // set by the error callback or a failed close
  bool closing = false;  // a graceful close flushes first, then force-closes
};

// One outstanding UCX request: what to do when it completes, and what must
// stay alive until then (an encoded message, a block header).
struct Request {
  UcxTransport::Impl* impl = nullptr;
  std::function<void(ucs_status_t)> on_done;  // records state only, never progresses
  std::vector<std::byte> keep, keep2;
};

struct BulkSend {
  std::shared_ptr<Completion> completion;
  EndpointId ep = kNoEndpoint;
  BulkProtocol protocol = BulkProtocol::Put;
  const std::byte* src = nullptr;
  std::size_t bytes = 0;
  MemoryType memory = MemoryType::Host;
  BulkTicket ticket;
  ucp_rkey_h rkey = nullptr;
  std::size_t window = 0;      // bytes in flight (0: the options')
  std::function<void(std::size_t, std::size_t)> sent;  // each block's request done
  std::size_t next = 0;        // next offset to issue
  std::size_t in_flight = 0;   // requests not yet completed
  enum class Phase { Blocks, Flush, Done, Finished } phase = Phase::Blocks;
  bool flush_issued = false, done_issued = false, done_completed = false, flush_completed = false;
  std::string error;
};

struct BulkRecv {
  std::shared_ptr<Completion> completion;
  std::uint64_t id = 0;
  std::byte* dst = nullptr;
  std::size_t bytes = 0;
  MemoryType memory = MemoryType::Host;
  EndpointId from = kNoEndpoint;
  ucp_mem_h memh = nullptr;
  bool owns_memh = false;      // false: memh belongs to an allocate()d region
  std::map<std::uint64_t, std::uint64_t> ranges;  // offset -> end of blocks accepted
  std::size_t landed = 0;      // bytes of completed block receives
  std::size_t in_flight = 0;   // block receives not yet completed
  bool sender_done = false;
  BulkProtocol protocol = BulkProtocol::Auto;
  std::string error;
  bool forgotten = false;
};

struct UcxTransport::Impl {
  Options opt;
  ucp_context_h context = nullptr;
  ucp_worker_h worker = nullptr;
  int event_fd = -1;  // with Options::wakeup
  ucp_listener_h listener = nullptr;

  EndpointId next_ep_id = 1;
  std::map<EndpointId, std::unique_ptr<EndpointRec>> eps;
  std::unordered_map<ucp_ep_h, EndpointId> by_handle;
  std::vector<EndpointId> accepted;
  std::vector<ucp_conn_request_h> conn_requests;   // filled by the listener callback
  std::vector<EndpointId> failed_eps;              // filled by the error callback
  std::uint64_t ep_failures = 0;                   // endpoints closed for a peer failure, ever
  std::vector<EndpointId> flushed_eps;             // graceful closes whose flush ended

  struct RawMessage {
    std::vector<std::byte> bytes;
    ucp_ep_h reply_ep;
  };
  std::deque<RawMessage> raw;       // filled by the control AM callback
  std::deque<Received> inbox;       // decoded application messages

  std::uint64_t next_transfer = 1;
  std::map<std::uint64_t, std::unique_ptr<BulkRecv>> recvs;
  std::vector<std::unique_ptr<BulkSend>> sends;

  struct Region {
    ucp_mem_h memh;
    std::size_t bytes;
  };
  std::map<std::uintptr_t, Region> regions;   // allocate()d memory by start address

  // Unpacked remote keys by (endpoint, packed key). Tickets for the same
  // remote region carry the same packed key; unpacking it again would map a
  // peer's shared-memory segment again (page faults on every transfer).
  struct CachedRkey {
    ucp_rkey_h rkey = nullptr;
    std::size_t users = 0;   // bulk sends using it now
  };
  std::map<std::pair<EndpointId, std::string>, CachedRkey> rkeys;   // key bytes as a string
  static constexpr std::size_t kMaxCachedRkeys = 256;
  ucp_rkey_h acquire_rkey(EndpointRec& rec, const std::vector<std::byte>& packed);
  void release_rkey(EndpointId ep, const std::vector<std::byte>& packed);
  void drop_rkeys(EndpointId ep);   // the endpoint is closing: destroy unused keys

  std::size_t outstanding = 0;      // UCX requests whose callback has not run
  Stats stats;

  // Issues a UCX operation: `issue` gets the request parameters (callback and
  // user data filled in) and returns the UCX status pointer.
  void track(Request* r, ucs_status_ptr_t p);
  ucp_request_param_t send_param(Request* r);

  EndpointRec* find(EndpointId id) const;
  EndpointRec& live(EndpointId id) const;      // throws std::invalid_argument for unknown ids
  EndpointId create_ep(ucp_ep_params_t& params);
  // Graceful: flush, then force-close (a force close completes locally, so
  // no close can hang on a peer that stopped progressing). Force: at once.
  void close_ep(EndpointRec& rec, bool force);

  void drain_control();
  void handle_bulk_done(const Received& r);
  void advance_bulk();
  // A bulk send's phases (ucx_bulk.cpp): blocks, then (put) a flush, then
  // the done message; an error ends it once nothing is in flight.
  void advance_send(BulkSend& s);
  void end_send_with_error(BulkSend& s);
  void send_blocks(BulkSend& s, EndpointRec& rec);
  void flush_send(BulkSend& s, EndpointRec& rec);
  void say_send_done(BulkSend& s, EndpointRec& rec);
  void finish_recv_if_ready(BulkRecv& r);
  ucs_status_t on_block(const void* header, std::size_t header_length, void* data, std::size_t length,
                        const ucp_am_recv_param_t* param);
};

}  // namespace accel::transport
