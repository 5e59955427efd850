// Which CPU kmeans_assign loop runs a shape. Over a grid of d = 2..784 and
// k = 4..1024 (1M rows, bench_kmeans.py --grid, timed per loop) the
// fastest loop changes with the shape, and the rule follows it: masked at
// d <= 4 with k <= 8 where AVX-512 gives it sixteen points a vector (its
// eight-lane form loses to the wide loop); the rows loop from d = 64 with k <= 8 and
// from d = 128 with k <= 16; the register-transposed wide loop elsewhere
// where it is built (d <= 16, 24, 32, 48 and 64 at every k; d = 128 up to
// k = 256); and sgemm for the rest. That rule is the default.
//
// The default is a rule, not a timing, because every process must run the
// same loop on a shape: the loops sum in different orders (one loop's sums
// move only by double rounding with where a launch's rows begin), and the
// cluster engine has participants stand in for lost members' rows and
// checks that a run with failures ends where the failure-free one does.
// Choosing by timing in each process would break that: participants that
// time differently disagree in the last bits (CI's kill_restart and
// coordinator_restart scenarios check it).
//
// ACCEL_KMEANS_LOOP=timed times the loops instead, for one process on a
// machine unlike the grid's: the first launch of a (d, k, threads) shape
// large enough runs each loop that fits twice on 16Ki-row slices of its
// own rows and keeps the fastest for the rest of the launch and for every
// later launch of that shape in the process (ACCEL_LOG_LEVEL=debug prints
// the times). ACCEL_KMEANS_LOOP=masked|wide|rows|gemm runs that
// loop wherever it fits; rule (or unset), the default. Another value is warned about once and ignored. Every loop conforms to the same reference
// (tests/conformance/kmeans_assign_test.cpp); labels can differ between
// loops only where two centroids are within float rounding of a tie.
#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <string>
#include <map>
#include <mutex>
#include <optional>
#include <tuple>
#include <vector>

#include <omp.h>

#include "accel/log.hpp"
#include "kmeans_assign.hpp"

