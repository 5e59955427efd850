// `accel kmeans|svm-train ... --distributed` under a launcher (mpirun,
// srun, torchrun): every rank runs the same command line. Rank 0 is the
// coordinator (accel coordinator with the same options), the others are
// workers (accel worker). They meet through a rendezvous file that rank 0
// writes once it listens: its address and a fresh job token.
#include <netdb.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <thread>
#include <vector>

#include "accel/error.hpp"
#include "commands.hpp"
#include "engine.hpp"
#include "job_token.hpp"

namespace accel::cli {
namespace {

// The launcher's id of this job: every rank of it has the same, and no
// other job has it.
std::string launcher_job_id() {
  for (const char* v : {"PMIX_NAMESPACE", "OMPI_MCA_ess_base_jobid", "TORCHELASTIC_RUN_ID"})
    if (const char* s = std::getenv(v); s && *s) return s;
  const char* job = std::getenv("SLURM_JOB_ID");
  const char* step = std::getenv("SLURM_STEP_ID");
  if (job && *job) return std::string(job) + "." + (step ? step : "0");
  return {};
}

// Removes `--name VALUE` or `--name=VALUE` from args; its value, or "".
std::string take_option(std::vector<std::string>& args, const std::string& name, bool has_value = true) {
  for (std::size_t i = 0; i < args.size(); ++i) {
    if (args[i] == name) {
      std::string v = has_value && i + 1 < args.size() ? args[i + 1] : "1";
      if (has_value && i + 1 >= args.size()) throw InputError(name + " needs a value");
      args.erase(args.begin() + static_cast<long>(i), args.begin() + static_cast<long>(i + (has_value ? 2 : 1)));
      return v;
    }
    if (has_value && args[i].rfind(name + "=", 0) == 0) {
      std::string v = args[i].substr(name.size() + 1);
      args.erase(args.begin() + static_cast<long>(i));
      return v;
    }
  }
  return {};
}

// The option's value without removing it, or "".
std::string option_value(const std::vector<std::string>& args, const std::string& name) {
  for (std::size_t i = 0; i < args.size(); ++i) {
    if (args[i] == name && i + 1 < args.size()) return args[i + 1];
    if (args[i].rfind(name + "=", 0) == 0) return args[i].substr(name.size() + 1);
  }
  return {};
}

// This host's address as the other nodes resolve its name (port 0: any).
std::string default_listen() {
  char name[256] = {};
  if (::gethostname(name, sizeof name - 1) != 0) return "127.0.0.1:0";
  addrinfo hints{}, *res = nullptr;
  hints.ai_family = AF_INET;
  if (::getaddrinfo(name, nullptr, &hints, &res) != 0 || !res) return "127.0.0.1:0";
  char ip[64] = {};
  ::getnameinfo(res->ai_addr, res->ai_addrlen, ip, sizeof ip, nullptr, 0, NI_NUMERICHOST);
  ::freeaddrinfo(res);
  return std::string(ip) + ":0";
}

cluster::Rendezvous wait_rendezvous(const std::string& path, int timeout_ms) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
  for (;;) {
    if (auto r = cluster::read_rendezvous(path)) return *r;
    if (std::chrono::steady_clock::now() >= deadline)
      throw InputError("--distributed: rank 0 wrote no rendezvous to " + path + " in " +
                       std::to_string(timeout_ms / 1000) + " s (is it on storage every rank shares?)");
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
}

}  // namespace

int distributed_main(const std::string& command, std::vector<std::string> args) {
  take_option(args, "--distributed", false);
  std::string path = take_option(args, "--rendezvous");
  const int rank = cluster::launcher_rank(-1), size = cluster::launcher_size(0);
  if (rank < 0 || size < 1)
    throw InputError("--distributed: no launcher's rank in the environment (run it under mpirun, srun or torchrun)");
  if (size < 2) throw InputError("--distributed: the launcher started 1 rank; a job needs 2 or more");
  if (path.empty()) {
    const std::string id = launcher_job_id();
    if (id.empty())
      throw InputError("--distributed: the launcher's environment names no job; give --rendezvous FILE on storage "
                       "every rank shares");
    path = ".accel-rendezvous-" + id;
  }
  if (rank == 0) {
    std::remove(path.c_str());  // an earlier run's
    std::vector<std::string> c = args;
    if (command == "svm-train") c.insert(c.begin(), "svm-train");
    if (option_value(c, "--listen").empty()) c.insert(c.end(), {"--listen", default_listen()});
    c.insert(c.end(), {"--workers", std::to_string(size - 1), "--rendezvous", path, "--job",
                       std::to_string(cluster::random_job_token())});
    struct Remove {
      std::string path;
      ~Remove() { std::remove(path.c_str()); }
    } remove{path};
    return coordinator_main(c);
  }
  const std::string join = option_value(args, "--join-timeout-ms");
  const cluster::Rendezvous r = wait_rendezvous(path, join.empty() ? 60000 : std::stoi(join));
  std::vector<std::string> w = {"--coordinator", r.address, "--id", std::to_string(rank), "--job",
                                std::to_string(r.token)};
  // What every member must agree on, or may set for itself, as given.
  for (const char* o : {"--device", "--timeout-ms", "--tls", "--keepalive-ms"})
    if (const std::string v = option_value(args, o); !v.empty()) w.insert(w.end(), {o, v});
  return worker_main(w);
}

}  // namespace accel::cli
