// Reference rates of this machine, measured in the same run as a benchmark so
// its ratios mean something on a shared, noisy host: OpenBLAS sgemm GFLOP/s
// and the bandwidth of one streaming read.
#include <cblas.h>
#include <omp.h>

#include <algorithm>
#include <boost/program_options.hpp>
#include <chrono>
#include <iostream>
#include <nlohmann/json.hpp>
#include <vector>

#include "commands.hpp"

namespace po = boost::program_options;

namespace accel::cli {
namespace {

double seconds_of(const auto& fn) {
  const auto t0 = std::chrono::steady_clock::now();
  fn();
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

}  // namespace

int calibrate_main(const std::vector<std::string>& args) {
  int threads = omp_get_max_threads();
  int repeats = 3;
  po::options_description opts("accel calibrate [--threads T] [--json]");
  opts.add_options()("help,h", "this help")("threads", po::value(&threads), "threads (default: OpenMP's)")
      ("repeats", po::value(&repeats)->default_value(3), "best of this many")("json", "print JSON");
  po::variables_map vm;
  po::store(po::command_line_parser(args).options(opts).run(), vm);
  po::notify(vm);
  if (vm.count("help")) {
    std::cout << opts;
    return 0;
  }
  omp_set_num_threads(threads);
  openblas_set_num_threads(threads);

  const int m = 2048;
  std::vector<float> a(m * m, 1.0f), b(m * m, 0.5f), c(m * m);
  double best_gemm = 1e30;
  for (int r = 0; r < repeats; ++r)
    best_gemm = std::min(best_gemm, seconds_of([&] {
      cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, m, m, m, 1.0f, a.data(), m, b.data(), m, 0.0f, c.data(), m);
    }));
  const double gflops = 2.0 * m * m * m / best_gemm / 1e9;

  // 512 MiB: far beyond any cache, so this is DRAM bandwidth.
  const std::size_t n = std::size_t{1} << 27;
  std::vector<float> big(n);
#pragma omp parallel for schedule(static)
  for (std::size_t i = 0; i < n; ++i) big[i] = static_cast<float>(i & 1023);
  double best_read = 1e30;
  volatile float sink = 0;
  for (int r = 0; r < repeats; ++r)
    best_read = std::min(best_read, seconds_of([&] {
      float s = 0;
#pragma omp parallel for simd reduction(+ : s) schedule(static)
      for (std::size_t i = 0; i < n; ++i) s += big[i];
      sink = s;
    }));
  const double gbps = n * sizeof(float) / best_read / 1e9;

  if (vm.count("json")) {
    std::cout << nlohmann::json{{"threads", threads}, {"sgemm_gflops", gflops}, {"read_gbps", gbps}}.dump() << "\n";
  } else {
    std::cout << "threads " << threads << ": sgemm " << gflops << " GFLOP/s, streaming read " << gbps << " GB/s\n";
  }
  return 0;
}

}  // namespace accel::cli
