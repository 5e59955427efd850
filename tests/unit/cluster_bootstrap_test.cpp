// The cluster's front door (bootstrap.hpp): a worker with the token gets the
// coordinator's address and a ticket the coordinator admits once; a wrong
// token, an unknown id, raw bytes and a stalled client are refused without
// stopping the door; a coordinator that cannot prove it holds the token is
// refused by the worker.
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <filesystem>
#include <thread>

#include "accel/error.hpp"
#include "bootstrap.hpp"
#include "errors.hpp"
#include "job_token.hpp"

using namespace accel;
using namespace accel::cluster;
using namespace std::chrono_literals;

namespace {

std::vector<std::byte> bytes_of(const std::string& s) {
  std::vector<std::byte> b;
  for (char c : s) b.push_back(static_cast<std::byte>(c));
  return b;
}

int connect_to(std::uint16_t port) {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in sa{};
  sa.sin_family = AF_INET;
  sa.sin_port = htons(port);
  ::inet_pton(AF_INET, "127.0.0.1", &sa.sin_addr);
  EXPECT_EQ(::connect(fd, reinterpret_cast<sockaddr*>(&sa), sizeof sa), 0);
  return fd;
}

bool refused_with(BootServer& s, const std::string& what) {
  for (int i = 0; i < 100; ++i) {  // the door's thread says it within its 2 s bound
    for (const auto& line : s.refusals())
      if (line.find(what) != std::string::npos) return true;
    std::this_thread::sleep_for(50ms);
  }
  return false;
}

}  // namespace

TEST(Bootstrap, WorkerWithTheTokenGetsAddressAndOneTicket) {
  BootServer door("127.0.0.1", 0, 0x5eed, 2, bytes_of("coordinator-ucx"));
  const auto reply = boot_connect("127.0.0.1", door.port(), 0x5eed, 2, true, bytes_of("worker-2-ucx"), 3000ms);
  EXPECT_EQ(reply.address, bytes_of("coordinator-ucx"));
  Ticket forged = reply.ticket;
  forged[0] ^= std::byte{1};
  EXPECT_FALSE(door.admit(2, forged).has_value());
  EXPECT_FALSE(door.admit(1, reply.ticket).has_value());  // another id's ticket
  const auto a = door.admit(2, reply.ticket);
  ASSERT_TRUE(a.has_value());
  EXPECT_EQ(a->address, bytes_of("worker-2-ucx"));
  EXPECT_TRUE(a->resume);
  EXPECT_FALSE(door.admit(2, reply.ticket).has_value());  // once per handshake
  EXPECT_EQ(door.address_of(2), bytes_of("worker-2-ucx"));
}

TEST(Bootstrap, WrongTokenAndUnknownIdAreRefused) {
  BootServer door("127.0.0.1", 0, 7, 2, bytes_of("c"));
  EXPECT_THROW(boot_connect("127.0.0.1", door.port(), 8, 1, false, bytes_of("w"), 3000ms), TokenRefused);
  EXPECT_TRUE(refused_with(door, "wrong job token"));
  EXPECT_THROW(boot_connect("127.0.0.1", door.port(), 7, 3, false, bytes_of("w"), 3000ms), TokenRefused);
  EXPECT_TRUE(refused_with(door, "unknown worker id 3"));
  EXPECT_FALSE(door.address_of(3).has_value());
}

TEST(Bootstrap, RawBytesAndStalledClientsDoNotStopTheDoor) {
  BootServer door("127.0.0.1", 0, 7, 2, bytes_of("c"));
  {
    const int fd = connect_to(door.port());
    std::vector<unsigned char> b(109, 0);  // the packet that aborts UCX 1.13's listener
    b[0] = 6;
    ::send(fd, b.data(), b.size(), MSG_NOSIGNAL);
    ::close(fd);
  }
  EXPECT_TRUE(refused_with(door, "refused a connection from 127.0.0.1"));  // not a worker, or gone before the greeting
  const int stalled = connect_to(door.port());  // says nothing
  const auto t0 = std::chrono::steady_clock::now();
  const auto reply = boot_connect("127.0.0.1", door.port(), 7, 1, false, bytes_of("w"), 5000ms);
  EXPECT_LT(std::chrono::steady_clock::now() - t0, 1s);  // served beside the stalled one, not after it
  EXPECT_TRUE(door.admit(1, reply.ticket).has_value());
  EXPECT_TRUE(refused_with(door, "timed out"));
  ::close(stalled);
}

