// The Transport over UCX: one UCP context and worker per object, control
// messages as eager active messages, and bulk transfers by RDMA put or by
// rendezvous active messages (transport.hpp says what each call does).
#pragma once

#include <memory>

#include "accel/transport/transport.hpp"

namespace accel::transport {

class UcxTransport final : public Transport {
 public:
  explicit UcxTransport(Options options);
  ~UcxTransport() override;

  const Options& options() const override;
  std::vector<std::byte> worker_address() const override;
  EndpointId connect(std::span<const std::byte> worker_address) override;
  std::uint16_t listen(const std::string& ip, std::uint16_t port) override;
  EndpointId connect(const std::string& ip, std::uint16_t port) override;
  std::vector<EndpointId> take_accepted() override;
  bool alive(EndpointId ep) const override;
  std::string endpoint_error(EndpointId ep) const override;
  void disconnect(EndpointId ep) override;
  std::string describe(EndpointId ep) const override;
  unsigned progress() override;
  bool progress_until(const std::function<bool()>& pred, std::chrono::milliseconds timeout) override;
  CompletionRef send(EndpointId ep, std::uint16_t type, std::uint64_t iteration, std::span<const std::byte> payload,
                     const std::array<std::byte, 16>* key = nullptr) override;
  std::optional<Received> poll() override;
  std::optional<Received> receive(std::chrono::milliseconds timeout) override;
  void* allocate(std::size_t bytes, MemoryType memory = MemoryType::Host) override;
  void deallocate(void* p) override;
  BulkReceiveHandle expect(void* dst, std::size_t bytes, MemoryType memory = MemoryType::Host,
                           EndpointId from = kNoEndpoint) override;
  void forget(std::uint64_t transfer_id) override;
  CompletionRef push(EndpointId ep, std::span<const std::byte> ticket, const void* src, std::size_t bytes,
                     MemoryType memory = MemoryType::Host, BulkProtocol protocol = BulkProtocol::Auto,
                     std::size_t window = 0, BlockSent sent = {}) override;
  BulkProtocol resolve_protocol(EndpointId ep) const override;
  Stats stats() const override;

  struct Impl;

 private:
  std::unique_ptr<Impl> impl_;
};

}  // namespace accel::transport
