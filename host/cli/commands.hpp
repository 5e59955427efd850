#pragma once

#include <boost/program_options.hpp>
#include <iostream>
#include <string>
#include <vector>

namespace accel::cli {

// Parses a subcommand's arguments into vm. With --help, prints the options
// and returns false (the command exits 0) before any requirement is
// checked; otherwise runs the options' notifiers and returns true.
inline bool parse_or_help(const std::vector<std::string>& args,
                          const boost::program_options::options_description& opts,
                          boost::program_options::variables_map& vm) {
  namespace po = boost::program_options;
  po::store(po::command_line_parser(args).options(opts).run(), vm);
  if (vm.count("help")) {
    std::cout << opts;
    return false;
  }
  po::notify(vm);
  return true;
}

// Each subcommand takes the arguments after its name and returns the exit code.
int devices_main(const std::vector<std::string>& args);
int kmeans_main(const std::vector<std::string>& args);
int calibrate_main(const std::vector<std::string>& args);
int bench_kernels_main(const std::vector<std::string>& args);
int topk_main(const std::vector<std::string>& args);
int coordinator_main(const std::vector<std::string>& args);
int worker_main(const std::vector<std::string>& args);
// `accel kmeans|svm-train ... --distributed` under a launcher: rank 0
// coordinates, the others work (cmd_distributed.cpp).
int distributed_main(const std::string& command, std::vector<std::string> args);
int sparse_allreduce_main(const std::vector<std::string>& args);
int simulate_main(const std::vector<std::string>& args);
int svm_train_main(const std::vector<std::string>& args);
int svm_predict_main(const std::vector<std::string>& args);

}  // namespace accel::cli
