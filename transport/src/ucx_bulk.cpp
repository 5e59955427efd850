// Bulk transfers: RDMA put into memory the receiver registered ([Antimatroid]'s
// protocol), or rendezvous active messages the receiver pulls into place.
#include <algorithm>
#include <cstring>
#include <random>
#include <sstream>
#include <stdexcept>

#include "accel/config.hpp"
#include "accel/error.hpp"
#include "transport_impl.hpp"

namespace accel::transport {

namespace {

// Bounds the bookkeeping a peer can make us do for one transfer.
constexpr std::size_t kMaxBlocksPerTransfer = 1u << 20;

ucs_memory_type_t ucs_memory(MemoryType m) {
  if (m == MemoryType::Cuda) {
#if ACCEL_HAVE_CUDA
    return UCS_MEMORY_TYPE_CUDA;
#else
    throw std::invalid_argument("CUDA memory needs a build with CUDA (ACCEL_WITH_CUDA)");
#endif
  }
  return UCS_MEMORY_TYPE_HOST;
}

void recv_done(void* request, ucs_status_t status, size_t, void* user_data) {
  auto* r = static_cast<Request*>(user_data);
  --r->impl->outstanding;
  r->on_done(status);
  delete r;
  ucp_request_free(request);
}

void send_done(void* request, ucs_status_t status, void* user_data) {
  auto* r = static_cast<Request*>(user_data);
  --r->impl->outstanding;
  r->on_done(status);
  delete r;
  ucp_request_free(request);
}

std::uint64_t random_transfer_base() {
  // Transfer ids start at a random point so blocks meant for an earlier
  // incarnation of this process cannot land in a new transfer.
  std::random_device rd;
  return ((static_cast<std::uint64_t>(rd()) << 32) | rd()) & 0x7fffffffffff0000ull;
}

}  // namespace

BulkReceiveHandle UcxTransport::expect(void* dst, std::size_t bytes, MemoryType memory, EndpointId from) {
  Impl& m = *impl_;
  if (dst == nullptr || bytes == 0 || bytes > kMaxTransferBytes)
    throw std::invalid_argument("expect: empty or oversized destination");
  const ucs_memory_type_t mt = ucs_memory(memory);
  if (from != kNoEndpoint) m.live(from);
  if (m.next_transfer == 1) m.next_transfer = random_transfer_base();

  auto r = std::make_unique<BulkRecv>();
  r->completion = std::make_shared<Completion>();
  r->id = m.next_transfer++;
  r->dst = static_cast<std::byte*>(dst);
  r->bytes = bytes;
  r->memory = memory;
  r->from = from;

  BulkTicket t;
  t.offers = kOfferActiveMessage;
  t.transfer_id = r->id;
  t.bytes = bytes;
  t.memory = memory;
  // Register for put as well (or reuse an allocate()d region's
  // registration); when that fails the sender still has am.
  const auto start = reinterpret_cast<std::uintptr_t>(dst);
  if (auto it = m.regions.upper_bound(start); it != m.regions.begin() &&
                                             start + bytes <= std::prev(it)->first + std::prev(it)->second.bytes) {
    r->memh = std::prev(it)->second.memh;
  } else {
    ucp_mem_map_params_t mp{};
    mp.field_mask = UCP_MEM_MAP_PARAM_FIELD_ADDRESS | UCP_MEM_MAP_PARAM_FIELD_LENGTH |
                    UCP_MEM_MAP_PARAM_FIELD_MEMORY_TYPE;
    mp.address = dst;
    mp.length = bytes;
    mp.memory_type = mt;
    if (ucs_status_t s = ucp_mem_map(m.context, &mp, &r->memh); s != UCS_OK) {
      log("memory registration failed (" + status_text(s) + "); transfer offers am only");
      r->memh = nullptr;
    } else {
      r->owns_memh = true;
    }
  }
  if (r->memh) {
    void* packed = nullptr;
    std::size_t packed_len = 0;
    if (ucs_status_t ps = ucp_rkey_pack(m.context, r->memh, &packed, &packed_len); ps == UCS_OK) {
      if (packed_len <= kMaxRkeyBytes) {
        const auto* p = static_cast<const std::byte*>(packed);
        t.rkey.assign(p, p + packed_len);
        t.remote_address = reinterpret_cast<std::uint64_t>(dst);
        t.offers |= kOfferPut;
      }
      ucp_rkey_buffer_release(packed);
    } else {
      log("rkey pack failed (" + status_text(ps) + "); transfer offers am only");
    }
  }

  BulkReceiveHandle h{r->id, encode_ticket(t), r->completion};
  m.recvs[r->id] = std::move(r);
  return h;
}

void* UcxTransport::allocate(std::size_t bytes, MemoryType memory) {
  if (bytes == 0 || bytes > kMaxTransferBytes) throw std::invalid_argument("allocate: size out of range");
  ucp_mem_map_params_t mp{};
  mp.field_mask = UCP_MEM_MAP_PARAM_FIELD_ADDRESS | UCP_MEM_MAP_PARAM_FIELD_LENGTH | UCP_MEM_MAP_PARAM_FIELD_FLAGS |
                  UCP_MEM_MAP_PARAM_FIELD_MEMORY_TYPE;
  mp.address = nullptr;
  mp.length = bytes;
  mp.flags = UCP_MEM_MAP_ALLOCATE;
  mp.memory_type = ucs_memory(memory);
  ucp_mem_h memh = nullptr;
  if (ucs_status_t s = ucp_mem_map(impl_->context, &mp, &memh); s != UCS_OK)
    throw std::runtime_error("ucp_mem_map(ALLOCATE): " + status_text(s));
  ucp_mem_attr_t attr{};
  attr.field_mask = UCP_MEM_ATTR_FIELD_ADDRESS | UCP_MEM_ATTR_FIELD_LENGTH;
  if (ucs_status_t s = ucp_mem_query(memh, &attr); s != UCS_OK || attr.length < bytes) {
    ucp_mem_unmap(impl_->context, memh);
    throw std::runtime_error("ucp_mem_query failed");
  }
  impl_->regions[reinterpret_cast<std::uintptr_t>(attr.address)] = {memh, bytes};
  return attr.address;
}

void UcxTransport::deallocate(void* p) {
  auto it = impl_->regions.find(reinterpret_cast<std::uintptr_t>(p));
  if (it == impl_->regions.end()) throw std::invalid_argument("deallocate: not from allocate()");
  for (const auto& [id, r] : impl_->recvs)
    if (r->memh == it->second.memh && !r->completion->done)
      throw std::logic_error("deallocate: a transfer into this memory is still expected");
  ucp_mem_unmap(impl_->context, it->second.memh);
  impl_->regions.erase(it);
}

void UcxTransport::forget(std::uint64_t transfer_id) {
  auto it = impl_->recvs.find(transfer_id);
  if (it == impl_->recvs.end()) return;
  BulkRecv& r = *it->second;
  r.forgotten = true;
  if (r.error.empty()) r.error = "transfer abandoned";
  impl_->finish_recv_if_ready(r);
}

BulkProtocol UcxTransport::resolve_protocol(EndpointId ep) const {
  if (impl_->opt.protocol != BulkProtocol::Auto) return impl_->opt.protocol;
  // UCX 1.13 has no query for an endpoint's transports, so read the lane
  // table it prints. A put over tcp is emulated with active messages in
  // software, orders of magnitude slower than rendezvous am, so
  // put only when an rma_bw lane exists on a transport other than tcp.
  std::istringstream in(describe(ep));
  bool put_lane = false;
  for (std::string line; std::getline(in, line);) {
    if (line.find("lane[") == std::string::npos || line.find("rma_bw") == std::string::npos) continue;
    if (line.find("tcp/") == std::string::npos) put_lane = true;
  }
  return put_lane ? BulkProtocol::Put : BulkProtocol::ActiveMessage;
}

CompletionRef UcxTransport::push(EndpointId ep, std::span<const std::byte> ticket_bytes, const void* src,
                              std::size_t bytes, MemoryType memory, BulkProtocol protocol, std::size_t window,
                              BlockSent sent) {
  Impl& m = *impl_;
  std::string err;
  auto ticket = decode_ticket(ticket_bytes, &err);
  if (!ticket) throw InputError("bad bulk ticket: " + err);
  if (ticket->bytes != bytes)
    throw InputError("bulk ticket is for " + std::to_string(ticket->bytes) + " bytes, not " + std::to_string(bytes));
  if (src == nullptr) throw std::invalid_argument("push: null source");
  ucs_memory(memory);
  EndpointRec& rec = m.live(ep);

  auto s = std::make_unique<BulkSend>();
  s->completion = std::make_shared<Completion>();
  s->ep = ep;
  s->src = static_cast<const std::byte*>(src);
  s->bytes = bytes;
  s->memory = memory;
  s->window = window;
  s->sent = std::move(sent);
  if (protocol == BulkProtocol::Auto) protocol = m.opt.protocol;
  if (protocol == BulkProtocol::Auto && rec.ep) protocol = resolve_protocol(ep);
  if (protocol == BulkProtocol::Put && !(ticket->offers & kOfferPut)) {
    if (m.opt.protocol == BulkProtocol::Put) throw std::invalid_argument("the receiver did not offer put");
    protocol = BulkProtocol::ActiveMessage;  // Auto: fall back to what the receiver offered
  }
  if (protocol == BulkProtocol::ActiveMessage && !(ticket->offers & kOfferActiveMessage))
    throw std::invalid_argument("the receiver did not offer am");
  s->protocol = protocol;
  s->completion->protocol = protocol;
  s->ticket = std::move(*ticket);
  if (rec.ep && rec.error.empty() && protocol == BulkProtocol::Put) s->rkey = m.acquire_rkey(rec, s->ticket.rkey);
  CompletionRef c = s->completion;
  m.sends.push_back(std::move(s));
  m.advance_send(*m.sends.back());
  return c;
}

ucp_rkey_h UcxTransport::Impl::acquire_rkey(EndpointRec& rec, const std::vector<std::byte>& packed) {
  auto key = std::make_pair(rec.id, std::string(reinterpret_cast<const char*>(packed.data()), packed.size()));
  if (auto it = rkeys.find(key); it != rkeys.end()) {
    ++it->second.users;
    return it->second.rkey;
  }
  if (rkeys.size() >= kMaxCachedRkeys) {
    for (auto it = rkeys.begin(); it != rkeys.end();) {
      if (it->second.users == 0) {
        ucp_rkey_destroy(it->second.rkey);
        it = rkeys.erase(it);
      } else {
        ++it;
      }
    }
  }
  ucp_rkey_h rkey = nullptr;
  if (ucs_status_t us = ucp_ep_rkey_unpack(rec.ep, packed.data(), &rkey); us != UCS_OK)
    throw InputError("bulk ticket rkey rejected by UCX: " + status_text(us));
  rkeys[std::move(key)] = {rkey, 1};
  return rkey;
}

void UcxTransport::Impl::release_rkey(EndpointId ep, const std::vector<std::byte>& packed) {
  auto it = rkeys.find(std::make_pair(ep, std::string(reinterpret_cast<const char*>(packed.data()), packed.size())));
  if (it == rkeys.end()) return;
  --it->second.users;
  const EndpointRec* rec = find(ep);
  if (it->second.users == 0 && (rec == nullptr || rec->ep == nullptr)) {
    ucp_rkey_destroy(it->second.rkey);
    rkeys.erase(it);
  }
}

void UcxTransport::Impl::drop_rkeys(EndpointId ep) {
  for (auto it = rkeys.lower_bound({ep, std::string()}); it != rkeys.end() && it->first.first == ep;) {
    if (it->second.users == 0) {
      ucp_rkey_destroy(it->second.rkey);
      it = rkeys.erase(it);
    } else {
      ++it;
    }
  }
}

void UcxTransport::Impl::advance_bulk() {
  for (auto& s : sends) advance_send(*s);
  std::erase_if(sends, [](const std::unique_ptr<BulkSend>& s) { return s->phase == BulkSend::Phase::Finished; });
  for (auto& [id, r] : recvs) {
    if (r->from != kNoEndpoint && r->error.empty()) {
      const EndpointRec* rec = find(r->from);
      if (rec == nullptr || !rec->error.empty()) r->error = "sender failed: " + (rec ? rec->error : "gone");
    }
    finish_recv_if_ready(*r);
  }
  std::erase_if(recvs, [](const auto& kv) { return kv.second->completion->done && kv.second->in_flight == 0; });
}

namespace {

// A request's completion counted off its send, and its first failure kept.
std::function<void(ucs_status_t)> counted_done(BulkSend& s, const char* what) {
  return [&s, what](ucs_status_t st) {
    --s.in_flight;
    if (st != UCS_OK && s.error.empty()) s.error = std::string(what) + " failed: " + status_text(st);
  };
}

}  // namespace

void UcxTransport::Impl::advance_send(BulkSend& s) {
  if (s.phase == BulkSend::Phase::Finished) return;
  EndpointRec* rec = find(s.ep);
  if (s.error.empty() && (rec == nullptr || !rec->ep || !rec->error.empty()))
    s.error = rec == nullptr ? "endpoint gone" : (rec->error.empty() ? "endpoint closed" : rec->error);
  if (!s.error.empty()) return end_send_with_error(s);
  if (s.phase == BulkSend::Phase::Blocks) send_blocks(s, *rec);
  if (s.phase == BulkSend::Phase::Flush && s.error.empty()) flush_send(s, *rec);
  if (s.phase == BulkSend::Phase::Done && s.error.empty()) say_send_done(s, *rec);
  if (!s.error.empty()) end_send_with_error(s);  // report the error now if nothing is in flight
}

// Reported only once UCX has released every request: the caller may free
// src then.
void UcxTransport::Impl::end_send_with_error(BulkSend& s) {
  if (s.in_flight != 0) return;
  if (s.rkey) release_rkey(s.ep, s.ticket.rkey);
  s.rkey = nullptr;
  s.completion->error = s.error;
  s.completion->done = true;
  s.phase = BulkSend::Phase::Finished;
}

// Blocks in a window of bytes and requests in flight.
void UcxTransport::Impl::send_blocks(BulkSend& s, EndpointRec& rec) {
  const ucs_memory_type_t mt = ucs_memory(s.memory);
  const std::size_t window = std::clamp<std::size_t>((s.window ? s.window : opt.max_bytes_in_flight) / opt.block_bytes,
                                                     1, opt.max_blocks_in_flight);
  while (s.next < s.bytes && s.in_flight < window && s.error.empty()) {
    const std::size_t off = s.next;
    const std::size_t len = std::min(opt.block_bytes, s.bytes - off);
    s.next += len;
    ++s.in_flight;
    auto done = counted_done(s, s.protocol == BulkProtocol::Put ? "put" : "am send");
    if (s.sent)
      done = [&s, done = std::move(done), off, len](ucs_status_t st) {
        done(st);
        if (st == UCS_OK) s.sent(off, len);
      };
    auto* r = new Request{this, std::move(done), {}, {}};
    ucp_request_param_t p{};
    p.op_attr_mask = UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA | UCP_OP_ATTR_FIELD_MEMORY_TYPE;
    p.cb.send = send_done;
    p.user_data = r;
    p.memory_type = mt;
    if (s.protocol == BulkProtocol::Put) {
      track(r, ucp_put_nbx(rec.ep, s.src + off, len, s.ticket.remote_address + off, s.rkey, &p));
    } else {
      r->keep = encode_block_header({opt.job_token, s.ticket.transfer_id, off, len});
      p.op_attr_mask |= UCP_OP_ATTR_FIELD_FLAGS;
      p.flags = UCP_AM_SEND_FLAG_RNDV;
      track(r, ucp_am_send_nbx(rec.ep, kAmBulkBlock, r->keep.data(), r->keep.size(), s.src + off, len, &p));
    }
  }
  if (s.next == s.bytes && s.in_flight == 0 && s.error.empty())
    s.phase = s.protocol == BulkProtocol::Put ? BulkSend::Phase::Flush : BulkSend::Phase::Done;
}

// A completed put only means our buffer is reusable; the flush means the
// data reached the remote memory, so only now may the receiver be told.
void UcxTransport::Impl::flush_send(BulkSend& s, EndpointRec& rec) {
  if (!s.flush_issued) {
    s.flush_issued = true;
    ++s.in_flight;
    auto* r = new Request{this, counted_done(s, "flush"), {}, {}};
    ucp_request_param_t p = send_param(r);
    track(r, ucp_ep_flush_nbx(rec.ep, &p));
  }
  if (s.in_flight == 0 && s.error.empty()) s.phase = BulkSend::Phase::Done;
}

void UcxTransport::Impl::say_send_done(BulkSend& s, EndpointRec& rec) {
  if (!s.done_issued) {
    s.done_issued = true;
    ++s.in_flight;
    ControlHeader h{kTypeBulkDone, opt.job_token, opt.self_id, opt.incarnation, 0};
    auto* r = new Request{this, counted_done(s, "bulk done"),
                          encode_control(h, encode_bulk_done({s.ticket.transfer_id, s.bytes, s.protocol})), {}};
    ucp_request_param_t p = send_param(r);
    p.op_attr_mask |= UCP_OP_ATTR_FIELD_FLAGS;
    p.flags = UCP_AM_SEND_FLAG_EAGER | UCP_AM_SEND_FLAG_REPLY;
    track(r, ucp_am_send_nbx(rec.ep, kAmControl, nullptr, 0, r->keep.data(), r->keep.size(), &p));
  }
  if (s.in_flight == 0 && s.error.empty()) {
    if (s.rkey) release_rkey(s.ep, s.ticket.rkey);
    s.rkey = nullptr;
    s.completion->done = true;
    s.phase = BulkSend::Phase::Finished;
  }
}

void UcxTransport::Impl::handle_bulk_done(const Received& msg) {
  std::string err;
  if (msg.message.header.type != kTypeBulkDone) {
    ++stats.messages_dropped;
    log("dropped a control message of unknown internal type " + std::to_string(msg.message.header.type));
    return;
  }
  auto d = decode_bulk_done(msg.message.payload, &err);
  if (!d) {
    ++stats.messages_dropped;
    log("dropped a bulk done message: " + err);
    return;
  }
  auto it = recvs.find(d->transfer_id);
  if (it == recvs.end() || it->second->forgotten || it->second->completion->done) {
    ++stats.messages_dropped;
    log("dropped a bulk done message for an unknown transfer");
    return;
  }
  BulkRecv& r = *it->second;
  if (d->bytes != r.bytes) {
    r.error = "sender reported " + std::to_string(d->bytes) + " bytes, expected " + std::to_string(r.bytes);
  } else if (d->protocol == BulkProtocol::Put && r.memh == nullptr) {
    r.error = "sender reported a put the receiver never offered";
  }
  r.sender_done = true;
  r.protocol = d->protocol;
  finish_recv_if_ready(r);
}

void UcxTransport::Impl::finish_recv_if_ready(BulkRecv& r) {
  if (r.completion->done || r.in_flight > 0) return;
  bool finish = !r.error.empty();
  if (!finish && r.sender_done) {
    if (r.protocol == BulkProtocol::ActiveMessage && r.landed != r.bytes)
      r.error = "sender finished but only " + std::to_string(r.landed) + " of " + std::to_string(r.bytes) +
                " bytes arrived";
    finish = true;
  }
  if (!finish) return;
  if (r.memh && r.owns_memh) ucp_mem_unmap(context, r.memh);
  r.memh = nullptr;
  r.completion->protocol = r.protocol;
  r.completion->error = r.error;
  r.completion->done = true;
}

ucs_status_t UcxTransport::Impl::on_block(const void* header, std::size_t header_length, void* data,
                                       std::size_t length, const ucp_am_recv_param_t* param) {
  const bool rndv = (param->recv_attr & UCP_AM_RECV_ATTR_FLAG_RNDV) != 0;
  const bool persistent = (param->recv_attr & UCP_AM_RECV_ATTR_FLAG_DATA) != 0;
  auto reject = [&](const std::string& why) {
    ++stats.blocks_rejected;
    log("rejected a bulk block: " + why);
    // A rendezvous block can be refused back to its sender; eager data is just dropped.
    return rndv ? UCS_ERR_REJECTED : UCS_OK;
  };
  std::string err;
  auto h = decode_block_header({static_cast<const std::byte*>(header), header_length}, &err);
  if (!h) return reject(err);
  if (h->job_token != opt.job_token) return reject("wrong job token");
  auto it = recvs.find(h->transfer_id);
  if (it == recvs.end() || it->second->forgotten || it->second->completion->done || !it->second->error.empty())
    return reject("no such transfer expected");
  BulkRecv& r = *it->second;
  if (h->length != length) return reject("header length does not match the data");
  if (h->offset > r.bytes || h->length > r.bytes - h->offset) return reject("block outside the buffer");
  const std::uint64_t end = h->offset + h->length;
  auto next = r.ranges.lower_bound(h->offset);
  if (next != r.ranges.end() && next->first < end) return reject("block overlaps an earlier one");
  if (next != r.ranges.begin() && std::prev(next)->second > h->offset) return reject("block overlaps an earlier one");
  if (r.ranges.size() >= kMaxBlocksPerTransfer) return reject("too many blocks");
  r.ranges.emplace(h->offset, end);
  r.protocol = BulkProtocol::ActiveMessage;

  if (!rndv && !persistent) {
    // Small eager data only lives for this call.
    if (r.memory != MemoryType::Host) return reject("eager block for device memory");
    std::memcpy(r.dst + h->offset, data, length);
    r.landed += length;
    return UCS_OK;
  }
  // Starting the receive is allowed here (it does not progress the worker);
  // completion is reported by a later ucp_worker_progress.
  ++r.in_flight;
  BulkRecv* rp = &r;
  auto* q = new Request{this, [rp, length](ucs_status_t st) {
                          --rp->in_flight;
                          if (st == UCS_OK)
                            rp->landed += length;
                          else if (rp->error.empty())
                            rp->error = "block receive failed: " + status_text(st);
                        },
                        {}, {}};
  ucp_request_param_t p{};
  p.op_attr_mask = UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA | UCP_OP_ATTR_FIELD_MEMORY_TYPE;
  p.cb.recv_am = recv_done;
  p.user_data = q;
  p.memory_type = ucs_memory(r.memory);
  track(q, ucp_am_recv_data_nbx(worker, data, r.dst + h->offset, length, &p));
  return UCS_INPROGRESS;
}

}  // namespace accel::transport
