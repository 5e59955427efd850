// A hostile participant for the cluster tests: connects to a running
// coordinator's listener and sends what the coordinator must refuse -- a
// wrong job token, an oversized message, truncated and garbage payloads --
// then exits. The job must go on as if nothing happened.
#include <chrono>
#include <cstdlib>
#include <iostream>
#include <string>
#include <vector>

#include "accel/transport/transport.hpp"
#include "protocol.hpp"

using namespace accel;

namespace {

void attack(std::uint64_t token, std::uint32_t max_payload, std::uint16_t type, std::uint64_t iteration,
            std::size_t bytes, const std::string& ip, std::uint16_t port) {
  transport::Options o;
  o.job_token = token;
  o.self_id = 3;  // impersonates a worker
  o.incarnation = 99;
  o.max_control_payload = max_payload;
  o.shutdown_timeout = std::chrono::milliseconds(500);
  transport::Transport t(o);
  const auto ep = t.connect(ip, port);
  std::vector<std::byte> payload(bytes, std::byte{0x5a});
  auto c = t.send(ep, type, iteration, payload);
  t.wait(c, std::chrono::milliseconds(2000));
  std::cout << "sent type " << type << " (" << bytes << " bytes, token " << token << "): "
            << (c->ok() ? "delivered" : c->error) << "\n";
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 5) {
    std::cerr << "usage: cluster_intruder IP PORT JOB_TOKEN ITERATION\n";
    return 2;
  }
  const std::string ip = argv[1];
  const auto port = static_cast<std::uint16_t>(std::atoi(argv[2]));
  const std::uint64_t token = std::strtoull(argv[3], nullptr, 10);
  const std::uint64_t it = std::strtoull(argv[4], nullptr, 10);
  attack(token + 1, transport::kDefaultMaxControlPayload, cluster::kContribution, it, 64, ip, port);           // wrong token
  attack(token, 4u << 20, cluster::kContribution, it, 2u << 20, ip, port);                                     // oversized
  attack(token, transport::kDefaultMaxControlPayload, cluster::kContribution, it, 13, ip, port);               // truncated
  attack(token, transport::kDefaultMaxControlPayload, cluster::kHello, 0, 5, ip, port);                   // garbage hello
  attack(token, transport::kDefaultMaxControlPayload, cluster::kResync, it, 0, ip, port);                 // not recovering
  return 0;
}
