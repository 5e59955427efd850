#include "sim_transport.hpp"

#include <cstring>
#include <stdexcept>

#include "accel/error.hpp"
#include "accel/log.hpp"
#include "accel/transport/bulk_wire.hpp"
#include "accel/transport/control_message.hpp"

namespace accel::cluster::sim {
namespace {
constexpr char kMagic[4] = {'s', 'i', 'm', '1'};

std::shared_ptr<transport::Completion> finished(std::string error = {}) {
  auto c = std::make_shared<transport::Completion>();
  c->done = true;
  c->error = std::move(error);
  return c;
}
}  // namespace

SimTransport::SimTransport(World& world, transport::Options options) : world_(world), opt_(std::move(options)) {
  if (opt_.max_control_payload > transport::kMaxControlPayloadLimit)
    throw std::invalid_argument("max_control_payload exceeds the hard limit");
  address_ = world_.attach(this);
}

SimTransport::~SimTransport() { world_.detach(address_); }

// "sim1" and the world's address of this transport.
std::vector<std::byte> SimTransport::worker_address() const {
  std::vector<std::byte> a(12);
  std::memcpy(a.data(), kMagic, 4);
  for (int i = 0; i < 8; ++i) a[4 + i] = static_cast<std::byte>(address_ >> (8 * i));
  return a;
}

transport::EndpointId SimTransport::connect(std::span<const std::byte> address) {
  if (address.size() != 12 || std::memcmp(address.data(), kMagic, 4) != 0)
    throw InputError("not a simulated worker address");
  std::uint64_t peer = 0;
  for (int i = 0; i < 8; ++i) peer |= std::to_integer<std::uint64_t>(address[4 + i]) << (8 * i);
  // As ucp_ep_create to a process that is gone.
  if (!world_.find(peer)) throw std::runtime_error("sim: Destination is unreachable");
  const auto ep = next_ep_++;
  eps_[ep] = {peer, {}};
  return ep;
}

std::uint16_t SimTransport::listen(const std::string&, std::uint16_t) {
  throw std::logic_error("sim: no listeners (peers connect by worker address)");
}

transport::EndpointId SimTransport::connect(const std::string&, std::uint16_t) {
  throw std::logic_error("sim: no listeners (peers connect by worker address)");
}

const SimTransport::Endpoint& SimTransport::at(transport::EndpointId ep) const {
  auto it = eps_.find(ep);
  if (it == eps_.end()) throw std::invalid_argument("sim: unknown endpoint " + std::to_string(ep));
  return it->second;
}

bool SimTransport::alive(transport::EndpointId ep) const {
  auto it = eps_.find(ep);
  return it != eps_.end() && it->second.error.empty();
}

std::string SimTransport::endpoint_error(transport::EndpointId ep) const {
  auto it = eps_.find(ep);
  return it == eps_.end() ? "unknown endpoint" : it->second.error;
}

void SimTransport::disconnect(transport::EndpointId ep) {
  auto it = eps_.find(ep);
  if (it != eps_.end() && it->second.error.empty()) it->second.error = "disconnected";
}

bool SimTransport::peer_gone(std::uint64_t address) {
  bool any = false;
  for (auto& [id, e] : eps_)
    if (e.peer == address && e.error.empty()) {
      e.error = "Connection reset by remote peer";
      ++failures_;
      any = true;
    }
  return any;
}

// A call that waits not at all still takes a microsecond: a caller that
// polls in a loop lets virtual time move, as real time moves under a real
// one.
bool SimTransport::progress_until(const std::function<bool()>& pred, std::chrono::milliseconds timeout) {
  const auto deadline = Clock::now() + timeout;
  bool waited = false;
  for (;;) {
    if (pred()) return true;
    if (world_.dying()) return false;
    if (Clock::now() >= deadline) {
      if (!waited) world_.wait_until(Clock::now() + std::chrono::microseconds(1));
      return pred();
    }
    world_.wait_until(deadline);
    waited = true;
  }
}

transport::CompletionRef SimTransport::send(transport::EndpointId ep, std::uint16_t type, std::uint64_t iteration,
                                            std::span<const std::byte> payload,
                                            const std::array<std::byte, 16>* key) {
  if (type == 0 || type >= transport::kFirstInternalType) throw std::invalid_argument("sim: internal message type");
  const Endpoint& e = at(ep);
  if (!e.error.empty()) return finished(e.error);
  transport::ControlHeader h;
  h.type = type;
  h.job_token = opt_.job_token;
  h.sender = opt_.self_id;
  h.incarnation = opt_.incarnation;
  h.iteration = iteration;
  world_.deliver(address_, e.peer, transport::encode_control(h, payload, opt_.max_control_payload, key));
  return finished();
}

std::optional<std::uint16_t> SimTransport::arrive(std::uint64_t from, std::vector<std::byte> frame) {
  auto d = transport::decode_control(frame, {opt_.job_token, opt_.max_control_payload});
  if (!d.ok() || inbox_.size() >= opt_.max_queued_messages) {
    ++stats_.messages_dropped;
    if (d.ok()) ++dropped_full_;
    log::warn("accel transport") << "dropped a message: " << (d.ok() ? "queue full" : d.error);
    return d.ok() ? std::optional(d.message->header.type) : std::nullopt;
  }
  const std::uint16_t type = d.message->header.type;
  ++stats_.messages_received;
  transport::Received r;
  for (const auto& [id, e] : eps_)
    if (e.peer == from) r.from = id;
  r.message = std::move(*d.message);
  inbox_.push_back(std::move(r));
  return type;
}

std::optional<transport::Received> SimTransport::poll() {
  if (inbox_.empty()) return std::nullopt;
  transport::Received r = std::move(inbox_.front());
  inbox_.pop_front();
  return r;
}

std::optional<transport::Received> SimTransport::receive(std::chrono::milliseconds timeout) {
  const std::uint64_t failures = failures_;
  progress_until([&] { return !inbox_.empty() || failures_ != failures; }, timeout);
  return poll();
}

void* SimTransport::allocate(std::size_t bytes, transport::MemoryType memory) {
  if (memory != transport::MemoryType::Host) throw std::invalid_argument("sim: host memory only");
  auto p = std::make_unique<std::byte[]>(bytes);
  void* raw = p.get();
  allocated_.emplace(raw, std::move(p));
  return raw;
}

void SimTransport::deallocate(void* p) { allocated_.erase(p); }

transport::BulkReceiveHandle SimTransport::expect(void* dst, std::size_t bytes, transport::MemoryType memory,
                                                  transport::EndpointId) {
  if (memory != transport::MemoryType::Host) throw std::invalid_argument("sim: host memory only");
  transport::BulkTicket t;
  t.offers = transport::kOfferActiveMessage;
  t.transfer_id = address_ << 32 | next_transfer_++;
  t.bytes = bytes;
  auto done = std::make_shared<transport::Completion>();
  recvs_[t.transfer_id] = {static_cast<std::byte*>(dst), bytes, done};
  return {t.transfer_id, transport::encode_ticket(t), done};
}

transport::CompletionRef SimTransport::push(transport::EndpointId ep, std::span<const std::byte> ticket,
                                            const void* src, std::size_t bytes, transport::MemoryType memory,
                                            transport::BulkProtocol, std::size_t, BlockSent sent) {
  std::string why;
  const auto t = transport::decode_ticket(ticket, &why);
  if (!t) throw InputError("bulk ticket: " + why);
  if (t->bytes != bytes) throw InputError("bulk ticket: " + std::to_string(t->bytes) + " bytes, pushing " +
                                          std::to_string(bytes));
  if (memory != transport::MemoryType::Host) throw std::invalid_argument("sim: host memory only");
  const Endpoint& e = at(ep);
  if (!e.error.empty()) return finished(e.error);
  std::vector<std::byte> data(static_cast<const std::byte*>(src), static_cast<const std::byte*>(src) + bytes);
  if (sent) sent(0, bytes);  // copied: the source is read no more
  auto done = std::make_shared<transport::Completion>();
  done->protocol = transport::BulkProtocol::ActiveMessage;
  world_.deliver_bulk(address_, e.peer, t->transfer_id, std::move(data), done);
  return done;
}

void SimTransport::arrive_bulk(std::uint64_t transfer_id, const std::vector<std::byte>& data,
                               const std::shared_ptr<transport::Completion>& sender_done) {
  auto it = recvs_.find(transfer_id);
  if (it == recvs_.end() || it->second.bytes != data.size()) {
    ++stats_.blocks_rejected;
    sender_done->done = true;
    sender_done->error = "the receiver expects no such transfer";
    return;
  }
  std::memcpy(it->second.dst, data.data(), data.size());
  it->second.done->done = true;
  it->second.done->protocol = transport::BulkProtocol::ActiveMessage;
  recvs_.erase(it);
  sender_done->done = true;
}

}  // namespace accel::cluster::sim
