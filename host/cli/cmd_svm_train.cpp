// `accel svm-train`: LIBSVM's svm-train command line (single-dash options,
// same defaults), plus --shrink, --wss, --device and --json.
#include "accel/error.hpp"
#include "accel/registry.hpp"
#include "commands.hpp"
#include "svm_train_args.hpp"

namespace accel::cli {

int svm_train_main(const std::vector<std::string>& args) {
  SvmTrainArgs a;
  if (auto rc = parse_svm_train(args,
                                "accel svm-train [options] training_file [model_file]\n"
                                "  LIBSVM's options and defaults; -wi weight: C of class i is weight*C (C-SVC)",
                                {}, a))
    return *rc;
  const LabeledCsr data = read_libsvm_csr(a.train_file);
  const Registry reg = Registry::discover_all();
  const auto devices = reg.select(a.device, KernelId::CsrKernelRows);
  if (a.folds != 0) {
    print_cv(data, svm_cross_validation(data, a.params, a.folds, devices), a.params.type);
    return 0;
  }
  SvmTrainReport rep;
  const SvmModel model = svm_train(data, a.params, devices, &rep);
  write_svm_model(a.model_file, model);
  std::vector<std::string> names;
  for (auto* d : devices) names.push_back(d->info().name);
  print_svm_train(a, data, model, rep, names);
  return 0;
}

}  // namespace accel::cli
