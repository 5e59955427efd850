// svm-train's command line and output (svm_train_args.hpp).
#include <boost/program_options.hpp>
#include <charconv>
#include <cstdio>
#include <filesystem>
#include <iostream>
#include <nlohmann/json.hpp>

#include "accel/csr.hpp"
#include "accel/error.hpp"
#include "accel/registry.hpp"
#include "accel/svm.hpp"
#include "svm_train_args.hpp"
#include "libsvm_args.hpp"

namespace po = boost::program_options;

namespace accel::cli {

namespace {

// LIBSVM's -wi weight pairs ("-w1 2", "-w-1 0.5"): taken out of the
// arguments before Boost sees them (an option name cannot carry the label).
std::vector<std::string> take_weights(const std::vector<std::string>& args, SvmParams& p) {
  std::vector<std::string> rest;
  for (std::size_t i = 0; i < args.size(); ++i) {
    const std::string& a = args[i];
    if (a.size() > 2 && a[0] == '-' && a[1] == 'w') {  // long options (--ws-size) have '-' there
      int label;
      auto [end, ec] = std::from_chars(a.data() + 2, a.data() + a.size(), label);
      if (ec != std::errc() || end != a.data() + a.size())
        throw InputError(a + ": want -w<label> <weight>, the label an integer");
      if (i + 1 >= args.size()) throw InputError(a + ": missing the weight");
      const std::string& v = args[++i];
      double w;
      auto [e2, ec2] = std::from_chars(v.data(), v.data() + v.size(), w);
      if (ec2 != std::errc() || e2 != v.data() + v.size()) throw InputError(a + " " + v + ": the weight is not a number");
      p.weights.emplace_back(label, w);
    } else {
      rest.push_back(a);
    }
  }
  return rest;
}

}  // namespace

void print_cv(const LabeledCsr& data, const std::vector<double>& pred, SvmType type) {
  if (is_regression(type)) {
    print_regression_quality(pred, data.labels, "Cross Validation ", "");
    return;
  }
  std::int64_t correct = 0;
  for (std::size_t i = 0; i < pred.size(); ++i) correct += pred[i] == data.labels[i];
  std::printf("Cross Validation Accuracy = %g%%\n", 100.0 * double(correct) / double(pred.size()));
}

std::optional<int> parse_svm_train(const std::vector<std::string>& args_in, const std::string& usage,
                                   const po::options_description& extra, SvmTrainArgs& a) {
  int svm_type = 0, kernel = 2, shrinking = 1, probability = 0;
  SvmParams& p = a.params;
  const std::vector<std::string> args = take_weights(args_in, p);
  std::string shrink;
  std::string &device = a.device, &solver = a.solver, &train_file = a.train_file, &model_file = a.model_file;
  int& folds = a.folds;
  int& wss = a.wss;
  po::options_description opts(usage);
  opts.add_options()("help", "this help")
      ("s,s", po::value(&svm_type)->default_value(0),
       "svm type: 0 C-SVC, 1 nu-SVC, 2 one-class SVM, 3 epsilon-SVR, 4 nu-SVR")
      ("t,t", po::value(&kernel)->default_value(2), "kernel: 0 linear, 1 polynomial, 2 rbf, 3 sigmoid")
      ("d,d", po::value(&p.degree)->default_value(3), "degree (polynomial)")
      ("g,g", po::value(&p.gamma)->default_value(0), "gamma (default 1/num_features)")
      ("r,r", po::value(&p.coef0)->default_value(0), "coef0 (polynomial, sigmoid)")
      ("c,c", po::value(&p.C)->default_value(1), "C of C-SVC, epsilon-SVR and nu-SVR")
      ("n,n", po::value(&p.nu)->default_value(0.5), "nu of nu-SVC, one-class SVM and nu-SVR")
      ("p,p", po::value(&p.p)->default_value(0.1), "epsilon in the loss of epsilon-SVR")
      ("v,v", po::value(&folds)->default_value(0), "n-fold cross validation (prints the accuracy or error; no model)")
      ("b,b", po::value(&probability)->default_value(0),
       "1: fit probability estimates (Platt's sigmoid per class pair; Laplace sigma for regression)")
      ("e,e", po::value(&p.eps)->default_value(1e-3), "stopping tolerance: beta_low - beta_up <= e")
      ("m,m", po::value(&p.cache_mb)->default_value(100), "kernel row cache, MB (0: none)")
      ("h,h", po::value(&shrinking)->default_value(1), "shrinking: 0 off, 1 on (heuristic from --shrink)")
      ("q,q", po::bool_switch(), "quiet")
      ("shrink", po::value(&shrink), "shrinking heuristic (Narasimhan et al. 2014 Table 3): none, single2, single500, single1000, "
                                      "single5pc, single10pc, single50pc, multi2 ... multi50pc, or auto (the default: none "
                                      "when the cache holds n/8 full rows, else multi2; see scripts/bench_svm.py)")
      ("wss", po::value(&wss)->default_value(1), "working-set selection: 1 first order (Keerthi), 2 second order (LIBSVM)")
      ("solver", po::value(&solver)->default_value("batch"),
       "batch: working sets of --ws-size samples per round (ThunderSVM's); pair: one pair per step ([Narasimhan14]'s SMO)")
      ("ws-size", po::value(&p.ws_size)->default_value(0), "batch working-set size q (0: chosen from n and -m)")
      ("device", po::value(&device)->default_value("cpu"), device_option_help("devices").c_str())
      ("json", "print the summary as one JSON object")
      ("training_file", po::value(&train_file)->required(), "")
      ("model_file", po::value(&model_file), "");
  opts.add(extra);
  po::positional_options_description pos;
  pos.add("training_file", 1).add("model_file", 1);
  if (args.empty()) {  // as svm-train: usage, exit 1
    std::cout << opts;
    return 1;
  }
  po::variables_map vm = parse_libsvm_style(args, "stdgrcnpemhwbv", opts, pos);
  if (vm.count("help")) {
    std::cout << opts;
    return 0;
  }
  po::notify(vm);
  if (svm_type < 0 || svm_type > 4) throw InputError("-s " + std::to_string(svm_type) + ": svm type must be 0..4");
  if (probability != 0 && probability != 1) throw InputError("-b " + std::to_string(probability) + ": must be 0 or 1");
  p.probability = probability == 1;
  if (vm["v"].defaulted() == false && folds < 2)
    throw InputError("-v " + std::to_string(folds) + ": n-fold cross validation needs n >= 2");
  p.type = static_cast<SvmType>(svm_type);
  if (kernel < 0 || kernel > 3) throw InputError("-t " + std::to_string(kernel) + ": kernel must be 0..3");
  if (shrinking != 0 && shrinking != 1) throw InputError("-h " + std::to_string(shrinking) + ": must be 0 or 1");
  if (solver != "batch" && solver != "pair") throw InputError("--solver " + solver + ": must be batch or pair");
  if (p.ws_size < 0 || p.ws_size == 1) throw InputError("--ws-size " + std::to_string(p.ws_size) + ": must be 0 or >= 2");
  p.solver = solver == "pair" ? Solver::Pair : Solver::Batch;
  if (wss != 1 && wss != 2) throw InputError("--wss " + std::to_string(wss) + ": must be 1 or 2");
  p.kernel = static_cast<KernelType>(kernel);
  p.wss = wss == 1 ? WorkingSet::FirstOrder : WorkingSet::SecondOrder;
  if (shrinking == 0 && !shrink.empty() && shrink != "none")
    throw InputError("-h 0 with --shrink " + shrink + ": pick one");
  p.shrink = parse_shrink(shrinking == 0 ? "none" : shrink.empty() ? "auto" : shrink);
  if (model_file.empty()) model_file = std::filesystem::path(train_file).filename().string() + ".model";
  a.quiet = vm["q"].as<bool>();
  a.json = vm.count("json") > 0;

  check_svm_params(p);
  return std::nullopt;

}

void print_svm_train(const SvmTrainArgs& a, const LabeledCsr& data, const SvmModel& model,
                     const SvmTrainReport& rep, const std::vector<std::string>& devices) {
  const SvmParams& p = a.params;
  const int wss = a.wss;
  const std::string& solver = a.solver;
  const std::string& model_file = a.model_file;
  const auto& devs = devices;
  const SvmTimes& t = rep.times;
  if (a.json) {
    nlohmann::json probs = nlohmann::json::array();
    for (const auto& s : rep.problems)
      probs.push_back({{"classes", {s.class_a, s.class_b}}, {"n", s.n}, {"iterations", s.iterations},
                       {"obj", s.obj}, {"rho", s.rho}, {"r", s.r}, {"nSV", s.n_sv}, {"nBSV", s.n_bsv},
                       {"rounds", s.rounds}, {"shrink", s.shrink}, {"ws_size", s.ws_size}, {"reconstructions", s.reconstructions}, {"min_active", s.min_active},
                       {"cache_hits", s.cache_hits}, {"kernel_values", s.kernel_values}, {"cache_misses", s.cache_misses},
                       {"prefetched", s.prefetched}, {"prefetch_used", s.prefetch_used}});
    std::int64_t total_sv = model.sv.rows;
    nlohmann::json j = {{"n", data.x.rows},
                        {"svm_type", model_type_name(p.type)},
                        {"features", data.x.cols},
                        {"classes", model.labels},
                        {"gamma", model.params.gamma},
                        {"C", p.C},
                        {"eps", p.eps},
                        {"shrink", p.shrink.name},
                        {"wss", wss},
                        {"solver", solver},
                        {"total_sv", total_sv},
                        {"problems", probs},
                        {"seconds", {{"total", t.total}, {"kernel", t.kernel}, {"select", t.select},
                                     {"update", t.update}, {"shrink", t.shrink}, {"reconstruct", t.reconstruct}}},
                        {"devices", devs},
                        {"model_file", model_file}};
    std::cout << j.dump() << "\n";
  } else if (!a.quiet) {
    for (const auto& s : rep.problems)
      std::printf("classes %d vs %d: optimization finished, #iter = %lld\nobj = %.6f, rho = %.6f\nnSV = %lld, nBSV = %lld"
                  " (shrink %s, reconstructions %d, fewest active %lld, cache %lld hits / %lld misses)\n",
                  s.class_a, s.class_b, static_cast<long long>(s.iterations), s.obj, s.rho,
                  static_cast<long long>(s.n_sv), static_cast<long long>(s.n_bsv), s.shrink.c_str(), s.reconstructions,
                  static_cast<long long>(s.min_active), static_cast<long long>(s.cache_hits),
                  static_cast<long long>(s.cache_misses));
    std::printf("Total nSV = %lld\n", static_cast<long long>(model.sv.rows));
    std::string d;
    for (const auto& x : devs) d += (d.empty() ? "" : "+") + x;
    std::printf("time %.3f s: kernel %.3f, selection %.3f, update %.3f, shrinking %.3f, reconstruction %.3f (%s, shrink %s)\n",
                t.total, t.kernel, t.select, t.update, t.shrink, t.reconstruct, d.c_str(), p.shrink.name.c_str());
  }
}

}  // namespace accel::cli
