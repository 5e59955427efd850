// Context, worker, endpoints, listener and control messages.
#include <poll.h>

#include <arpa/inet.h>
#include <netinet/in.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <iostream>
#include <mutex>
#include <stdexcept>
#include <thread>

#include "accel/error.hpp"
#include "accel/log.hpp"
#include "accel/transport/address.hpp"
#include "transport_impl.hpp"

namespace accel::transport {

namespace {


// The largest frame the control handler copies: anything longer is dropped
// before a byte of it is kept.
std::size_t max_frame(const Options& o) {
  return kControlHeaderBytes + std::min(o.max_control_payload, kMaxControlPayloadLimit) + kControlSealBytes;
}

void check(ucs_status_t s, const char* what) {
  if (s != UCS_OK) throw std::runtime_error(std::string(what) + ": " + ucs_status_string(s));
}

void request_done(void* request, ucs_status_t status, void* user_data) {
  auto* r = static_cast<Request*>(user_data);
  --r->impl->outstanding;
  r->on_done(status);
  delete r;
  ucp_request_free(request);
}

void ep_error(void* arg, ucp_ep_h, ucs_status_t status) {
  auto* rec = static_cast<EndpointRec*>(arg);
  if (rec->error.empty()) rec->error = "peer failure: " + status_text(status);
  rec->impl->failed_eps.push_back(rec->id);
}

void on_conn_request(ucp_conn_request_h req, void* arg) {
  static_cast<UcxTransport::Impl*>(arg)->conn_requests.push_back(req);
}

ucs_status_t on_control(void* arg, const void*, size_t, void* data, size_t length,
                        const ucp_am_recv_param_t* param) {
  auto* impl = static_cast<UcxTransport::Impl*>(arg);
  if (param->recv_attr & UCP_AM_RECV_ATTR_FLAG_RNDV) {
    // Control messages are sent eager; a rendezvous one is not ours to fetch.
    ++impl->stats.messages_dropped;
    log("dropped a control message sent by rendezvous (" + std::to_string(length) + " bytes)");
    return UCS_ERR_MESSAGE_TRUNCATED;
  }
  if (length > max_frame(impl->opt)) {
    ++impl->stats.messages_dropped;
    log("dropped an oversized control message (" + std::to_string(length) + " bytes)");
    return UCS_OK;
  }
  if (impl->raw.size() + impl->inbox.size() >= impl->opt.max_queued_messages) {
    ++impl->stats.messages_dropped;
    log("dropped a control message: receive queue full");
    return UCS_OK;
  }
  const auto* p = static_cast<const std::byte*>(data);
  ucp_ep_h reply = (param->recv_attr & UCP_AM_RECV_ATTR_FIELD_REPLY_EP) ? param->reply_ep : nullptr;
  impl->raw.push_back({std::vector<std::byte>(p, p + length), reply});
  return UCS_OK;
}

ucs_status_t on_block(void* arg, const void* header, size_t header_length, void* data, size_t length,
                      const ucp_am_recv_param_t* param) {
  return static_cast<UcxTransport::Impl*>(arg)->on_block(header, header_length, data, length, param);
}

}  // namespace

void log(const std::string& msg) { accel::log::write(accel::log::Level::Warn, "accel transport", msg); }

std::string status_text(ucs_status_t s) { return ucs_status_string(s); }

// ---------------------------------------------------------------------------

UcxTransport::UcxTransport(Options options) : impl_(std::make_unique<Impl>()) {
  Impl& m = *impl_;
  m.opt = std::move(options);
  if (m.opt.max_control_payload > kMaxControlPayloadLimit)
    throw std::invalid_argument("max_control_payload exceeds the hard limit");
  if (m.opt.block_bytes == 0 || m.opt.max_blocks_in_flight == 0)
    throw std::invalid_argument("block size and blocks in flight must be positive");

  ucp_config_t* config = nullptr;
  check(ucp_config_read(nullptr, nullptr, &config), "ucp_config_read");
  auto modify = [&](const std::string& k, const std::string& v) {
    const ucs_status_t s = ucp_config_modify(config, k.c_str(), v.c_str());
    if (s != UCS_OK) {
      ucp_config_release(config);
      throw InputError("UCX configuration " + k + "=" + v + ": " + ucs_status_string(s));
    }
  };
  if (!m.opt.tls.empty()) modify("TLS", m.opt.tls);
  if (m.opt.keepalive_interval) modify("KEEPALIVE_INTERVAL", std::to_string(m.opt.keepalive_interval->count()) + "ms");
  for (const auto& [k, v] : m.opt.ucx_config) modify(k, v);

  ucp_params_t params{};
  params.field_mask = UCP_PARAM_FIELD_FEATURES | UCP_PARAM_FIELD_MT_WORKERS_SHARED;
  params.features = UCP_FEATURE_AM | UCP_FEATURE_RMA | (m.opt.wakeup ? UCP_FEATURE_WAKEUP : 0);
  params.mt_workers_shared = 0;
  const ucs_status_t s = ucp_init(&params, config, &m.context);
  ucp_config_release(config);
  check(s, "ucp_init");

  ucp_worker_params_t wp{};
  wp.field_mask = UCP_WORKER_PARAM_FIELD_THREAD_MODE;
  wp.thread_mode = UCS_THREAD_MODE_SINGLE;
  if (const ucs_status_t ws = ucp_worker_create(m.context, &wp, &m.worker); ws != UCS_OK) {
    ucp_cleanup(m.context);
    check(ws, "ucp_worker_create");
  }
  if (m.opt.wakeup && ucp_worker_get_efd(m.worker, &m.event_fd) != UCS_OK) m.event_fd = -1;

  auto set_handler = [&](unsigned id, ucp_am_recv_callback_t cb) {
    ucp_am_handler_param_t hp{};
    hp.field_mask = UCP_AM_HANDLER_PARAM_FIELD_ID | UCP_AM_HANDLER_PARAM_FIELD_CB | UCP_AM_HANDLER_PARAM_FIELD_ARG |
                    UCP_AM_HANDLER_PARAM_FIELD_FLAGS;
    hp.id = id;
    hp.cb = cb;
    hp.arg = &m;
    hp.flags = 0;
    return ucp_worker_set_am_recv_handler(m.worker, &hp);
  };
  ucs_status_t hs = set_handler(kAmControl, on_control);
  if (hs == UCS_OK) hs = set_handler(kAmBulkBlock, accel::transport::on_block);
  if (hs != UCS_OK) {
    ucp_worker_destroy(m.worker);
    ucp_cleanup(m.context);
    check(hs, "ucp_worker_set_am_recv_handler");
  }
}

UcxTransport::~UcxTransport() {
  Impl& m = *impl_;
  using clock = std::chrono::steady_clock;
  // Let pending bulk sends finish, flush every endpoint, then force-close
  // what is left; each step bounded, so a silent peer cannot hold us here.
  auto deadline = clock::now() + m.opt.shutdown_timeout;
  while (!m.sends.empty() && clock::now() < deadline) progress();
  for (auto& [id, rec] : m.eps) m.close_ep(*rec, !rec->error.empty() && rec->error != "endpoint closed");
  auto all_closed = [&] {
    return std::all_of(m.eps.begin(), m.eps.end(), [](const auto& kv) { return kv.second->ep == nullptr; });
  };
  deadline = clock::now() + m.opt.shutdown_timeout;
  while (!all_closed() && clock::now() < deadline) progress();
  for (auto& [id, rec] : m.eps) m.close_ep(*rec, true);
  deadline = clock::now() + std::chrono::seconds(2);
  while (m.outstanding > 0 && clock::now() < deadline) ucp_worker_progress(m.worker);
  for (auto& [id, r] : m.recvs)
    if (r->memh && r->owns_memh) ucp_mem_unmap(m.context, r->memh);
  for (auto& [addr, region] : m.regions) ucp_mem_unmap(m.context, region.memh);
  for (auto& [key, cached] : m.rkeys) ucp_rkey_destroy(cached.rkey);
  for (auto req : m.conn_requests) ucp_listener_reject(m.listener, req);
  if (m.listener) ucp_listener_destroy(m.listener);
  if (m.outstanding > 0) {
    // UCX asserts when a worker with live requests is destroyed; leaking it
    // at shutdown is the lesser evil.
    log(std::to_string(m.outstanding) + " UCX requests still outstanding at shutdown; leaking the worker");
    return;
  }
  ucp_worker_destroy(m.worker);
  ucp_cleanup(m.context);
}

const Options& UcxTransport::options() const { return impl_->opt; }

// --- requests --------------------------------------------------------------

ucp_request_param_t UcxTransport::Impl::send_param(Request* r) {
  ucp_request_param_t p{};
  p.op_attr_mask = UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA;
  p.cb.send = request_done;
  p.user_data = r;
  return p;
}

void UcxTransport::Impl::track(Request* r, ucs_status_ptr_t p) {
  if (p == nullptr) {
    r->on_done(UCS_OK);
    delete r;
  } else if (UCS_PTR_IS_ERR(p)) {
    r->on_done(UCS_PTR_STATUS(p));
    delete r;
  } else {
    ++outstanding;
  }
}

// --- endpoints -------------------------------------------------------------

EndpointRec* UcxTransport::Impl::find(EndpointId id) const {
  auto it = eps.find(id);
  return it == eps.end() ? nullptr : it->second.get();
}

EndpointRec& UcxTransport::Impl::live(EndpointId id) const {
  EndpointRec* rec = find(id);
  if (rec == nullptr) throw std::invalid_argument("unknown endpoint " + std::to_string(id));
  return *rec;
}

EndpointId UcxTransport::Impl::create_ep(ucp_ep_params_t& params) {
  if (eps.size() >= opt.max_endpoints) throw std::runtime_error("too many endpoints");
  auto rec = std::make_unique<EndpointRec>();
  rec->impl = this;
  rec->id = next_ep_id++;
  params.field_mask |= UCP_EP_PARAM_FIELD_ERR_HANDLING_MODE | UCP_EP_PARAM_FIELD_ERR_HANDLER;
  params.err_mode = opt.peer_failure_detection ? UCP_ERR_HANDLING_MODE_PEER : UCP_ERR_HANDLING_MODE_NONE;
  params.err_handler.cb = ep_error;
  params.err_handler.arg = rec.get();
  const ucs_status_t s = ucp_ep_create(worker, &params, &rec->ep);
  if (s != UCS_OK) throw std::runtime_error(std::string("ucp_ep_create: ") + ucs_status_string(s));
  const EndpointId id = rec->id;
  by_handle[rec->ep] = id;
  eps[id] = std::move(rec);
  return id;
}

void UcxTransport::Impl::close_ep(EndpointRec& rec, bool force) {
  if (!rec.ep) return;
  if (rec.error.empty()) rec.error = "endpoint closed";
  if (!force) {
    if (rec.closing) return;
    rec.closing = true;
    const EndpointId id = rec.id;
    auto* r = new Request{this, [this, id](ucs_status_t) { flushed_eps.push_back(id); }, {}, {}};
    ucp_request_param_t p = send_param(r);
    track(r, ucp_ep_flush_nbx(rec.ep, &p));
    return;
  }
  auto* r = new Request{this, [](ucs_status_t) {}, {}, {}};
  ucp_request_param_t p = send_param(r);
  p.op_attr_mask |= UCP_OP_ATTR_FIELD_FLAGS;
  p.flags = UCP_EP_CLOSE_FLAG_FORCE;
  by_handle.erase(rec.ep);
  drop_rkeys(rec.id);  // keys still in use go when their send finishes
  ucp_ep_h ep = rec.ep;
  rec.ep = nullptr;
  track(r, ucp_ep_close_nbx(ep, &p));
}

std::vector<std::byte> UcxTransport::worker_address() const {
  ucp_address_t* addr = nullptr;
  std::size_t len = 0;
  check(ucp_worker_get_address(impl_->worker, &addr, &len), "ucp_worker_get_address");
  const auto* p = reinterpret_cast<const std::byte*>(addr);
  std::vector<std::byte> out(p, p + len);
  ucp_worker_release_address(impl_->worker, addr);
  return out;
}

EndpointId UcxTransport::connect(std::span<const std::byte> address) {
  if (address.empty() || address.size() > 65536) throw InputError("worker address length out of range");
  ucp_ep_params_t p{};
  p.field_mask = UCP_EP_PARAM_FIELD_REMOTE_ADDRESS;
  p.address = reinterpret_cast<const ucp_address_t*>(address.data());
  return impl_->create_ep(p);
}

std::uint16_t UcxTransport::listen(const std::string& ip, std::uint16_t port) {
  Impl& m = *impl_;
  if (m.listener) throw std::logic_error("already listening");
  sockaddr_in sa = ipv4_sockaddr(ip, port);
  ucp_listener_params_t lp{};
  lp.field_mask = UCP_LISTENER_PARAM_FIELD_SOCK_ADDR | UCP_LISTENER_PARAM_FIELD_CONN_HANDLER;
  lp.sockaddr.addr = reinterpret_cast<const sockaddr*>(&sa);
  lp.sockaddr.addrlen = sizeof(sa);
  lp.conn_handler.cb = on_conn_request;
  lp.conn_handler.arg = &m;
  check(ucp_listener_create(m.worker, &lp, &m.listener), "ucp_listener_create");
  ucp_listener_attr_t attr{};
  attr.field_mask = UCP_LISTENER_ATTR_FIELD_SOCKADDR;
  check(ucp_listener_query(m.listener, &attr), "ucp_listener_query");
  return ntohs(reinterpret_cast<const sockaddr_in*>(&attr.sockaddr)->sin_port);
}

EndpointId UcxTransport::connect(const std::string& ip, std::uint16_t port) {
  sockaddr_in sa = ipv4_sockaddr(ip, port);
  ucp_ep_params_t p{};
  p.field_mask = UCP_EP_PARAM_FIELD_FLAGS | UCP_EP_PARAM_FIELD_SOCK_ADDR;
  p.flags = UCP_EP_PARAMS_FLAGS_CLIENT_SERVER;
  p.sockaddr.addr = reinterpret_cast<const sockaddr*>(&sa);
  p.sockaddr.addrlen = sizeof(sa);
  return impl_->create_ep(p);
}

std::vector<EndpointId> UcxTransport::take_accepted() { return std::exchange(impl_->accepted, {}); }

bool UcxTransport::alive(EndpointId ep) const {
  const EndpointRec* rec = impl_->find(ep);
  return rec != nullptr && rec->ep != nullptr && rec->error.empty();
}

std::string UcxTransport::endpoint_error(EndpointId ep) const {
  const EndpointRec* rec = impl_->find(ep);
  return rec == nullptr ? "unknown endpoint" : rec->error;
}

void UcxTransport::disconnect(EndpointId ep) {
  if (EndpointRec* rec = impl_->find(ep)) impl_->close_ep(*rec, !rec->error.empty());
}

std::string UcxTransport::describe(EndpointId id) const {
  const EndpointRec& rec = impl_->live(id);
  if (!rec.ep) return {};
  char* buf = nullptr;
  std::size_t len = 0;
  FILE* f = open_memstream(&buf, &len);
  if (f == nullptr) return {};
  ucp_ep_print_info(rec.ep, f);
  std::fclose(f);
  std::string out(buf, len);
  std::free(buf);
  return out;
}

// --- progress --------------------------------------------------------------

unsigned UcxTransport::progress() {
  Impl& m = *impl_;
  unsigned n = ucp_worker_progress(m.worker);
  // Connection requests and endpoint failures were only noted in callbacks.
  for (ucp_conn_request_h req : std::exchange(m.conn_requests, {})) {
    ++n;
    if (m.eps.size() >= m.opt.max_endpoints) {
      ++m.stats.connections_rejected;
      log("rejected a connection: endpoint limit reached");
      ucp_listener_reject(m.listener, req);
      continue;
    }
    ucp_ep_params_t p{};
    p.field_mask = UCP_EP_PARAM_FIELD_CONN_REQUEST;
    p.conn_request = req;
    try {
      m.accepted.push_back(m.create_ep(p));
    } catch (const std::exception& e) {
      log(std::string("could not accept a connection: ") + e.what());
    }
  }
  for (EndpointId id : std::exchange(m.failed_eps, {})) {
    ++n;
    ++m.ep_failures;
    if (EndpointRec* rec = m.find(id)) m.close_ep(*rec, true);
  }
  for (EndpointId id : std::exchange(m.flushed_eps, {})) {
    ++n;
    if (EndpointRec* rec = m.find(id)) m.close_ep(*rec, true);
  }
  m.drain_control();
  m.advance_bulk();
  return n;
}

bool UcxTransport::progress_until(const std::function<bool()>& pred, std::chrono::milliseconds timeout) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  unsigned idle = 0;
  while (!pred()) {
    if (std::chrono::steady_clock::now() >= deadline) return pred();
    if (progress() > 0) {
      idle = 0;
    } else if (++idle > (impl_->event_fd >= 0 ? 50u : 1000u)) {
      // Nothing is moving: stop spinning so a peer on the same core can run.
      // With an event fd, block almost at once: where processes outnumber
      // cores, spinning takes the CPU the others need, and a barrier waits
      // on them.
      if (impl_->event_fd >= 0) {
        // Block until UCX has an event (or 10 ms, to re-check pred and the
        // deadline); UCS_ERR_BUSY means events are pending: progress again.
        if (ucp_worker_arm(impl_->worker) == UCS_OK) {
          const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
          pollfd p{impl_->event_fd, POLLIN, 0};
          ::poll(&p, 1, static_cast<int>(std::clamp<std::int64_t>(left.count(), 0, 10)));
        }
      } else {
        std::this_thread::sleep_for(std::chrono::microseconds(50));
      }
    }
  }
  return true;
}

