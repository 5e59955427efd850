// Transport between processes (fork): a peer killed with SIGKILL makes
// pending and new requests fail within a bounded time, and bulk transfers
// cross process boundaries over shared memory with both protocols.
#include <gtest/gtest.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstring>
#include <numeric>
#include <thread>

#include "accel/transport/ucx_transport.hpp"

namespace accel::transport {
namespace {

using namespace std::chrono_literals;
using clock_type = std::chrono::steady_clock;
constexpr std::uint64_t kToken = 0xabad1deaull;
constexpr std::uint16_t kHello = 1, kTicket = 2;

Options opts(const std::string& tls, std::uint32_t id) {
  Options o;
  o.job_token = kToken;
  o.self_id = id;
  o.tls = tls;
  o.keepalive_interval = 300ms;
  o.peer_failure_detection = tls == "tcp";
  o.shutdown_timeout = 500ms;
  return o;
}

bool read_exact(int fd, void* buf, std::size_t n, std::chrono::milliseconds timeout) {
  auto* p = static_cast<char*>(buf);
  const auto deadline = clock_type::now() + timeout;
  while (n > 0) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - clock_type::now()).count();
    if (left <= 0) return false;
    pollfd pfd{fd, POLLIN, 0};
    if (poll(&pfd, 1, static_cast<int>(left)) <= 0) return false;
    const ssize_t got = read(fd, p, n);
    if (got <= 0) return false;
    p += got;
    n -= static_cast<std::size_t>(got);
  }
  return true;
}

void write_blob(int fd, const std::vector<std::byte>& b) {
  const std::uint32_t n = static_cast<std::uint32_t>(b.size());
  if (write(fd, &n, 4) != 4 || write(fd, b.data(), n) != static_cast<ssize_t>(n)) _exit(10);
}

std::vector<std::byte> read_blob(int fd) {
  std::uint32_t n = 0;
  if (!read_exact(fd, &n, 4, 10s) || n > 65536) return {};
  std::vector<std::byte> b(n);
  if (!read_exact(fd, b.data(), n, 10s)) return {};
  return b;
}

// Waits for a child, killing it if it outlives the timeout; returns its status.
int reap(pid_t pid, std::chrono::seconds timeout) {
  const auto deadline = clock_type::now() + timeout;
  int status = 0;
  while (waitpid(pid, &status, WNOHANG) == 0) {
    if (clock_type::now() > deadline) {
      kill(pid, SIGKILL);
      waitpid(pid, &status, 0);
      return -1;
    }
    std::this_thread::sleep_for(10ms);
  }
  return status;
}

std::vector<std::byte> u64(std::uint64_t v) {
  std::vector<std::byte> b(8);
  std::memcpy(b.data(), &v, 8);
  return b;
}

// The child: listens on an ephemeral loopback port, reports it through the
// pipe, answers a hello with a bulk ticket, then stops progressing (so the
// parent's rendezvous stays pending) until it is killed. Bounded: 30 s.
[[noreturn]] void stalling_receiver(int fd) {
  try {
    UcxTransport t(opts("tcp", 1));
    const std::uint16_t port = t.listen("127.0.0.1", 0);
    if (write(fd, &port, sizeof port) != sizeof port) _exit(2);
    auto hello = t.receive(20s);
    if (!hello || hello->message.payload.size() != 8) _exit(3);
    std::uint64_t n = 0;
    std::memcpy(&n, hello->message.payload.data(), 8);
    std::vector<std::byte> buf(n);
    BulkReceiveHandle h = t.expect(buf.data(), n);
    auto c = t.send(hello->from, kTicket, 0, h.ticket);
    t.wait(c, 10s);
    std::this_thread::sleep_for(30s);
  } catch (...) {
    _exit(4);
  }
  _exit(0);
}