namespace accel::cpu {
namespace {

enum class Loop { Masked, Wide, Rows, Gemm };
constexpr const char* kLoopNames[] = {"masked", "wide", "rows", "gemm"};  // by Loop

std::vector<Loop> eligible(std::int64_t d, std::int64_t k) {
  std::vector<Loop> out;
  if (kmeans_assign_masked_fits(d, k)) out.push_back(Loop::Masked);
  if (kmeans_assign_wide_fits(d)) out.push_back(Loop::Wide);
  if (kmeans_assign_rows_fits(d, k)) out.push_back(Loop::Rows);
  out.push_back(Loop::Gemm);
  return out;
}

struct Outputs {
  double* sums;
  std::int64_t* counts;
  double* inertia;
};

void run(Loop l, const float* x, std::int64_t n, std::int64_t d, const float* c, std::int64_t k, std::int32_t* labels,
         Outputs o) {
  switch (l) {
    case Loop::Masked: kmeans_assign_masked(x, n, d, c, k, labels, o.sums, o.counts, o.inertia); return;
    case Loop::Wide: kmeans_assign_wide(x, n, d, c, k, labels, o.sums, o.counts, o.inertia); return;
    case Loop::Rows: kmeans_assign_rows(x, n, d, c, k, labels, o.sums, o.counts, o.inertia); return;
    case Loop::Gemm: kmeans_assign_gemm(x, n, d, c, k, labels, o.sums, o.counts, o.inertia); return;
  }
}

using Key = std::tuple<std::int64_t, std::int64_t, int>;  // d, k, threads
std::mutex mu;
std::map<Key, Loop> chosen;

// Rows of one timed slice: enough for every loop to reach its rate (a
// parallel region and a block or two of sgemm each), few enough that a
// launch of ~1M rows spends under a tenth of itself on the slower loops.
constexpr std::int64_t kSliceRows = 16384;
constexpr int kRounds = 2;

const char* env_loop() {
  static const char* env = [] {
    const char* e = std::getenv("ACCEL_KMEANS_LOOP");
    const std::string v = e ? e : "";
    for (const char* known : {"", "rule", "timed", "masked", "wide", "rows", "gemm"})
      if (v == known) return e ? e : "";
    log::warn("accel cpu") << "ACCEL_KMEANS_LOOP=" << v << " is not rule, timed, masked, wide, rows or gemm: ignored";
    return "";
  }();
  return env;
}

// ACCEL_KMEANS_LOOP, when it names one of `loops`.
std::optional<Loop> forced(const std::vector<Loop>& loops) {
  const std::string name = env_loop();
  for (Loop l : loops)
    if (name == kLoopNames[static_cast<int>(l)]) return l;
  return std::nullopt;
}

// The grid's rule (above): the default. It can be, because every loop sums
// distances in double lanes: with float lanes a coordinator re-running
// iterations after a restart would log inertias off from the first run's
// in the last bits (CI's cluster.coordinator_restart_worker_lost checks it).
Loop rule(std::int64_t d, std::int64_t k) {
#if defined(__AVX512F__)
  if (kmeans_assign_masked_fits(d, k) && k <= 8) return Loop::Masked;
#endif  // with eight lanes (Zen 3, AVX2) the wide loop beats it 2-5x at d = 2 and 4, k = 2..8
  if (kmeans_assign_rows_fits(d, k) && (d >= 128 || (d >= 64 && k <= 8))) return Loop::Rows;
  if (kmeans_assign_wide_fits(d) && (d <= 64 || k <= 256)) return Loop::Wide;
  return Loop::Gemm;
}

}  // namespace

void kmeans_assign(const float* x, std::int64_t n, std::int64_t d, const float* c, std::int64_t k,
                   std::int32_t* labels, double* sums, std::int64_t* counts, double* inertia) {
  const std::vector<Loop> loops = eligible(d, k);
  const Key key{d, k, omp_get_max_threads()};
  std::optional<Loop> pick = forced(loops);
  if (!pick && std::string(env_loop()) != "timed") pick = rule(d, k);
  if (!pick) {
    std::lock_guard lock(mu);
    if (auto it = chosen.find(key); it != chosen.end()) pick = it->second;
  }
  if (!pick && (loops.size() == 1 || n < 4 * kSliceRows * static_cast<std::int64_t>(loops.size() * kRounds)))
    pick = loops.front();  // one loop, or too few rows to time: the most specialised
  if (pick) return run(*pick, x, n, d, c, k, labels, {sums, counts, inertia});

  std::fill(sums, sums + k * d, 0.0);
  std::fill(counts, counts + k, 0);
  *inertia = 0;
  std::vector<double> s(k * d);
  std::vector<std::int64_t> cn(k);
  auto add = [&] {
    for (std::int64_t e = 0; e < k * d; ++e) sums[e] += s[e];
    for (std::int64_t kk = 0; kk < k; ++kk) counts[kk] += cn[kk];
  };
  std::vector<double> best(loops.size(), 1e300);
  std::int64_t at = 0;
  for (int r = 0; r < kRounds; ++r)
    for (std::size_t l = 0; l < loops.size(); ++l) {
      double part = 0;
      const auto t0 = std::chrono::steady_clock::now();
      run(loops[l], x + at * d, kSliceRows, d, c, k, labels + at, {s.data(), cn.data(), &part});
      best[l] = std::min(best[l], std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
      add();
      *inertia += part;
      at += kSliceRows;
    }
  std::size_t win = 0;
  for (std::size_t l = 1; l < loops.size(); ++l)
    if (best[l] < best[win]) win = l;
  {
    std::lock_guard lock(mu);
    chosen.emplace(key, loops[win]);
  }
  {
    auto line = log::debug("accel cpu");
    line << "kmeans_assign d=" << d << " k=" << k << ", ms per " << kSliceRows << " rows:";
    for (std::size_t l = 0; l < loops.size(); ++l) line << " " << kLoopNames[static_cast<int>(loops[l])] << " " << best[l] * 1e3;
    line << "; " << kLoopNames[static_cast<int>(loops[win])] << " from here on";
  }
  double part = 0;
  run(loops[win], x + at * d, n - at, d, c, k, labels + at, {s.data(), cn.data(), &part});
  add();
  *inertia += part;
}

}  // namespace accel::cpu
