// `accel <subcommand> ...`. Exit codes: 0 success, 2 bad input (one line on
// stderr naming the problem), 1 anything else.
#include <unistd.h>

#include <boost/program_options/errors.hpp>
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <filesystem>
#include <iostream>
#include <map>
#include <string>
#include <vector>

#include "accel/config.hpp"
#include "accel/error.hpp"
#include "accel/log.hpp"
#include "commands.hpp"
#include "accel/faults.hpp"

namespace {

const std::map<std::string, std::pair<int (*)(const std::vector<std::string>&), const char*>> kCommands = {
    {"devices", {accel::cli::devices_main, "list the devices and the backends that found none"}},
    {"kmeans", {accel::cli::kmeans_main, "k-means clustering (Lloyd) on one node's devices"}},
    {"calibrate", {accel::cli::calibrate_main, "measure this machine's sgemm rate and read bandwidth"}},
    {"bench-kernels", {accel::cli::bench_kernels_main, "each kernel's rate on every device beside the cpu's"}},
    {"topk", {accel::cli::topk_main, "top-k magnitude threshold for gradient sparsification"}},
#if ACCEL_HAVE_UCX
    {"coordinator", {accel::cli::coordinator_main, "a distributed job (kmeans, svm-train): the coordinator (also computes)"}},
    {"worker", {accel::cli::worker_main, "a distributed job's worker (kmeans, svm-train, sparse allreduce)"}},
    {"sparse-allreduce", {accel::cli::sparse_allreduce_main, "one member of a sparse allreduce group (check, measure)"}},
    {"simulate", {accel::cli::simulate_main, "swarm runs of the engine in the deterministic simulator, faults drawn by seed"}},
#endif
    {"svm-train", {accel::cli::svm_train_main, "C-SVC training (SMO, adaptive shrinking), LIBSVM's options and model"}},
    {"svm-predict", {accel::cli::svm_predict_main, "predict with a LIBSVM model, print the accuracy"}},
};

// The command line after the program's name. Called as accel-svm-train
// or accel-svm-predict (links to accel), the name is the command: LIBSVM's
// tools run one executable by path (svm-grid -svmtrain PATH).
std::vector<std::string> command_line(int argc, char** argv) {
  std::vector<std::string> args(argv + 1, argv + argc);
  const std::string self = std::filesystem::path(argv[0]).filename().string();
  for (const char* tool : {"svm-train", "svm-predict"})
    if (self == std::string("accel-") + tool) args.insert(args.begin(), tool);
  return args;
}

void usage(std::ostream& out) {
  out << "accel " ACCEL_VERSION " - machine-learning kernels on CPUs, GPUs and FPGAs\n\n"
      << "usage: accel <command> [options]   (accel <command> --help for its options)\n\n";
  for (const auto& [name, cmd] : kCommands) out << "  " << name << std::string(name.size() < 18 ? 18 - name.size() : 1, ' ') << cmd.second << "\n";
}

}  // namespace

int main(int argc, char** argv) {
  const std::vector<std::string> args = command_line(argc, argv);
  if (args.empty()) {
    usage(std::cerr);
    return 2;
  }
  const std::string name = args[0];
  if (name == "--help" || name == "-h" || name == "help") {
    usage(std::cout);
    return 0;
  }
  if (name == "--version") {
    std::cout << "accel " ACCEL_VERSION "\n";
    return 0;
  }
  // SMO launches two short kernel rows per step from the queue thread of
  // the cpu device while the solver's own thread does serial work in
  // between: OpenMP workers that spin-wait after each launch (libgomp's
  // default) take the cores those two threads need. libgomp reads the
  // variable only when it loads, so these commands set
  // OMP_WAIT_POLICY=passive and re-execute themselves once; an explicit
  // setting by the user is left alone.
  // The distributed job has the same shape, worse: several processes per
  // node, each with an OpenMP pool spinning between iterations, starve the
  // barrier when processes outnumber cores.
  // k-means too: its launches are one parallel region each (no barrier
  // inside), but a small Lloyd iteration is short, and beside busy
  // processes on the same cores a spinning pool slows every iteration
  // several-fold (the idle thread spins away the share its partner needs);
  // on idle cores passive waiting costs next to nothing.
  if ((name == "svm-train" || name == "svm-predict" || name == "coordinator" || name == "worker" ||
       name == "kmeans") &&
      std::getenv("OMP_WAIT_POLICY") == nullptr &&
      ::setenv("OMP_WAIT_POLICY", "passive", 1) == 0)
    ::execv("/proc/self/exe", argv);  // returns only on failure: then run as we are

  auto it = kCommands.find(name);
  if (it == kCommands.end()) {
    accel::log::error("accel") << "unknown command '" << name << "' (accel --help lists them)";
    return 2;
  }
  try {
    accel::set_faults(accel::faults_from_environment());  // the cluster scenarios' faults
    std::vector<std::string> rest(args.begin() + 1, args.end());
    const bool distributed = std::find(rest.begin(), rest.end(), "--distributed") != rest.end();
    if (distributed && (name == "kmeans" || name == "svm-train")) {
#if ACCEL_HAVE_UCX
      return accel::cli::distributed_main(name, rest);
#else
      throw accel::InputError("--distributed: this accel was built without UCX, which distributed jobs need");
#endif
    }
    return it->second.first(rest);
  } catch (const accel::InputError& e) {
    accel::log::error("accel " + name) << e.what();
    return 2;
  } catch (const boost::program_options::error& e) {
    accel::log::error("accel " + name) << e.what();
    return 2;
  } catch (const accel::DeviceError& e) {
    // The device the user chose cannot run this input (a shape beyond it,
    // not enough memory, a kernel its compiler refuses): what() names the
    // device and why.
    accel::log::error("accel " + name) << e.what();
    return 2;
  } catch (const std::exception& e) {
    accel::log::error("accel " + name) << "error: " << e.what();
    return 1;
  }
}