// Issue 34: twenty idle connections and fifty that send a byte now and
// then held a serial door for 2 s each, and a worker's handshake timed out.
// The door serves them all at once: the worker is answered at once.
TEST(Bootstrap, IdleAndSlowConnectionsDoNotHoldTheDoor) {
  BootServer door("127.0.0.1", 0, 7, 2, bytes_of("c"));
  std::vector<int> held;
  for (int i = 0; i < 20; ++i) held.push_back(connect_to(door.port()));
  for (int i = 0; i < 50; ++i) {
    held.push_back(connect_to(door.port()));
    ::send(held.back(), "ACC", 3, MSG_NOSIGNAL);  // the start of a greeting, and then nothing
  }
  for (std::uint32_t id : {1u, 2u}) {
    const auto t0 = std::chrono::steady_clock::now();
    const auto reply = boot_connect("127.0.0.1", door.port(), 7, id, false, bytes_of("w"), 3000ms);
    EXPECT_LT(std::chrono::steady_clock::now() - t0, 500ms) << "worker " << id;
    EXPECT_TRUE(door.admit(id, reply.ticket).has_value());
  }
  for (int fd : held) ::close(fd);
}

// Past the cap on unauthenticated connections from one address, each new
// one drops the oldest: a flood cannot keep a worker's connection out, and
// the flood's own first connections are closed.
TEST(Bootstrap, PastTheCapTheOldestUnauthenticatedIsDropped) {
  BootServer door("127.0.0.1", 0, 7, 1, bytes_of("c"));
  std::vector<int> held;
  for (int i = 0; i < 300; ++i) held.push_back(connect_to(door.port()));
  const auto reply = boot_connect("127.0.0.1", door.port(), 7, 1, false, bytes_of("w"), 3000ms);
  EXPECT_TRUE(door.admit(1, reply.ticket).has_value());
  // The first connection was dropped: at most the greeting (magic and
  // nonce, if it went out before the drop), then its end, well before its
  // own 2 s were up.
  std::vector<char> buf(64);
  ::timeval tv{1, 0};
  ::setsockopt(held.front(), SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  ssize_t got = 0, total = 0;
  while ((got = ::recv(held.front(), buf.data(), buf.size(), 0)) > 0) total += got;
  EXPECT_TRUE(got == 0 || (got < 0 && errno == ECONNRESET)) << "still open: " << std::strerror(errno);
  EXPECT_TRUE(total == 0 || total == 40) << total;
  EXPECT_GE(door.refused(), 300u - 128u);
  for (int fd : held) ::close(fd);
}

// Every refusal counts; the lines are at most 10 in 10 s, then one line
// with the count (a flood had printed 32,680 lines in 13 s).
TEST(Bootstrap, RefusalLinesAreBoundedAndCounted) {
  BootServer door("127.0.0.1", 0, 7, 1, bytes_of("c"));
  for (int i = 0; i < 200; ++i) {
    const int fd = connect_to(door.port());
    ::send(fd, "NOTACCEL-------", 15, MSG_NOSIGNAL);
    ::close(fd);
  }
  for (int i = 0; i < 200 && door.refused() < 200; ++i) std::this_thread::sleep_for(10ms);
  EXPECT_EQ(door.refused(), 200u);
  const auto lines = door.refusals();
  EXPECT_LE(lines.size(), 10u);
  EXPECT_GE(lines.size(), 1u);
}

TEST(Bootstrap, NothingListeningIsNotListening) {
  std::uint16_t port = 0;
  {
    BootServer door("127.0.0.1", 0, 7, 1, bytes_of("c"));
    port = door.port();
  }
  EXPECT_THROW(boot_connect("127.0.0.1", port, 7, 1, false, bytes_of("w"), 1000ms), NotListening);
}

// A fake coordinator that accepts anyone without knowing the token: the
// worker must not take its address.
TEST(Bootstrap, ACoordinatorWithoutTheTokenIsRefused) {
  const int lfd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in sa{};
  sa.sin_family = AF_INET;
  ::inet_pton(AF_INET, "127.0.0.1", &sa.sin_addr);
  ASSERT_EQ(::bind(lfd, reinterpret_cast<sockaddr*>(&sa), sizeof sa), 0);
  ASSERT_EQ(::listen(lfd, 1), 0);
  socklen_t len = sizeof sa;
  ::getsockname(lfd, reinterpret_cast<sockaddr*>(&sa), &len);
  std::thread fake([lfd] {
    const int c = ::accept(lfd, nullptr, nullptr);
    std::vector<char> hello(8 + 32, 0);
    std::memcpy(hello.data(), "ACCELB1\0", 8);
    ::send(c, hello.data(), hello.size(), MSG_NOSIGNAL);
    std::vector<char> in(8 + 4 + 1 + 32 + 4 + 1 + 32);
    for (std::size_t got = 0; got < in.size();) {
      const ssize_t n = ::recv(c, in.data() + got, in.size() - got, 0);
      if (n <= 0) break;
      got += static_cast<std::size_t>(n);
    }
    std::vector<char> out(1 + 4 + 1 + 32, 0);  // accepted, a 1-byte address, a made-up MAC
    out[1] = 1;
    ::send(c, out.data(), out.size(), MSG_NOSIGNAL);
    ::close(c);
  });
  EXPECT_THROW(boot_connect("127.0.0.1", ntohs(sa.sin_port), 7, 1, false, bytes_of("w"), 3000ms), InputError);
  fake.join();
  ::close(lfd);
}

// The job token's defaults (job_token.hpp): drawn at random, written for
// the owner only, read back; malformed values name where they came from.
TEST(JobToken, DrawnWrittenForTheOwnerAndReadBack) {
  const auto a = random_job_token(), b = random_job_token();
  EXPECT_NE(a, 0u);
  EXPECT_NE(a, b);
  const auto dir = std::filesystem::temp_directory_path() / ("accel-token-test-" + std::to_string(::getpid()));
  const std::string path = (dir / "sub" / "job.token").string();
  EXPECT_FALSE(read_job_file(path).has_value());
  write_job_file(path, a);
  EXPECT_EQ(read_job_file(path), a);
  struct stat st {};
  ASSERT_EQ(::stat(path.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);
  ASSERT_EQ(::stat((dir / "sub").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0700u);
  std::filesystem::remove_all(dir);
  EXPECT_NE(default_job_file(4242).find("job-4242.token"), std::string::npos);
}

TEST(JobToken, MalformedValuesAreBadInput) {
  EXPECT_EQ(parse_job_token("0x10\n", "f"), 16u);
  EXPECT_EQ(parse_job_token("42", "f"), 42u);
  for (const char* bad : {"", "0", "-1", "12x", "99999999999999999999999"})
    EXPECT_THROW(parse_job_token(bad, "f"), InputError) << bad;
  ::setenv("ACCEL_JOB_TOKEN", "nope", 1);
  EXPECT_THROW(env_job_token(), InputError);
  ::setenv("ACCEL_JOB_TOKEN", "7", 1);
  EXPECT_EQ(env_job_token(), 7u);
  ::unsetenv("ACCEL_JOB_TOKEN");
  EXPECT_FALSE(env_job_token().has_value());
}
