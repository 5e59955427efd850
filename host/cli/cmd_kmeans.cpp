#include <unistd.h>

#include <boost/program_options.hpp>
#include <chrono>
#include <cstdio>
#include <iostream>
#include <optional>
#include <nlohmann/json.hpp>
#include <sstream>

#include "accel/error.hpp"
#include "accel/json_lines.hpp"
#include "accel/kmeans.hpp"
#include "accel/registry.hpp"
#include "commands.hpp"

namespace po = boost::program_options;

namespace accel::cli {

namespace {

struct KMeansArgs {
  KMeansOptions ko;
  std::string input, device = "auto", out_centroids, out_labels, log_json;
  bool json = false;
};

// The command line; nothing when it asked for the help.
std::optional<KMeansArgs> parse_kmeans(const std::vector<std::string>& args) {
  KMeansArgs a;
  KMeansOptions& ko = a.ko;
  po::options_description opts(
      "accel kmeans --input FILE --k K [options]\n"
      "  FILE: .npy (float32/64, 2-D), .csv, LIBSVM text, or IDX (.gz) as Fashion-MNIST ships");
  opts.add_options()("help,h", "this help")
      ("input", po::value(&a.input)->required(), "input rows")
      ("k", po::value(&ko.k)->required(), "number of clusters")
      ("max-iter", po::value(&ko.max_iter)->default_value(100), "iteration limit")
      ("tol", po::value(&ko.tol)->default_value(1e-4), "stop when no centroid moves this far; 0 runs max-iter")
      ("init", po::value(&ko.init)->default_value("kmeans++"), "kmeans++ | random | kmeans-parallel | FILE.npy (k x d)")
      ("seed", po::value(&ko.seed)->default_value(0), "random seed")
      ("algorithm", po::value(&ko.algorithm)->default_value("auto"),
       "lloyd | yinyang (same iterations, rows skipped when bounds prove their label unchanged) | auto (yinyang for d > 64)")
      ("device", po::value(&a.device)->default_value("auto"), device_option_help("devices").c_str())
      ("output-centroids", po::value(&a.out_centroids), "write centroids (k x d float32 .npy)")
      ("output-labels", po::value(&a.out_labels), "write labels (n int32 .npy)")
      ("log-json", po::value(&a.log_json), "write one JSON line per iteration to this file")
      ("json", "print the summary as one JSON object");
  po::variables_map vm;
  if (!parse_or_help(args, opts, vm)) return std::nullopt;
  a.json = vm.count("json") > 0;
  if (ko.max_iter < 1) throw InputError("--max-iter " + std::to_string(ko.max_iter) + ": must be at least 1");
  if (!(ko.tol >= 0)) throw InputError("--tol " + std::to_string(ko.tol) + ": must be >= 0");
  kmeans_uses_bounds(ko.algorithm, 16);  // rejects an unknown name before the input is read
  return a;
}

// Centroids, labels and log replace the old ones together or not at all.
void write_outputs(const KMeansArgs& a, const KMeansResult& r, const std::string& log) {
  OutputSet outputs;
  if (!a.out_centroids.empty())
    outputs.add(a.out_centroids, [&](std::ostream& o) {
      write_npy(o, r.centroids.data.data(), {r.centroids.rows, r.centroids.cols});
    });
  if (!a.out_labels.empty())
    outputs.add(a.out_labels, [&](std::ostream& o) {
      write_npy(o, r.labels.data(), {static_cast<std::int64_t>(r.labels.size())});
    });
  if (!a.log_json.empty()) outputs.add(a.log_json, [&](std::ostream& o) { o << log; });
  outputs.commit();
}

void print_summary(const KMeansArgs& a, const Matrix& x, const KMeansResult& r, double init_seconds) {
  if (a.json) {
    nlohmann::json j = {{"n", x.rows},
                        {"d", x.cols},
                        {"k", a.ko.k},
                        {"iterations", r.iterations},
                        {"converged", r.converged},
                        {"inertia", r.inertia},
                        {"reseeded_empty_clusters", r.reseeded},
                        {"seconds", {{"total", r.seconds}, {"compute", r.compute_seconds}, {"transfer", r.transfer_seconds},
                                     {"init", init_seconds}}},
                        {"devices", r.devices}};
    std::cout << j.dump() << "\n";
    return;
  }
  std::string devs;
  for (const auto& d : r.devices) devs += (devs.empty() ? "" : "+") + d;
  std::printf("k-means: %lld rows x %lld features, k=%lld on %s\n", static_cast<long long>(x.rows),
              static_cast<long long>(x.cols), static_cast<long long>(a.ko.k), devs.c_str());
  std::printf("  %d iterations (%s), inertia %.9g\n", r.iterations, r.converged ? "converged" : "iteration limit",
              r.inertia);
  std::printf("  %.3f s total: %.3f s compute, %.3f s transfer (and %.3f s seeding by %s)\n", r.seconds,
              r.compute_seconds, r.transfer_seconds, init_seconds, a.ko.init.c_str());
  if (r.reseeded) std::printf("  %lld empty clusters re-seeded by splitting the largest\n", static_cast<long long>(r.reseeded));
}

}  // namespace

int kmeans_main(const std::vector<std::string>& args) {
  const std::optional<KMeansArgs> parsed = parse_kmeans(args);
  if (!parsed) return 0;
  const KMeansArgs& a = *parsed;
  const Matrix x = load_matrix(a.input);
  const auto init_start = std::chrono::steady_clock::now();
  const Matrix init = kmeans_init(x, a.ko);
  const double init_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - init_start).count();
  const Registry reg = Registry::discover_all();
  const auto devices = kmeans_capable(reg.select(a.device, KernelId::KMeansAssign), a.ko.k, x.cols);

  const bool progress = ::isatty(STDERR_FILENO) && !a.json;
  std::ostringstream log;
  JsonLines log_lines(log);  // into the log file with the other outputs, at the end
  PerfModel model;
  const KMeansResult r = kmeans(x, init, a.ko, devices, model, [&](const KMeansIteration& it) {
    if (!a.log_json.empty())
      log_lines.write({{"iteration", it.iteration},        {"inertia", it.inertia},
                       {"max_shift", it.max_shift},        {"seconds", it.seconds},
                       {"compute_seconds", it.compute_seconds}, {"transfer_seconds", it.transfer_seconds},
                       {"reseeded", it.reseeded},          {"rows_per_device", it.rows_per_device}});
    if (progress)
      std::fprintf(stderr, "\riteration %d/%d  inertia %.6g  shift %.3g   ", it.iteration, a.ko.max_iter, it.inertia,
                   it.max_shift);
  });
  if (progress) std::fprintf(stderr, "\n");
  write_outputs(a, r, log.str());
  print_summary(a, x, r, init_seconds);
  return 0;
}

}  // namespace accel::cli
