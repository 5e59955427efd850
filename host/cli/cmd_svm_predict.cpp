// `accel svm-predict test_file model_file output_file`, as LIBSVM's: one
// predicted label per line, and the accuracy line LIBSVM prints.
#include <boost/program_options.hpp>
#include <cstdio>
#include <iostream>

#include "accel/csr.hpp"
#include "accel/error.hpp"
#include "accel/io.hpp"
#include "accel/registry.hpp"
#include "accel/svm.hpp"
#include "commands.hpp"
#include "libsvm_args.hpp"

namespace po = boost::program_options;

namespace accel::cli {

int svm_predict_main(const std::vector<std::string>& args) {
  int prob = 0;
  std::string device = "cpu", test_file, model_file, output_file;
  po::options_description opts("accel svm-predict [options] test_file model_file output_file");
  opts.add_options()("help", "this help")
      ("b,b", po::value(&prob)->default_value(0), "1: print probability estimates (a model trained with -b 1)")
      ("q,q", po::bool_switch(), "quiet")
      ("device", po::value(&device)->default_value("cpu"), device_option_help("devices").c_str())
      ("test_file", po::value(&test_file)->required(), "")
      ("model_file", po::value(&model_file)->required(), "")
      ("output_file", po::value(&output_file)->required(), "");
  po::positional_options_description pos;
  pos.add("test_file", 1).add("model_file", 1).add("output_file", 1);
  po::variables_map vm = parse_libsvm_style(args, "b", opts, pos);
  if (vm.count("help")) {
    std::cout << opts;
    return 0;
  }
  po::notify(vm);
  if (prob != 0 && prob != 1) throw InputError("-b " + std::to_string(prob) + ": must be 0 or 1");
  const SvmModel model = read_svm_model(model_file);
  const bool classify = is_classification(model.params.type);
  if (prob == 1 && (model.probA.empty() || model.params.type == SvmType::OneClass))
    throw InputError(model_file + ": -b 1 but the model has no probability estimates (train it with -b 1)");
  const LabeledCsr test = read_libsvm_csr(test_file);
  const Registry reg = Registry::discover_all();
  const auto devices = reg.select(device, KernelId::CsrKernelRows);
  ProbabilityPrediction pp;
  if (prob == 1 && classify) pp = svm_predict_probability(model, test.x, devices);
  const auto pred = prob == 1 && classify ? pp.labels : svm_predict(model, test.x, devices);
  const bool quiet = vm["q"].as<bool>();
  if (prob == 1 && !classify && !quiet)
    std::printf("Prob. model for test data: target value = predicted value + z,\nz: Laplace distribution "
                "e^(-|z|/sigma)/(2sigma),sigma=%g\n", model.probA[0]);
  std::int64_t correct = 0;
  for (std::size_t i = 0; i < pred.size(); ++i) correct += pred[i] == test.labels[i];
  atomic_write(output_file, [&](std::ostream& o) {
    char buf[40];
    const std::size_t k = model.labels.size();
    if (prob == 1 && classify) {  // LIBSVM's layout: the label order, then label and probabilities per row
      o << "labels";
      for (int l : model.labels) o << " " << l;
      o << "\n";
    }
    for (std::size_t t = 0; t < pred.size(); ++t) {
      std::snprintf(buf, sizeof buf, prob == 1 && classify ? "%g" : "%.17g", pred[t]);
      o << buf;
      if (prob == 1 && classify)
        for (std::size_t c = 0; c < k; ++c) {
          std::snprintf(buf, sizeof buf, " %g", pp.probabilities[t * k + c]);
          o << buf;
        }
      o << "\n";
    }
  });
  if (quiet) return 0;
  if (is_regression(model.params.type)) {
    print_regression_quality(pred, test.labels, "", " (regression)");
  } else {
    std::printf("Accuracy = %g%% (%lld/%lld) (classification)\n", 100.0 * double(correct) / double(pred.size()),
                static_cast<long long>(correct), static_cast<long long>(pred.size()));
  }
  return 0;
}

}  // namespace accel::cli
