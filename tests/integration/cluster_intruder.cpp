// A hostile participant for the cluster tests: knocks at a running
// coordinator's front door with raw bytes and with a wrong token, then, as
// an insider holding the token, sends what the coordinator must refuse -- a
// wrong token in a message header, an oversized message, truncated and
// garbage payloads -- then exits. The job must go on as if nothing happened.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <iostream>
#include <string>
#include <vector>

#include "accel/transport/ucx_transport.hpp"
#include "bootstrap.hpp"
#include "protocol.hpp"

using namespace accel;

namespace {

// Bytes that are not a worker's at the coordinator's front door: the 9-byte
// header and 100-byte body that abort UCX 1.13's sockaddr listener.
void raw_bytes(const std::string& ip, std::uint16_t port) {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in sa{};
  sa.sin_family = AF_INET;
  sa.sin_port = htons(port);
  ::inet_pton(AF_INET, ip.c_str(), &sa.sin_addr);
  if (::connect(fd, reinterpret_cast<sockaddr*>(&sa), sizeof sa) == 0) {
    std::vector<unsigned char> b(109, 0);
    b[0] = 6;  // little-endian u64 6, a zero byte, then 100 bytes
    ::send(fd, b.data(), b.size(), MSG_NOSIGNAL);
    std::cout << "sent 109 raw bytes to the front door\n";
  }
  ::close(fd);
}

// A handshake with the wrong token: refused before any UCX address is given.
void wrong_token(std::uint64_t token, const std::string& ip, std::uint16_t port) {
  transport::Options o;
  o.job_token = token;
  transport::UcxTransport t(o);
  try {
    cluster::boot_connect(ip, port, token, 1, false, t.worker_address(), std::chrono::milliseconds(3000));
    std::cout << "handshake with token " << token << ": ACCEPTED\n";
  } catch (const std::exception& e) {
    std::cout << "handshake with token " << token << ": " << e.what() << "\n";
  }
}

// An insider (it holds the token, impersonates worker `id`) sends what the
// coordinator must still refuse over UCX.
void attack(std::uint64_t token, std::uint64_t header_token, std::uint32_t max_payload, std::uint16_t type,
            std::uint64_t iteration, std::size_t bytes, const std::string& ip, std::uint16_t port,
            int copies = 1, std::uint32_t incarnation = 99) {
  transport::Options o;
  o.job_token = header_token;
  o.self_id = 2;  // impersonates a worker
  o.incarnation = incarnation;
  o.max_control_payload = max_payload;
  o.shutdown_timeout = std::chrono::milliseconds(500);
  transport::UcxTransport t(o);
  const auto boot =
      cluster::boot_connect(ip, port, token, o.self_id, false, t.worker_address(), std::chrono::milliseconds(3000));
  const auto ep = t.connect(boot.address);
  std::vector<std::byte> payload(bytes, std::byte{0x5a});
  transport::CompletionRef c;
  for (int k = 0; k < copies; ++k) c = t.send(ep, type, iteration, payload);
  t.wait(c, std::chrono::milliseconds(2000));
  std::cout << "sent type " << type << " (" << bytes << " bytes, header token " << header_token << "): "
            << (c->ok() ? "delivered" : c->error) << "\n";
}

// An insider who passed the handshake as worker 2 (holding the token) sends
// well-formed k-means contributions of the next 200 rounds "from" worker 2,
// incarnation guessed right, with sums of 1e30: unsealed, then sealed with
// the key of its own handshake. Neither verifies under the real worker 2's
// key, so neither may count (the job's centroids stay the failure-free ones).
void forged_contribution(std::uint64_t token, std::uint64_t iteration, std::int64_t k, std::int64_t d,
                         const std::string& ip, std::uint16_t port) {
  transport::Options o;
  o.job_token = token;
  o.self_id = 2;
  o.incarnation = 1;
  o.shutdown_timeout = std::chrono::milliseconds(500);
  transport::UcxTransport t(o);
  const auto boot =
      cluster::boot_connect(ip, port, token, o.self_id, false, t.worker_address(), std::chrono::milliseconds(3000));
  const auto ep = t.connect(boot.address);
  cluster::Out step;
  step.array(std::vector<double>(static_cast<std::size_t>(k * d), 1e30));
  step.array(std::vector<std::int64_t>(static_cast<std::size_t>(k), 1));
  step.put(0.0);
  cluster::Contribution c;
  c.data = std::move(step.b);
  const auto payload = cluster::encode(c);
  for (const transport::MacKey* key : {static_cast<const transport::MacKey*>(nullptr), &boot.key}) {
    transport::CompletionRef done;
    for (std::uint64_t r = iteration; r < iteration + 200; ++r) done = t.send(ep, cluster::kContribution, r, payload, key);
    t.wait(done, std::chrono::milliseconds(2000));
    std::cout << "sent a forged contribution of worker 2, " << (key ? "sealed with the intruder's own key" : "unsealed")
              << ": " << (done->ok() ? "delivered" : done->error) << "\n";
  }
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
  const auto max = transport::kDefaultMaxControlPayload;
  raw_bytes(ip, port);
  wrong_token(token + 1, ip, port);
  attack(token, token + 1, max, cluster::kContribution, it, 64, ip, port);          // wrong token in the header
  attack(token, token, 4u << 20, cluster::kContribution, it, 2u << 20, ip, port);  // oversized
  attack(token, token, max, cluster::kContribution, it, 13, ip, port);             // truncated
  attack(token, token, max, cluster::kHello, 0, 5, ip, port);                      // garbage hello
  attack(token, token, max, cluster::kResync, it, 0, ip, port);                    // not recovering
  // Worker 2's incarnation guessed right: 200 messages of a round far
  // ahead, which the coordinator holds for that round up to its bound.
  attack(token, token, max, cluster::kContribution, it + 1000000, 1024, ip, port, 200, 1);
  forged_contribution(token, it, 8, 8, ip, port);
  return 0;
}
