#include "session.hpp"

#include <cstdlib>

#include "accel/error.hpp"

namespace accel::cluster {

std::pair<std::string, std::uint16_t> split_addr(const std::string& s) {
  const auto colon = s.rfind(':');
  if (colon == std::string::npos) throw InputError("address '" + s + "': expected ADDR:PORT");
  int port = -1;
  try {
    port = std::stoi(s.substr(colon + 1));
  } catch (...) {
  }
  if (port < 0 || port > 65535) throw InputError("address '" + s + "': bad port");
  return {s.substr(0, colon), static_cast<std::uint16_t>(port)};
}

transport::Options transport_options(const Common& c, std::uint32_t id, std::uint32_t incarnation) {
  transport::Options o;
  o.job_token = c.job;
  o.self_id = id;
  o.incarnation = incarnation;
  o.tls = c.tls;
  o.keepalive_interval = Ms(c.keepalive_ms);
  o.peer_failure_detection = true;  // a dead peer must fail its requests (an endpoint that hangs would stall every round)
  // Contributions can be large (k-means: k x d doubles, 1.6 MB for
  // Fashion-MNIST at k = 256): accept up to the transport's hard bound;
  // workloads check exact shapes.
  o.max_control_payload = transport::kMaxControlPayloadLimit;
  // More processes than cores is the usual test and demo setting: a waiting
  // participant sleeps on its event fd instead of taking the CPU the
  // others need (tcp, the only transport with peer-failure handling here,
  // supports wakeup).
  o.wakeup = true;
  return o;
}

nlohmann::json view_json(const Membership& v) {
  return {{"active", v.active}, {"inactive", v.inactive}, {"recovering", v.recovering}};
}

transport::Received expect_msg(Node& node, std::uint16_t type, Ms timeout, const std::string& what,
                               const Other& other) {
  const auto deadline = Clock::now() + timeout;
  for (;;) {
    const auto left = ms_until(deadline);
    if (left.count() <= 0) throw InputError("timed out waiting for " + what);
    auto r = node.receive(std::min(left, Ms(100)));
    if (!r) {
      if (!node.coordinator() && !node.reachable(0)) throw CoordinatorGone("the coordinator is gone");
      continue;
    }
    if (r->message.header.type == type) return *r;
    if (r->message.header.type == kReject && !node.coordinator()) throw Rejected();
    if (r->message.header.type == kDone && !node.coordinator()) throw JobDone();
    if (other) other(*r);
  }
}

namespace {

int env_int(std::initializer_list<const char*> names, int fallback) {
  for (const char* n : names)
    if (const char* v = std::getenv(n)) return std::atoi(v);
  return fallback;
}

}  // namespace

// OpenMPI, Slurm, PMI (MPICH, Intel MPI), then torchrun's.
int launcher_rank(int fallback) {
  return env_int({"OMPI_COMM_WORLD_RANK", "SLURM_PROCID", "PMI_RANK", "RANK"}, fallback);
}
int launcher_size(int fallback) {
  return env_int({"OMPI_COMM_WORLD_SIZE", "SLURM_NTASKS", "PMI_SIZE", "WORLD_SIZE"}, fallback);
}

}  // namespace accel::cluster
