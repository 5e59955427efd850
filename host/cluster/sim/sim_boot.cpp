#include "sim_boot.hpp"

#include "accel/error.hpp"
#include "errors.hpp"

namespace accel::cluster::sim {

class SimBootNetwork::Door final : public FrontDoor {
 public:
  Door(SimBootNetwork& net, std::uint16_t port, std::uint64_t token, std::uint32_t max_id,
       std::vector<std::byte> address, std::uint32_t max_assigned)
      : net_(net), port_(port), owner_(net.world_.current()), token_(token), address_(std::move(address)),
        admissions_(max_id, max_assigned) {
    net_.doors_[port_] = this;
  }
  ~Door() override { net_.doors_.erase(port_); }

  std::uint16_t port() const override { return port_; }
  World::Proc owner() const { return owner_; }
  std::optional<Admission> admit(std::uint32_t id, const Ticket& ticket) override {
    return admissions_.take(id, ticket);
  }
  std::optional<std::vector<std::byte>> address_of(std::uint32_t id) const override {
    return admissions_.address_of(id);
  }
  std::optional<transport::MacKey> key_of(std::uint32_t id) const override { return admissions_.key_of(id); }
  std::vector<std::string> refusals() override { return std::exchange(refusals_, {}); }
  std::uint64_t refused() const override { return refused_; }

  // The verdict on a worker's hello, as BootServer::answer gives it.
  BootReply answer(std::uint64_t token, std::uint32_t id, bool resume, const std::vector<std::byte>& address) {
    const std::string who = id == 0 ? std::string("a worker without --id") : "worker " + std::to_string(id);
    if (token != token_) refuse("wrong job token (id " + std::to_string(id) + ")", who);
    const std::uint32_t given = admissions_.id_for(id, resume);
    if (given == 0)
      refuse(id == 0 ? "a worker without an id, and the job is full" : "unknown worker id " + std::to_string(id), who);
    BootReply r;
    r.id = given;
    r.address = address_;
    for (auto& b : r.ticket) b = static_cast<std::byte>(net_.world_.rng()());
    for (auto& b : r.key) b = static_cast<std::byte>(net_.world_.rng()());
    admissions_.record(given, {address, r.ticket, resume, r.key});
    return r;
  }

 private:
  [[noreturn]] void refuse(const std::string& why, const std::string& who) {
    ++refused_;
    refusals_.push_back("refused a connection from a simulated worker: " + why);
    throw TokenRefused(who + ": the coordinator refused it");
  }

  SimBootNetwork& net_;
  std::uint16_t port_;
  World::Proc owner_;  // the coordinator's process
  std::uint64_t token_;
  std::vector<std::byte> address_;
  Admissions admissions_;
  std::vector<std::string> refusals_;
  std::uint64_t refused_ = 0;
};

std::unique_ptr<FrontDoor> SimBootNetwork::open(const std::string& ip, std::uint16_t port, std::uint64_t token,
                                                std::uint32_t max_id, std::vector<std::byte> address,
                                                std::uint32_t max_assigned) {
  if (port == 0) {
    while (doors_.count(next_port_)) ++next_port_;
    port = next_port_++;
  }
  if (doors_.count(port)) throw InputError(ip + ":" + std::to_string(port) + ": address in use");
  return std::make_unique<Door>(*this, port, token, max_id, std::move(address), max_assigned);
}

// A round trip of the link, then the door's verdict; nothing listening is
// NotListening at once, as a refused TCP connection is. A connection across
// a partition (this process or the door's cut off) waits for the heal
// first, or fails as boot_connect does at its timeout.
BootReply SimBootNetwork::connect(const std::string& ip, std::uint16_t port, std::uint64_t token, std::uint32_t id,
                                  bool resume, const std::vector<std::byte>& address, std::chrono::milliseconds timeout) {
  const auto now = world_.now();
  auto heal = world_.cut_off_until(world_.current());
  if (const auto door = doors_.find(port); door != doors_.end())
    heal = std::max(heal, world_.cut_off_until(door->second->owner()));
  if (heal > now) {
    if (heal - now >= timeout) {
      sleep_for(timeout);
      throw InputError("worker " + std::to_string(id) + ": no handshake with the coordinator at " + ip + ":" +
                       std::to_string(port) + " in " + std::to_string(timeout.count()) + " ms (cut off)");
    }
    sleep_for(heal - now);
  }
  sleep_for(2 * world_.link().latency);
  auto it = doors_.find(port);
  if (it == doors_.end()) throw NotListening("nothing listens at " + ip + ":" + std::to_string(port));
  return it->second->answer(token, id, resume, address);
}

}  // namespace accel::cluster::sim
