// svm-train's command line (LIBSVM's single-dash options and defaults, plus
// --shrink, --wss, --solver, --ws-size, --device, --json), shared by
// `accel svm-train` and `accel coordinator svm-train`.
#pragma once

#include <boost/program_options.hpp>
#include <optional>
#include <string>
#include <vector>

#include "accel/csr.hpp"
#include "accel/svm.hpp"

namespace accel::cli {

struct SvmTrainArgs {
  SvmParams params;
  int folds = 0;  // -v
  int wss = 1;
  std::string device = "cpu", solver = "batch", train_file, model_file;
  bool quiet = false, json = false;
};

// Parses args (svm-train's, plus the options in `extra`) into a. Returns an
// exit code when the command is answered already: 1 with no arguments
// (usage, as svm-train), 0 for --help. Throws InputError naming a bad
// option or value.
std::optional<int> parse_svm_train(const std::vector<std::string>& args, const std::string& usage,
                                   const boost::program_options::options_description& extra, SvmTrainArgs& a);

// LIBSVM's "Cross Validation Accuracy = ...%" (or the regression lines).
void print_cv(const LabeledCsr& data, const std::vector<double>& pred, SvmType type);

// What svm-train prints after training (or one JSON object with --json).
void print_svm_train(const SvmTrainArgs& a, const LabeledCsr& data, const SvmModel& model,
                     const SvmTrainReport& rep, const std::vector<std::string>& devices);

}  // namespace accel::cli