TEST(TransportProcess, KilledPeerFailsPendingAndNewRequests) {
  int fds[2];
  ASSERT_EQ(pipe(fds), 0);
  const pid_t pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    close(fds[0]);
    stalling_receiver(fds[1]);
  }
  close(fds[1]);
  std::uint16_t port = 0;
  ASSERT_TRUE(read_exact(fds[0], &port, sizeof port, 20s));
  close(fds[0]);

  {
    UcxTransport t(opts("tcp", 0));
    const EndpointId ep = t.connect("127.0.0.1", port);
    const std::size_t n = 256u << 20;
    auto hello = t.send(ep, kHello, 0, u64(n));
    ASSERT_TRUE(t.wait(hello, 10s));
    ASSERT_TRUE(hello->ok()) << hello->error;
    auto ticket = t.receive(20s);
    ASSERT_TRUE(ticket);
    ASSERT_EQ(ticket->message.header.type, kTicket);

    std::vector<std::byte> src(n, std::byte{1});
    auto push = t.push(ep, ticket->message.payload, src.data(), n, MemoryType::Host, BulkProtocol::ActiveMessage);
    t.progress_until([] { return false; }, 300ms);
    EXPECT_FALSE(push->done) << "the stalled receiver should hold the rendezvous";

    const auto killed = clock_type::now();
    ASSERT_EQ(kill(pid, SIGKILL), 0);
    ASSERT_TRUE(t.wait(push, 15s)) << "a pending push to a dead peer must fail, not hang";
    const double seconds = std::chrono::duration<double>(clock_type::now() - killed).count();
    EXPECT_FALSE(push->ok());
    std::cout << "pending push failed " << seconds << " s after SIGKILL: " << push->error << "\n";
    EXPECT_TRUE(t.progress_until([&] { return !t.alive(ep); }, 15s));

    auto late = t.send(ep, kHello, 1, u64(1));
    ASSERT_TRUE(t.wait(late, 5s));
    EXPECT_FALSE(late->ok());
  }
  EXPECT_NE(reap(pid, 10s), -1);
}

// The child receives one bulk transfer over shared memory and checks the
// bytes; its exit status is the verdict. Addresses are relayed by pipes.
[[noreturn]] void shm_receiver(int to_parent, int from_parent, std::size_t n) {
  try {
    UcxTransport t(opts("posix,cma,self", 1));
    write_blob(to_parent, t.worker_address());
    const auto parent_address = read_blob(from_parent);
    if (parent_address.empty()) _exit(2);
    const EndpointId ep = t.connect(parent_address);
    std::vector<std::uint32_t> buf(n / 4, 0);
    BulkReceiveHandle h = t.expect(buf.data(), n, MemoryType::Host, ep);
    auto c = t.send(ep, kTicket, 0, h.ticket);
    if (!t.wait(h.completion, 60s) || !h.completion->ok()) _exit(3);
    for (std::size_t i = 0; i < buf.size(); ++i)
      if (buf[i] != static_cast<std::uint32_t>(i * 2654435761u)) _exit(4);
    t.wait(c, 5s);
    t.progress_until([] { return false; }, 200ms);  // let the sender see its completion
  } catch (...) {
    _exit(5);
  }
  _exit(0);
}

class TransportProcessBulk : public ::testing::TestWithParam<BulkProtocol> {};

TEST_P(TransportProcessBulk, SharedMemoryAcrossProcesses) {
  const std::size_t n = 64u << 20;
  int up[2], down[2];
  ASSERT_EQ(pipe(up), 0);
  ASSERT_EQ(pipe(down), 0);
  const pid_t pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    close(up[0]);
    close(down[1]);
    shm_receiver(up[1], down[0], n);
  }
  close(up[1]);
  close(down[0]);
  {
    Options o = opts("posix,cma,self", 0);
    o.block_bytes = 16u << 20;
    UcxTransport t(o);
    const auto child_address = read_blob(up[0]);
    ASSERT_FALSE(child_address.empty());
    const EndpointId ep = t.connect(child_address);
    write_blob(down[1], t.worker_address());
    auto ticket = t.receive(20s);
    ASSERT_TRUE(ticket);
    std::vector<std::uint32_t> src(n / 4);
    for (std::size_t i = 0; i < src.size(); ++i) src[i] = static_cast<std::uint32_t>(i * 2654435761u);
    auto c = t.push(ep, ticket->message.payload, src.data(), n, MemoryType::Host, GetParam());
    ASSERT_TRUE(t.wait(c, 60s));
    EXPECT_TRUE(c->ok()) << c->error;
    EXPECT_EQ(c->protocol, GetParam());
    const int status = reap(pid, 60s);
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "child status " << status;
  }
  close(up[0]);
  close(down[1]);
}

INSTANTIATE_TEST_SUITE_P(Protocols, TransportProcessBulk,
                         ::testing::Values(BulkProtocol::Put, BulkProtocol::ActiveMessage),
                         [](const auto& info) { return std::string(to_string(info.param)); });

}  // namespace
}  // namespace accel::transport
