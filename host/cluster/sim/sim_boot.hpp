// The coordinator's front door in a simulated world: the admissions of
// bootstrap.hpp (a worker's id, ticket, session key and address, checked
// against the job token) without its TCP handshake, which takes a round
// trip of the link model here. Tickets and keys are drawn from the world's
// seed.
#pragma once

#include <map>

#include "bootstrap.hpp"
#include "world.hpp"

namespace accel::cluster::sim {

class SimBootNetwork final : public BootNetwork {
 public:
  explicit SimBootNetwork(World& world) : world_(world) {}
  std::unique_ptr<FrontDoor> open(const std::string& ip, std::uint16_t port, std::uint64_t token,
                                  std::uint32_t max_id, std::vector<std::byte> address,
                                  std::uint32_t max_assigned) override;
  BootReply connect(const std::string& ip, std::uint16_t port, std::uint64_t token, std::uint32_t id, bool resume,
                    const std::vector<std::byte>& address, std::chrono::milliseconds timeout) override;

  class Door;

 private:
  friend class Door;
  World& world_;
  std::map<std::uint16_t, Door*> doors_;
  std::uint16_t next_port_ = 40000;
};

}  // namespace accel::cluster::sim
