// Two UCP workers in one process, talking over loopback: listener and
// worker-address connections, control messages, bulk transfers with both
// protocols over tcp and shared memory, and hostile input.
#include <gtest/gtest.h>

#include <numeric>

#include "accel/error.hpp"
#include "accel/log.hpp"
#include "accel/transport/ucx_transport.hpp"

namespace accel::transport {
namespace {

using namespace std::chrono_literals;
constexpr std::uint64_t kToken = 0xfeedface12345678ull;
const std::string kShm = "posix,cma,self";

Options opts(const std::string& tls, std::uint32_t id, std::uint64_t token = kToken) {
  Options o;
  o.job_token = token;
  o.self_id = id;
  o.incarnation = 1;
  o.tls = tls;
  o.keepalive_interval = 500ms;
  o.shutdown_timeout = 300ms;  // the peer in this thread does not progress while one shuts down
  // UCX 1.13 has no peer-failure handling over posix shared memory.
  o.peer_failure_detection = tls == "tcp";
  return o;
}

// Progresses both workers (they share this thread) until pred() or timeout.
bool pump(Transport& a, Transport& b, const std::function<bool()>& pred, std::chrono::seconds timeout = 20s) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (!pred()) {
    if (std::chrono::steady_clock::now() > deadline) return false;
    a.progress();
    b.progress();
  }
  return true;
}

std::optional<Received> receive_on(Transport& rx, Transport& other, std::chrono::seconds timeout = 10s) {
  std::optional<Received> got;
  pump(rx, other, [&] { return (got = rx.poll()).has_value(); }, timeout);
  return got;
}

std::vector<std::byte> text(const std::string& s) {
  const auto* p = reinterpret_cast<const std::byte*>(s.data());
  return {p, p + s.size()};
}

// Collects transport log lines during a test.
struct LogCapture {
  std::vector<std::string> lines;
  LogCapture() {
    accel::log::set_sink([this](accel::log::Level, std::string_view source, std::string_view m) {
      if (source == "accel transport") lines.emplace_back(m);
    });
  }
  ~LogCapture() { accel::log::set_sink(nullptr); }
  bool contains(const std::string& s) const {
    return std::any_of(lines.begin(), lines.end(), [&](const auto& l) { return l.find(s) != std::string::npos; });
  }
};

TEST(TransportLoopback, ListenerConnectAndControlMessagesBothWays) {
  UcxTransport server(opts("tcp", 0)), client(opts("tcp", 7));
  const std::uint16_t port = server.listen("127.0.0.1", 0);
  ASSERT_GT(port, 0);
  const EndpointId ep = client.connect("127.0.0.1", port);
  for (int i = 0; i < 10; ++i) {
    auto c = client.send(ep, 5, 100 + i, text("hello " + std::to_string(i)));
    ASSERT_TRUE(pump(server, client, [&] { return c->done; })) << "send " << i;
    ASSERT_TRUE(c->ok()) << c->error;
  }
  std::vector<EndpointId> accepted;
  for (int i = 0; i < 10; ++i) {
    auto r = receive_on(server, client);
    ASSERT_TRUE(r);
    EXPECT_EQ(r->message.header.type, 5);
    EXPECT_EQ(r->message.header.sender, 7u);
    EXPECT_EQ(r->message.header.incarnation, 1u);
    EXPECT_EQ(r->message.header.iteration, 100u + i);  // in order on one endpoint
    EXPECT_EQ(r->message.payload, text("hello " + std::to_string(i)));
    if (i == 0) {
      accepted = server.take_accepted();
      ASSERT_EQ(accepted.size(), 1u);
      EXPECT_EQ(r->from, accepted[0]);
    }
  }
  // Reply on the accepted endpoint.
  auto c = server.send(accepted[0], 6, 1, text("welcome"));
  auto r = receive_on(client, server);
  ASSERT_TRUE(r);
  EXPECT_EQ(r->from, ep);
  EXPECT_EQ(r->message.header.sender, 0u);
  EXPECT_EQ(r->message.payload, text("welcome"));
  EXPECT_TRUE(client.alive(ep));
  EXPECT_THROW(client.send(ep, kFirstInternalType, 0, {}), std::invalid_argument);
  EXPECT_THROW(client.send(ep, 1, 0, std::vector<std::byte>(kDefaultMaxControlPayload + 1)), std::invalid_argument);
  EXPECT_THROW(client.send(12345, 1, 0, {}), std::invalid_argument);
}

TEST(TransportLoopback, WorkerAddressConnection) {
  UcxTransport a(opts(kShm, 1)), b(opts(kShm, 2));
  const EndpointId ep = b.connect(a.worker_address());
  auto c = b.send(ep, 9, 3, text("over shared memory"));
  auto r = receive_on(a, b);
  ASSERT_TRUE(r);
  EXPECT_TRUE(c->ok()) << c->error;
  EXPECT_EQ(r->message.header.sender, 2u);
  EXPECT_EQ(r->from, kNoEndpoint);  // b connected by address: a has no endpoint of its own behind it
  EXPECT_EQ(b.resolve_protocol(ep), BulkProtocol::Put);
  EXPECT_THROW(b.connect(std::vector<std::byte>{}), InputError);
}

TEST(TransportLoopback, WrongTokenIsDroppedAndLogged) {
  LogCapture logs;
  UcxTransport server(opts("tcp", 0)), intruder(opts("tcp", 3, kToken ^ 1));
  const EndpointId ep = intruder.connect("127.0.0.1", server.listen("127.0.0.1", 0));
  auto c = intruder.send(ep, 5, 0, text("let me in"));
  ASSERT_TRUE(pump(server, intruder, [&] { return server.stats().messages_dropped == 1; }));
  EXPECT_FALSE(server.poll());
  EXPECT_EQ(server.stats().messages_received, 0u);
  EXPECT_TRUE(logs.contains("wrong job token"));
}

TEST(TransportLoopback, OversizedMessageIsDropped) {
  LogCapture logs;
  Options big = opts("tcp", 3);
  big.max_control_payload = 4u << 20;
  UcxTransport server(opts("tcp", 0)), sender(big);
  const EndpointId ep = sender.connect("127.0.0.1", server.listen("127.0.0.1", 0));
  auto c = sender.send(ep, 5, 0, std::vector<std::byte>(2u << 20));
  auto ok = sender.send(ep, 5, 1, text("small"));
  auto r = receive_on(server, sender);
  ASSERT_TRUE(r);
  EXPECT_EQ(r->message.header.iteration, 1u);
  EXPECT_EQ(server.stats().messages_dropped, 1u);
  EXPECT_TRUE(logs.contains("oversized"));
}

struct BulkCase {
  std::string tls;
  BulkProtocol protocol;
};

class TransportBulk : public ::testing::TestWithParam<BulkCase> {};

TEST_P(TransportBulk, HundredMiBInSixteenMiBBlocks) {
  const BulkCase& bc = GetParam();
  Options o = opts(bc.tls, 1);
  o.block_bytes = 16u << 20;
  UcxTransport rx(opts(bc.tls, 0)), tx(o);
  EndpointId ep;
  if (bc.tls == "tcp")
    ep = tx.connect("127.0.0.1", rx.listen("127.0.0.1", 0));
  else
    ep = tx.connect(rx.worker_address());

  const std::size_t n = 100u << 20;
  std::vector<std::uint32_t> src(n / 4), dst(n / 4, 0);
  std::iota(src.begin(), src.end(), 0x9e3779b9u);
  BulkReceiveHandle h = rx.expect(dst.data(), n);
  auto c = tx.push(ep, h.ticket, src.data(), n, MemoryType::Host, bc.protocol);
  ASSERT_TRUE(pump(rx, tx, [&] { return c->done && h.completion->done; }, 120s));
  ASSERT_TRUE(c->ok()) << c->error;
  ASSERT_TRUE(h.completion->ok()) << h.completion->error;
  EXPECT_EQ(c->protocol, bc.protocol);
  EXPECT_EQ(h.completion->protocol, bc.protocol);
  EXPECT_TRUE(src == dst);
}

INSTANTIATE_TEST_SUITE_P(Protocols, TransportBulk,
                         ::testing::Values(BulkCase{"tcp", BulkProtocol::ActiveMessage},
                                           BulkCase{"tcp", BulkProtocol::Put},
                                           BulkCase{kShm, BulkProtocol::ActiveMessage},
                                           BulkCase{kShm, BulkProtocol::Put}),
                         [](const auto& info) {
                           return std::string(info.param.tls == "tcp" ? "tcp_" : "shm_") +
                                  to_string(info.param.protocol);
                         });

TEST(TransportLoopback, AutoPicksAmOverTcpAndUnevenTail) {
  Options o = opts("tcp", 1);
  o.block_bytes = 1u << 20;
  UcxTransport rx(opts("tcp", 0)), tx(o);
  const EndpointId ep = tx.connect("127.0.0.1", rx.listen("127.0.0.1", 0));
  EXPECT_EQ(tx.resolve_protocol(ep), BulkProtocol::ActiveMessage);
  const std::size_t n = (3u << 20) + 12345;  // a short last block
  std::vector<std::byte> src(n), dst(n);
  for (std::size_t i = 0; i < n; ++i) src[i] = static_cast<std::byte>(i * 31 + 7);
  BulkReceiveHandle h = rx.expect(dst.data(), n);
  auto c = tx.push(ep, h.ticket, src.data(), n);
  ASSERT_TRUE(pump(rx, tx, [&] { return c->done && h.completion->done; }));
  ASSERT_TRUE(c->ok()) << c->error;
  ASSERT_TRUE(h.completion->ok()) << h.completion->error;
  EXPECT_EQ(c->protocol, BulkProtocol::ActiveMessage);
  EXPECT_TRUE(src == dst);
}

// A push with a window of two blocks tells of each block once it is sent:
// every block exactly once, whole, and the data arrive.
TEST(TransportLoopback, PushTellsOfEachBlockSentWithinItsWindow) {
  for (const BulkProtocol protocol : {BulkProtocol::ActiveMessage, BulkProtocol::Put}) {
    Options o = opts(kShm, 1);
    o.block_bytes = 1u << 20;
    UcxTransport rx(opts(kShm, 0)), tx(o);
    const EndpointId ep = tx.connect(rx.worker_address());
    const std::size_t n = (9u << 20) + 777;
    std::vector<std::byte> src(n), dst(n);
    for (std::size_t i = 0; i < n; ++i) src[i] = static_cast<std::byte>(i * 13 + 1);
    std::vector<int> told(10, 0);
    std::size_t bytes = 0;
    BulkReceiveHandle h = rx.expect(dst.data(), n);
    auto c = tx.push(ep, h.ticket, src.data(), n, MemoryType::Host, protocol, 2u << 20,
                     [&](std::size_t off, std::size_t len) {
                       ++told[off >> 20];
                       bytes += len;
                       EXPECT_EQ(off % (1u << 20), 0u);
                     });
    ASSERT_TRUE(pump(rx, tx, [&] { return c->done && h.completion->done; }));
    ASSERT_TRUE(c->ok()) << c->error;
    EXPECT_EQ(bytes, n) << to_string(protocol);
    EXPECT_EQ(told, std::vector<int>(10, 1)) << to_string(protocol);
    EXPECT_TRUE(src == dst);
  }
}

TEST(TransportLoopback, BadTicketsAreInputErrors) {
  UcxTransport rx(opts("tcp", 0)), tx(opts("tcp", 1));
  const EndpointId ep = tx.connect("127.0.0.1", rx.listen("127.0.0.1", 0));
  std::vector<std::byte> buf(4096);
  EXPECT_THROW(tx.push(ep, text("not a ticket"), buf.data(), buf.size()), InputError);
  BulkReceiveHandle h = rx.expect(buf.data(), buf.size());
  EXPECT_THROW(tx.push(ep, h.ticket, buf.data(), buf.size() - 1), InputError);
  rx.forget(h.transfer_id);
  EXPECT_TRUE(h.completion->done);
  EXPECT_FALSE(h.completion->ok());
}

TEST(TransportLoopback, BlocksForAnUnknownTransferAreRejected) {
  LogCapture logs;
  UcxTransport rx(opts("tcp", 0)), tx(opts("tcp", 1));
  const EndpointId ep = tx.connect("127.0.0.1", rx.listen("127.0.0.1", 0));
  std::vector<std::byte> buf(1u << 20), src(1u << 20);
  BulkReceiveHandle h = rx.expect(buf.data(), buf.size());
  rx.forget(h.transfer_id);  // the sender now pushes into a transfer that no longer exists
  auto c = tx.push(ep, h.ticket, src.data(), src.size(), MemoryType::Host, BulkProtocol::ActiveMessage);
  ASSERT_TRUE(pump(rx, tx, [&] { return c->done; }));
  EXPECT_FALSE(c->ok());
  EXPECT_EQ(rx.stats().blocks_rejected, 1u);
  EXPECT_TRUE(logs.contains("no such transfer"));
}

TEST(TransportLoopback, ConnectionRefusedFailsTheEndpoint) {
  std::uint16_t port;
  {
    UcxTransport gone(opts("tcp", 0));
    port = gone.listen("127.0.0.1", 0);
  }
  UcxTransport tx(opts("tcp", 1));
  const EndpointId ep = tx.connect("127.0.0.1", port);
  auto c = tx.send(ep, 5, 0, text("anyone?"));
  ASSERT_TRUE(tx.wait(c, 10s));
  EXPECT_FALSE(c->ok());
  EXPECT_TRUE(tx.progress_until([&] { return !tx.alive(ep); }, 10s));
  EXPECT_FALSE(tx.endpoint_error(ep).empty());
  auto again = tx.send(ep, 5, 0, text("still?"));
  EXPECT_TRUE(again->done);
  EXPECT_FALSE(again->ok());
}

}  // namespace
}  // namespace accel::transport
