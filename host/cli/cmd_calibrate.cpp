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

#include "accel/error.hpp"
#include "commands.hpp"
#include "stream_read.hpp"

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
  std::int64_t read_bytes = std::int64_t{1} << 29;
  po::options_description opts("accel calibrate [--threads T] [--json]");
  opts.add_options()("help,h", "this help")("threads", po::value(&threads), "threads (default: OpenMP's)")
      ("repeats", po::value(&repeats)->default_value(3), "best of this many")
      ("read-bytes", po::value(&read_bytes), "size of the streaming-read array (default 512 MiB); only the read is measured")
      ("json", "print JSON");
  po::variables_map vm;
  if (!parse_or_help(args, opts, vm)) return 0;
  if (threads < 1 || repeats < 1 || read_bytes < 4) throw InputError("--threads, --repeats >= 1 and --read-bytes >= 4");
  omp_set_num_threads(threads);
  openblas_set_num_threads(threads);
  const bool read_only = vm.count("read-bytes") > 0;

  const int m = read_only ? 0 : 2048;
  std::vector<float> a(m * m, 1.0f), b(m * m, 0.5f), c(m * m);
  double best_gemm = 1e30;
  for (int r = 0; r < repeats && !read_only; ++r)
    best_gemm = std::min(best_gemm, seconds_of([&] {
      cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, m, m, m, 1.0f, a.data(), m, b.data(), m, 0.0f, c.data(), m);
    }));
  const double gflops = 2.0 * m * m * m / best_gemm / 1e9;

  // Default 512 MiB: far beyond any cache, so this is DRAM bandwidth.
  const std::size_t n = static_cast<std::size_t>(read_bytes) / sizeof(float);
  std::vector<float> big(n);
#pragma omp parallel for schedule(static)
  for (std::size_t i = 0; i < n; ++i) big[i] = static_cast<float>(i & 1023);
  double best_read = 1e30;
  for (int r = 0; r < repeats; ++r) best_read = std::min(best_read, stream_read_seconds(big.data(), n));
  const double gbps = n * sizeof(float) / best_read / 1e9;

  if (vm.count("json")) {
    nlohmann::json j{{"threads", threads}, {"read_gbps", gbps}, {"read_seconds", best_read}, {"read_bytes", n * sizeof(float)}};
    if (!read_only) j["sgemm_gflops"] = gflops;
    std::cout << j.dump() << "\n";
  } else {
    std::cout << "threads " << threads << ": ";
    if (!read_only) std::cout << "sgemm " << gflops << " GFLOP/s, ";
    std::cout << "streaming read " << gbps << " GB/s\n";
  }
  return 0;
}

}  // namespace accel::cli
