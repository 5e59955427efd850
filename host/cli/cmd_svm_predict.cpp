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
      ("b,b", po::value(&prob)->default_value(0), "probability estimates: 0 only (not supported)")
      ("q,q", po::bool_switch(), "quiet")
      ("device", po::value(&device)->default_value("cpu"), "cpu | fpga-emu | cuda | fpga | <name> | all | auto")
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
  if (prob != 0) throw InputError("-b " + std::to_string(prob) + ": probability estimates are not supported");
  const SvmModel model = read_svm_model(model_file);
  const LabeledCsr test = read_libsvm_csr(test_file);
  const Registry reg = Registry::discover_all();
  const auto pred = svm_predict(model, test.x, reg.select(device, KernelId::CsrKernelRows));
  std::int64_t correct = 0;
  for (std::size_t i = 0; i < pred.size(); ++i) correct += pred[i] == test.labels[i];
  atomic_write(output_file, [&](std::ostream& o) {
    char buf[40];
    for (double v : pred) {
      std::snprintf(buf, sizeof buf, "%.17g\n", v);
      o << buf;
    }
  });
  if (vm["q"].as<bool>()) return 0;
  if (is_regression(model.params.type)) {
    print_regression_quality(pred, test.labels, "", " (regression)");
  } else {
    std::printf("Accuracy = %g%% (%lld/%lld) (classification)\n", 100.0 * double(correct) / double(pred.size()),
                static_cast<long long>(correct), static_cast<long long>(pred.size()));
  }
  return 0;
}

}  // namespace accel::cli
