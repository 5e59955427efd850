// The Transport of a simulated process (world.hpp): control messages are
// framed, sealed and checked by the transport's own codecs
// (control_message.hpp, message_mac.hpp) and carried by the world's link
// model; bulk transfers land in the receiver's buffer after their bytes'
// link time. A peer's endpoint fails the moment its process is gone, as
// UCX's peer-failure handler reports a process whose connections reset.
// The bootstrap's listener is not simulated: peers connect by address.
#pragma once

#include <deque>
#include <map>
#include <optional>
#include <memory>
#include <vector>

#include "accel/transport/transport.hpp"
#include "world.hpp"

namespace accel::cluster::sim {

class SimTransport final : public transport::Transport {
 public:
  SimTransport(World& world, transport::Options options);
  ~SimTransport() override;

  const transport::Options& options() const override { return opt_; }
  std::vector<std::byte> worker_address() const override;
  transport::EndpointId connect(std::span<const std::byte> worker_address) override;
  std::uint16_t listen(const std::string& ip, std::uint16_t port) override;
  transport::EndpointId connect(const std::string& ip, std::uint16_t port) override;
  std::vector<transport::EndpointId> take_accepted() override { return {}; }
  bool alive(transport::EndpointId ep) const override;
  std::string endpoint_error(transport::EndpointId ep) const override;
  void disconnect(transport::EndpointId ep) override;
  std::string describe(transport::EndpointId) const override { return "simulated link"; }
  unsigned progress() override { return 0; }  // the world delivers
  bool progress_until(const std::function<bool()>& pred, std::chrono::milliseconds timeout) override;
  transport::CompletionRef send(transport::EndpointId ep, std::uint16_t type, std::uint64_t iteration,
                                std::span<const std::byte> payload,
                                const std::array<std::byte, 16>* key = nullptr) override;
  std::optional<transport::Received> poll() override;
  std::optional<transport::Received> receive(std::chrono::milliseconds timeout) override;
  void* allocate(std::size_t bytes, transport::MemoryType memory = transport::MemoryType::Host) override;
  void deallocate(void* p) override;
  transport::BulkReceiveHandle expect(void* dst, std::size_t bytes,
                                      transport::MemoryType memory = transport::MemoryType::Host,
                                      transport::EndpointId from = transport::kNoEndpoint) override;
  void forget(std::uint64_t transfer_id) override { recvs_.erase(transfer_id); }
  transport::CompletionRef push(transport::EndpointId ep, std::span<const std::byte> ticket, const void* src,
                                std::size_t bytes, transport::MemoryType memory = transport::MemoryType::Host,
                                transport::BulkProtocol protocol = transport::BulkProtocol::Auto,
                                std::size_t window = 0, BlockSent sent = {}) override;
  transport::BulkProtocol resolve_protocol(transport::EndpointId) const override {
    return transport::BulkProtocol::ActiveMessage;
  }
  transport::Stats stats() const override { return stats_; }
  std::size_t held() const { return inbox_.size(); }  // control messages arrived, not yet received
  std::uint64_t dropped_full() const { return dropped_full_; }  // arrived to a full queue

  // --- the world's side -----------------------------------------------------
  // The message's type (protocol.hpp), or nullopt where the frame did not
  // decode.
  std::optional<std::uint16_t> arrive(std::uint64_t from, std::vector<std::byte> frame);
  void arrive_bulk(std::uint64_t transfer_id, const std::vector<std::byte>& data,
                   const std::shared_ptr<transport::Completion>& sender_done);
  // The transport at `address` is gone: this side's endpoints to it fail.
  // True when there were any.
  bool peer_gone(std::uint64_t address);

 private:
  struct Endpoint {
    std::uint64_t peer = 0;
    std::string error;  // empty while alive
  };
  struct Recv {
    std::byte* dst = nullptr;
    std::size_t bytes = 0;
    std::shared_ptr<transport::Completion> done;
  };
  const Endpoint& at(transport::EndpointId ep) const;

  World& world_;
  transport::Options opt_;
  std::uint64_t address_ = 0;
  transport::EndpointId next_ep_ = 1;
  std::map<transport::EndpointId, Endpoint> eps_;
  std::deque<transport::Received> inbox_;
  std::uint64_t failures_ = 0;  // endpoints failed for a gone peer, ever
  std::uint64_t next_transfer_ = 1;
  std::map<std::uint64_t, Recv> recvs_;
  std::map<void*, std::unique_ptr<std::byte[]>> allocated_;
  transport::Stats stats_;
  std::uint64_t dropped_full_ = 0;
};

}  // namespace accel::cluster::sim
