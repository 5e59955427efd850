// Which CPU kmeans_assign loop runs a shape: chosen by timing them on the
// launch's own rows, not by cut-offs in d and k. Over a grid of d = 2..32
// and k = 4..1024 (1M rows) the fastest loop changed with the shape in ways
// no rule of thumb caught: the masked loop wins at d <= 4 with k * d <= 64
// but not everywhere in it, the register-transposed loop beats sgemm up to
// d = 32 at small k and loses at some large k, and the sgemm path wins past
// d = 32.
//
// The first launch of a (d, k, threads) shape large enough to tell runs
// each eligible loop twice on slices of its rows, in turn, keeps the
// fastest per row for the rest of the launch and for every later launch
// of that shape in the process. Every loop conforms to the same reference
// (tests/conformance/kmeans_assign_test.cpp), so the rows of one launch
// may come from several; labels can differ between loops only where two
// centroids are within float rounding of a tie. ACCEL_KMEANS_LOOP=masked|
// wide|rows|gemm runs that loop wherever it fits (reproducible runs, and
// measuring one loop).
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

// ACCEL_KMEANS_LOOP, when it names one of `loops`.
std::optional<Loop> forced(const std::vector<Loop>& loops) {
  static const char* env = std::getenv("ACCEL_KMEANS_LOOP");
  if (!env) return std::nullopt;
  const std::string name = env;
  const char* names[] = {"masked", "wide", "rows", "gemm"};
  for (Loop l : loops)
    if (name == names[static_cast<int>(l)]) return l;
  return std::nullopt;
}

}  // namespace

void kmeans_assign(const float* x, std::int64_t n, std::int64_t d, const float* c, std::int64_t k,
                   std::int32_t* labels, double* sums, std::int64_t* counts, double* inertia) {
  const std::vector<Loop> loops = eligible(d, k);
  const Key key{d, k, omp_get_max_threads()};
  std::optional<Loop> pick = forced(loops);
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
    const char* names[] = {"masked", "wide", "rows", "gemm"};
    auto line = log::debug("accel cpu");
    line << "kmeans_assign d=" << d << " k=" << k << ", ms per " << kSliceRows << " rows:";
    for (std::size_t l = 0; l < loops.size(); ++l) line << " " << names[static_cast<int>(loops[l])] << " " << best[l] * 1e3;
    line << "; " << names[static_cast<int>(loops[win])] << " from here on";
  }
  double part = 0;
  run(loops[win], x + at * d, n - at, d, c, k, labels + at, {s.data(), cn.data(), &part});
  add();
  *inertia += part;
}

}  // namespace accel::cpu