// --- control messages ------------------------------------------------------

CompletionRef UcxTransport::send(EndpointId id, std::uint16_t type, std::uint64_t iteration,
                              std::span<const std::byte> payload, const std::array<std::byte, 16>* key) {
  if (type >= kFirstInternalType) throw std::invalid_argument("message type reserved for the transport");
  Impl& m = *impl_;
  auto c = std::make_shared<Completion>();
  EndpointRec& rec = m.live(id);
  ControlHeader h{type, m.opt.job_token, m.opt.self_id, m.opt.incarnation, iteration};
  std::vector<std::byte> frame = encode_control(h, payload, m.opt.max_control_payload, key);
  if (!rec.ep || !rec.error.empty()) {
    c->done = true;
    c->error = rec.error.empty() ? "endpoint closed" : rec.error;
    return c;
  }
  auto* r = new Request{&m, [c](ucs_status_t s) {
                          c->done = true;
                          if (s != UCS_OK) c->error = "send failed: " + status_text(s);
                        },
                        std::move(frame), {}};
  ucp_request_param_t p = m.send_param(r);
  p.op_attr_mask |= UCP_OP_ATTR_FIELD_FLAGS;
  // Eager: the receiver copies and checks the frame in its handler. Reply:
  // the receiver learns which of its endpoints the message came on.
  p.flags = UCP_AM_SEND_FLAG_EAGER | UCP_AM_SEND_FLAG_REPLY;
  m.track(r, ucp_am_send_nbx(rec.ep, kAmControl, nullptr, 0, r->keep.data(), r->keep.size(), &p));
  return c;
}

