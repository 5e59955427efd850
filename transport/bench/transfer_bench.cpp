// accel_transfer_bench: our bulk transfer between two processes on one host,
// the counterpart of ucx_perftest's ucp_put_bw / ucp_am_bw in
// scripts/bench_transfer.sh.
//
// The receiver (--role server) writes its worker address to --address-file;
// the sender (--role client) connects to it and sends its own address in a
// hello, so both sides have endpoints (worker addresses, not a listener, so
// shared memory can be used). Per repetition the receiver prepares a buffer
// and sends a ticket; the sender pushes --total bytes in --block blocks and
// times from the push to its completion (put: after the flush and the
// "done" message). The sender prints one JSON line.
#include <boost/program_options.hpp>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <thread>

#include "accel/config.hpp"
#include "accel/error.hpp"
#include "accel/transport/ucx_transport.hpp"

#if ACCEL_HAVE_CUDA
#include <cuda_runtime_api.h>
#endif

namespace po = boost::program_options;
using namespace accel::transport;
using namespace std::chrono_literals;

namespace {

constexpr std::uint16_t kHello = 1, kTicket = 2, kBye = 3;

std::string hex(const std::vector<std::byte>& b) {
  static const char* d = "0123456789abcdef";
  std::string s;
  for (std::byte x : b) {
    s += d[std::to_integer<int>(x) >> 4];
    s += d[std::to_integer<int>(x) & 15];
  }
  return s;
}

std::vector<std::byte> unhex(const std::string& s) {
  if (s.size() % 2 != 0 || s.size() > 2 * 65536) throw accel::InputError("bad address file");
  std::vector<std::byte> out;
  for (std::size_t i = 0; i < s.size(); i += 2) out.push_back(static_cast<std::byte>(std::stoi(s.substr(i, 2), nullptr, 16)));
  return out;
}

// Host or device memory for the benchmark buffers.
struct Buffer {
  MemoryType type;
  void* ptr = nullptr;
  std::size_t bytes;
  Buffer(MemoryType t, std::size_t n, int fill) : type(t), bytes(n) {
    if (t == MemoryType::Cuda) {
#if ACCEL_HAVE_CUDA
      if (cudaMalloc(&ptr, n) != cudaSuccess) throw std::runtime_error("cudaMalloc failed");
      cudaMemset(ptr, fill, n);
#else
      throw accel::InputError("--memory cuda needs a build with CUDA");
#endif
    } else {
      ptr = std::aligned_alloc(4096, (n + 4095) / 4096 * 4096);
      std::memset(ptr, fill, n);
    }
  }
  ~Buffer() {
#if ACCEL_HAVE_CUDA
    if (type == MemoryType::Cuda) {
      cudaFree(ptr);
      return;
    }
#endif
    std::free(ptr);
  }
};

int run_server(Transport& t, const std::string& address_file, std::size_t total, int reps, MemoryType mem,
               bool ucx_alloc, std::chrono::seconds timeout) {
  {
    const std::string tmp = address_file + ".tmp";
    std::ofstream(tmp) << hex(t.worker_address());
    std::filesystem::rename(tmp, address_file);
  }
  auto hello = t.receive(timeout);
  if (!hello || hello->message.header.type != kHello) throw std::runtime_error("no hello from the client");
  const EndpointId ep = t.connect(hello->message.payload);
  // Receive into memory UCX allocated (mappable by a peer on this host) or
  // into our own (registered per transfer, as a caller's buffer would be).
  Buffer own(ucx_alloc ? MemoryType::Host : mem, ucx_alloc ? 1 : total, 0);
  void* dst = ucx_alloc ? t.allocate(total, mem) : own.ptr;
  if (ucx_alloc && mem == MemoryType::Host) std::memset(dst, 0, total);
  for (int r = 0; r < reps; ++r) {
    BulkReceiveHandle h = t.expect(dst, total, mem, ep);
    auto c = t.send(ep, kTicket, r, h.ticket);
    if (!t.wait(h.completion, timeout) || !h.completion->ok())
      throw std::runtime_error("receive " + std::to_string(r) + " failed: " + h.completion->error);
    const auto* p = static_cast<const unsigned char*>(dst);
    if (r == 0 && mem == MemoryType::Host && !std::all_of(p, p + total, [](unsigned char c) { return c == 0x5a; }))
      throw std::runtime_error("received bytes differ from those sent");
  }
  auto bye = t.receive(timeout);
  return bye && bye->message.header.type == kBye ? 0 : 1;
}

int run_client(Transport& t, const std::string& address_file, std::size_t total, int reps, MemoryType mem,
               BulkProtocol protocol, std::chrono::seconds timeout) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (!std::filesystem::exists(address_file)) {
    if (std::chrono::steady_clock::now() > deadline) throw std::runtime_error("no address file from the server");
    std::this_thread::sleep_for(10ms);
  }
  std::string addr;
  std::ifstream(address_file) >> addr;
  const EndpointId ep = t.connect(unhex(addr));
  t.wait(t.send(ep, kHello, 0, t.worker_address()), timeout);
  Buffer src(mem, total, 0x5a);
  std::vector<double> seconds;
  BulkProtocol used = protocol;
  for (int r = 0; r < reps; ++r) {
    auto ticket = t.receive(timeout);
    if (!ticket || ticket->message.header.type != kTicket) throw std::runtime_error("no ticket from the server");
    const auto t0 = std::chrono::steady_clock::now();
    auto c = t.push(ep, ticket->message.payload, src.ptr, total, mem, protocol);
    if (!t.wait(c, timeout) || !c->ok()) throw std::runtime_error("push failed: " + c->error);
    seconds.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
    used = c->protocol;
  }
  t.wait(t.send(ep, kBye, 0, {}), timeout);
  // The first repetition warms up (registration caches, connection lanes).
  const std::size_t skip = seconds.size() > 1 ? 1 : 0;
  double sum = 0;
  for (std::size_t i = skip; i < seconds.size(); ++i) sum += seconds[i];
  const double mib = static_cast<double>(total) * static_cast<double>(seconds.size() - skip) / (1 << 20);
  nlohmann::json j{{"tls", t.options().tls},
                   {"protocol", to_string(used)},
                   {"memory", to_string(mem)},
                   {"block_bytes", t.options().block_bytes},
                   {"total_bytes", total},
                   {"reps_timed", seconds.size() - skip},
                   {"peer_failure_detection", t.options().peer_failure_detection},
                   {"seconds", seconds},
                   {"mib_per_s", mib / sum}};
  std::cout << j.dump() << std::endl;
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  std::string role, tls, protocol_name, memory_name, address_file, peer_failure, receive_into;
  std::size_t block = 0, total = 0;
  int reps = 0, timeout_s = 0;
  po::options_description desc("accel_transfer_bench: bulk transfer bandwidth between two local processes");
  desc.add_options()("help,h", "this help")
      ("role", po::value(&role)->required(), "server (receives) or client (sends, prints JSON)")
      ("address-file", po::value(&address_file)->required(), "where the server writes its worker address")
      ("tls", po::value(&tls)->default_value(""), "UCX_TLS for both sides (empty: environment)")
      ("protocol", po::value(&protocol_name)->default_value("auto"), "auto, put or am (client)")
      ("block", po::value(&block)->default_value(64u << 20), "block (message) size in bytes")
      ("total", po::value(&total)->default_value(256u << 20), "bytes per transfer")
      ("reps", po::value(&reps)->default_value(3), "transfers; the first is a warm-up")
      ("receive-into", po::value(&receive_into)->default_value("ucx"),
       "server: ucx (Transport::allocate, peers can map it) or own (our buffer, registered per transfer)")
      ("memory", po::value(&memory_name)->default_value("host"), "host or cuda")
      ("peer-failure", po::value(&peer_failure)->default_value("on"),
       "on: UCP_ERR_HANDLING_MODE_PEER (no shared memory in UCX 1.13), off: none")
      ("timeout", po::value(&timeout_s)->default_value(120), "seconds any step may take");
  try {
    po::variables_map vm;
    po::store(po::parse_command_line(argc, argv, desc), vm);
    if (vm.count("help")) {
      std::cout << desc << '\n';
      return 0;
    }
    po::notify(vm);
    if (role != "server" && role != "client") throw accel::InputError("--role must be server or client");
    if (total == 0 || block == 0 || reps < 1 || timeout_s < 1) throw accel::InputError("sizes, reps and timeout must be positive");
    if (memory_name != "host" && memory_name != "cuda") throw accel::InputError("--memory must be host or cuda");
    if (receive_into != "ucx" && receive_into != "own") throw accel::InputError("--receive-into must be ucx or own");
    if (peer_failure != "on" && peer_failure != "off") throw accel::InputError("--peer-failure must be on or off");
    const MemoryType mem = memory_name == "cuda" ? MemoryType::Cuda : MemoryType::Host;
    Options o;
    o.job_token = 0x6265'6e63'6821ull;
    o.self_id = role == "server" ? 0 : 1;
    o.tls = tls;
    o.block_bytes = block;
    o.peer_failure_detection = peer_failure == "on";
    o.protocol = parse_bulk_protocol(protocol_name);
    o.shutdown_timeout = 1000ms;
    UcxTransport t(o);
    const std::chrono::seconds timeout(timeout_s);
    return role == "server" ? run_server(t, address_file, total, reps, mem, receive_into == "ucx", timeout)
                            : run_client(t, address_file, total, reps, mem, o.protocol, timeout);
  } catch (const accel::InputError& e) {
    std::cerr << "accel_transfer_bench: " << e.what() << '\n';
    return 2;
  } catch (const po::error& e) {
    std::cerr << "accel_transfer_bench: " << e.what() << '\n' << desc << '\n';
    return 2;
  } catch (const std::exception& e) {
    std::cerr << "accel_transfer_bench: " << e.what() << '\n';
    return 1;
  }
}