void UcxTransport::Impl::drain_control() {
  const ControlLimits limits{opt.job_token, opt.max_control_payload};
  while (!raw.empty()) {
    RawMessage rm = std::move(raw.front());
    raw.pop_front();
    DecodeResult d = decode_control(rm.bytes, limits);
    if (!d.ok()) {
      ++stats.messages_dropped;
      log("dropped a control message: " + d.error);
      continue;
    }
    ++stats.messages_received;
    Received r;
    if (auto it = by_handle.find(rm.reply_ep); rm.reply_ep && it != by_handle.end()) r.from = it->second;
    r.message = std::move(*d.message);
    if (r.message.header.type >= kFirstInternalType) {
      handle_bulk_done(r);
      continue;
    }
    inbox.push_back(std::move(r));
  }
}

std::optional<Received> UcxTransport::poll() {
  progress();
  if (impl_->inbox.empty()) return std::nullopt;
  Received r = std::move(impl_->inbox.front());
  impl_->inbox.pop_front();
  return r;
}

// Returns early, with nothing, when a peer fails meanwhile: a caller
// waiting for that peer learns at once that it will not answer.
std::optional<Received> UcxTransport::receive(std::chrono::milliseconds timeout) {
  const std::uint64_t failures = impl_->ep_failures;
  progress_until([&] { return !impl_->inbox.empty() || impl_->ep_failures != failures; }, timeout);
  if (impl_->inbox.empty()) return std::nullopt;
  Received r = std::move(impl_->inbox.front());
  impl_->inbox.pop_front();
  return r;
}

Stats UcxTransport::stats() const { return impl_->stats; }

}  // namespace accel::transport
