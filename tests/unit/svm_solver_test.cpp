// The SMO solver against first principles: the answer satisfies the
// optimality conditions (checked with a from-scratch gradient), and neither
// the shrinking heuristic nor the working-set rule nor the kernel cache
// changes it beyond eps.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <set>

#include "accel/error.hpp"
#include "accel/registry.hpp"
#include "accel/svm.hpp"
#include "reference/csr_kernel_rows_ref.hpp"

namespace accel {
namespace {

struct Problem {
  CsrMatrix x;
  std::vector<std::int8_t> y;
};

// Two overlapping Gaussian classes in 8 sparse-ish dimensions: many free and
// many bounded support vectors at C = 4.
Problem make_problem(int n, unsigned seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> noise(0.0f, 1.0f);
  std::uniform_real_distribution<float> coin(0.0f, 1.0f);
  Problem p;
  for (int i = 0; i < n; ++i) {
    const int cls = i % 3 == 0 ? -1 : 1;
    std::vector<std::pair<std::int32_t, float>> row;
    for (int j = 0; j < 8; ++j)
      if (coin(rng) < 0.7f) row.emplace_back(j, noise(rng) + (cls > 0 ? 0.8f : -0.4f) * (j % 2 ? 1 : -1));
    p.x.add_row(row);
    p.y.push_back(static_cast<std::int8_t>(cls));
  }
  p.x.cols = 8;
  return p;
}

SvmParams params(const std::string& shrink, WorkingSet wss = WorkingSet::FirstOrder, double cache_mb = 100) {
  SvmParams p;
  p.C = 4;
  p.gamma = 0.3;
  p.eps = 1e-3;
  p.cache_mb = cache_mb;
  p.shrink = parse_shrink(shrink);
  p.wss = wss;
  return p;
}

const std::vector<Device*>& cpu() {
  static const Registry reg = Registry::discover_all();
  static const auto devs = reg.select("cpu", KernelId::CsrKernelRows);
  return devs;
}

struct Check {
  double obj, gap, rho_lo, rho_hi;
};

// Gradient from scratch (double kernels), the objective, the violation
// beta_low - beta_up and the interval rho must lie in.
Check check(const Problem& p, const std::vector<double>& alpha, double C, double gamma) {
  const std::int64_t n = p.x.rows;
  std::vector<std::vector<double>> dense;
  for (std::int64_t i = 0; i < n; ++i) dense.push_back(ref::dense_row(p.x, i));
  double obj = 0, up = INFINITY, low = -INFINITY;
  for (std::int64_t i = 0; i < n; ++i) {
    double g = -1;
    for (std::int64_t j = 0; j < n; ++j)
      if (alpha[j] > 0) g += p.y[i] * p.y[j] * alpha[j] * ref::kernel(dense[i], dense[j], KernelType::Rbf, gamma, 0, 3);
    obj += alpha[i] * (g - 1) / 2;
    const double gam = p.y[i] * g;
    const bool in_up = p.y[i] > 0 ? alpha[i] < C : alpha[i] > 0;
    const bool in_low = p.y[i] > 0 ? alpha[i] > 0 : alpha[i] < C;
    if (in_up) up = std::min(up, gam);
    if (in_low) low = std::max(low, gam);
  }
  return {obj, low - up, std::min(low, up), std::max(low, up)};
}

TEST(SvmSolver, FirstOrderSolutionIsOptimalWithinEps) {
  const Problem p = make_problem(300, 1);
  for (const Solver solver : {Solver::Pair, Solver::Batch}) {
  SCOPED_TRACE(solver == Solver::Pair ? "pair" : "batch");
  SvmParams prm = params("none");
  prm.solver = solver;
  KernelRows kr(p.x, prm, cpu());
  SvmTimes t;
  const BinarySolution s = solve_binary(p.y, prm, kr, t);
  double sum = 0;
  for (std::size_t i = 0; i < s.alpha.size(); ++i) {
    EXPECT_GE(s.alpha[i], 0);
    EXPECT_LE(s.alpha[i], prm.C);
    sum += p.y[i] * s.alpha[i];
  }
  EXPECT_NEAR(sum, 0, 1e-9);  // y'a = 0 kept by every step
  const Check c = check(p, s.alpha, prm.C, prm.gamma);
  EXPECT_LE(c.gap, prm.eps + 1e-5);
  EXPECT_NEAR(s.stats.obj, c.obj, 1e-6 * std::abs(c.obj));
  EXPECT_GE(s.stats.rho, c.rho_lo - 1e-5);
  EXPECT_LE(s.stats.rho, c.rho_hi + 1e-5);
  EXPECT_GT(s.stats.n_sv, s.stats.n_bsv);
  EXPECT_GT(s.stats.n_bsv, 0);
  }
}

TEST(SvmSolver, EveryShrinkingHeuristicGivesTheSameAnswer) {
  const Problem p = make_problem(400, 2);
  SvmParams base = params("none");
  base.solver = Solver::Pair;
  KernelRows kr0(p.x, base, cpu());
  SvmTimes t;
  const BinarySolution ref = solve_binary(p.y, base, kr0, t);
  for (const Solver solver : {Solver::Pair, Solver::Batch})
    for (const auto& name : shrink_heuristic_names()) {
      for (const double cache : {100.0, 0.0}) {
        SCOPED_TRACE(name + " cache " + std::to_string(cache) + (solver == Solver::Pair ? " pair" : " batch"));
        SvmParams prm = params(name, WorkingSet::FirstOrder, cache);
        prm.solver = solver;
        KernelRows kr(p.x, prm, cpu());
        const BinarySolution s = solve_binary(p.y, prm, kr, t);
        const Check c = check(p, s.alpha, prm.C, prm.gamma);
        EXPECT_LE(c.gap, prm.eps + 1e-5) << "reconstruction must precede the final test";
        EXPECT_NEAR(s.stats.obj, ref.stats.obj, 1e-3 * std::abs(ref.stats.obj));
        EXPECT_NEAR(s.stats.rho, ref.stats.rho, 1e-3);
        if (name == "single2" || name == "multi2") {
          EXPECT_LT(s.stats.min_active, p.x.rows) << "shrinking every 2 iterations removes samples";
          EXPECT_GE(s.stats.reconstructions, 1);
        }
        if (solver == Solver::Pair) {
          // -m 0 keeps only the rows of the last two requests (callers hold them).
          if (cache == 0) EXPECT_LT(s.stats.cache_hits, s.stats.cache_misses / 10);
          if (cache == 100) EXPECT_GT(s.stats.cache_hits, s.stats.cache_misses);
        } else {
          // Half of each working set is the previous round's: its rows are
          // still held even without a cache.
          EXPECT_GT(s.stats.cache_hits, 0);
          EXPECT_LT(s.stats.rounds, s.stats.iterations / 4) << "a round makes many pair updates";
        }
      }
    }
}

// The batched solver at every working-set size, from one pair per round to
// the whole problem in one set, with either local selection rule, reaches
// the pair solver's optimum.
TEST(SvmSolver, BatchSolverAnyWorkingSetSize) {
  const Problem p = make_problem(500, 7);
  SvmParams base = params("none");
  base.solver = Solver::Pair;
  KernelRows kr0(p.x, base, cpu());
  SvmTimes t;
  const BinarySolution ref = solve_binary(p.y, base, kr0, t);
  for (const std::int64_t q : {2, 3, 16, 64, 256, 500, 4096})
    for (const WorkingSet wss : {WorkingSet::FirstOrder, WorkingSet::SecondOrder}) {
      SCOPED_TRACE("q " + std::to_string(q) + (wss == WorkingSet::FirstOrder ? " wss 1" : " wss 2"));
      SvmParams prm = params("multi2", wss);
      prm.ws_size = q;
      KernelRows kr(p.x, prm, cpu());
      const BinarySolution s = solve_binary(p.y, prm, kr, t);
      EXPECT_EQ(s.stats.ws_size, std::min<std::int64_t>(q, 500));
      const Check c = check(p, s.alpha, prm.C, prm.gamma);
      EXPECT_LE(c.gap, prm.eps + 1e-5);
      EXPECT_NEAR(s.stats.obj, ref.stats.obj, 1e-3 * std::abs(ref.stats.obj));
      EXPECT_NEAR(s.stats.rho, ref.stats.rho, 1e-3);
      for (std::size_t k = 0; k < s.alpha.size(); ++k) ASSERT_TRUE(s.alpha[k] >= 0 && s.alpha[k] <= prm.C) << k;
    }
}

TEST(SvmSolver, BatchWorkingSetSizeFollowsTheCache) {
  SvmParams prm;
  prm.cache_mb = 100;
  EXPECT_EQ(batch_ws_size(prm, 60000), 512);   // 436 rows fit: the nearest power of two
  EXPECT_EQ(batch_ws_size(prm, 10000), 512);   // capped
  prm.cache_mb = 10;
  EXPECT_EQ(batch_ws_size(prm, 60000), 32 * 2);   // 43 rows fit: the floor
  EXPECT_EQ(batch_ws_size(prm, 20000), 128);      // 131 rows fit
  prm.cache_mb = 100;
  EXPECT_EQ(batch_ws_size(prm, 300), 300);     // never more than n
  prm.cache_mb = 0;
  EXPECT_EQ(batch_ws_size(prm, 60000), 64);    // the floor
  prm.ws_size = 100;
  EXPECT_EQ(batch_ws_size(prm, 60000), 100);   // --ws-size wins
}

TEST(SvmSolver, SecondOrderSelectionSameAnswerFewerIterations) {
  const Problem p = make_problem(400, 3);
  SvmTimes t;
  SvmParams p1 = params("none"), p2 = params("none", WorkingSet::SecondOrder);
  p1.solver = p2.solver = Solver::Pair;  // one pair per iteration: the counts compare the rules
  KernelRows k1(p.x, p1, cpu()), k2(p.x, p2, cpu());
  const BinarySolution a = solve_binary(p.y, p1, k1, t), b = solve_binary(p.y, p2, k2, t);
  EXPECT_NEAR(a.stats.obj, b.stats.obj, 1e-3 * std::abs(a.stats.obj));
  EXPECT_LE(check(p, b.alpha, p2.C, p2.gamma).gap, p2.eps + 1e-5);
  EXPECT_LT(b.stats.iterations, a.stats.iterations);
}

TEST(SvmSolver, KernelRowCacheMatchesUncachedRows) {
  const Problem p = make_problem(120, 4);
  const SvmParams prm = params("none");
  KernelRows kr(p.x, prm, cpu());
  std::vector<std::int32_t> all(p.x.rows);
  for (std::int32_t i = 0; i < p.x.rows; ++i) all[i] = i;
  std::vector<float> direct(2 * all.size());
  kr.compute({7, 11}, all, direct.data());
  auto r = kr.rows({7, 11});
  for (std::size_t b = 0; b < all.size(); ++b) {
    EXPECT_EQ(r[0][b], direct[b]);
    EXPECT_EQ(r[1][b], direct[all.size() + b]);
  }
  EXPECT_EQ(kr.misses(), 2);
  kr.rows({11});
  EXPECT_EQ(kr.hits(), 1);
  // Shrinking keeps cached rows, compacted to the active samples.
  const std::vector<std::int32_t> few = {1, 2, 3, 7, 11};
  kr.set_active(few);
  const float* r7 = kr.rows({7})[0];
  EXPECT_EQ(kr.hits(), 2);
  for (std::size_t b = 0; b < few.size(); ++b) EXPECT_EQ(r7[b], direct[few[b]]) << b;
  // Samples coming back: only their values are computed, and the row is whole.
  kr.set_active(all);
  r7 = kr.rows({7})[0];
  EXPECT_EQ(kr.misses(), 3);
  for (std::size_t b = 0; b < all.size(); ++b) EXPECT_EQ(r7[b], direct[b]) << b;
  // Values handed over by gradient reconstruction complete a compacted row.
  kr.set_active(few);
  kr.rows({11});
  std::vector<std::int32_t> rest;
  for (std::int32_t k : all)
    if (std::find(few.begin(), few.end(), k) == few.end()) rest.push_back(k);
  std::vector<float> vals(rest.size());
  kr.compute({11}, rest, vals.data());
  kr.complete_rows({11}, rest, vals.data());
  kr.set_active(all);
  const float* r11 = kr.rows({11})[0];
  EXPECT_EQ(kr.misses(), 3);
  for (std::size_t b = 0; b < all.size(); ++b) EXPECT_EQ(r11[b], direct[all.size() + b]) << b;
  // Prefetched rows ride along only with a computed row, and are exact.
  kr.rows({7}, {20, 21});
  EXPECT_EQ(kr.prefetched(), 0) << "a cache hit computes nothing, so nothing rides along";
  kr.rows({30}, {20, 21, 7, 22, 23});
  EXPECT_EQ(kr.prefetched(), 3) << "four rows per pass: 30, then 20, 21 and (7 is cached) 22";
  std::vector<float> want(all.size());
  kr.compute({22}, all, want.data());
  const float* r22 = kr.rows({22})[0];
  EXPECT_EQ(kr.prefetch_used(), 1);
  for (std::size_t b = 0; b < all.size(); ++b) EXPECT_EQ(r22[b], want[b]) << b;
  EXPECT_NEAR(kr.diag(5), 1.0, 1e-12);
}

// The kernel rows may come from any device, or be split across several
// (rows in proportion to measured speed): the answer must not change. The
// cpu's many-query launches compute in float (sgemm) and fpga-emu in double,
// so the solvers' paths differ by rounding: the objective still agrees to
// 1e-6, rho (fixed only to within eps by the optimality conditions) to a
// tenth of eps.
TEST(SvmSolver, FpgaEmuAndSplitAcrossDevicesGiveTheSameAnswer) {
  static const Registry reg = Registry::discover_all();
  const Problem p = make_problem(300, 5);
  const SvmParams prm = params("multi2");
  SvmTimes t;
  KernelRows k_cpu(p.x, prm, cpu());
  const BinarySolution want = solve_binary(p.y, prm, k_cpu, t);
  for (const std::string spec : {"fpga-emu", "cpu,fpga-emu"}) {
    SCOPED_TRACE(spec);
    const auto devs = reg.select(spec, KernelId::CsrKernelRows);
    if (spec != "fpga-emu") EXPECT_GE(devs.size(), 2u);
    KernelRows kr(p.x, prm, devs);
    const BinarySolution got = solve_binary(p.y, prm, kr, t);
    EXPECT_NEAR(got.stats.obj, want.stats.obj, 1e-6 * std::abs(want.stats.obj));
    EXPECT_NEAR(got.stats.rho, want.stats.rho, prm.eps / 10);
    EXPECT_EQ(got.stats.n_sv, want.stats.n_sv);
  }
}

// Requests of more rows than one launch takes (256) run as several; where
// a device copies (fpga-emu, OpenCL), the next launch runs while the last
// one's rows are read back and stored, from buffers of its own. Every row
// must be the reference's, on every device and split, with variables mapped
// to rows (epsilon-SVR's two per sample) or not, over a shrunk active set,
// and again in a second request whose launches swap buffers.
TEST(KernelRows, RequestsOfSeveralLaunchesOnEveryDevice) {
  static const Registry reg = Registry::discover_all();
  const Problem p = make_problem(700, 9);
  const SvmParams prm = params("none", WorkingSet::FirstOrder, 0);  // no cache: every request computes
  std::vector<std::int32_t> active;
  for (std::int32_t i = 0; i < 700; i += (i % 5 == 0 ? 2 : 1)) active.push_back(i);
  for (const std::string spec : {"cpu", "fpga-emu", "opencl", "cpu,fpga-emu", "fpga-emu,opencl"}) {
    std::vector<Device*> devs;
    try {
      devs = reg.select(spec, KernelId::CsrKernelRows);
    } catch (const InputError&) {
      continue;  // no OpenCL platform, or the backend not built (sanitizer builds): the others still run
    }
    if (devs.empty()) continue;
    for (const bool mapped : {false, true}) {
      SCOPED_TRACE(spec + (mapped ? " mapped" : ""));
      std::vector<std::int32_t> row_of;
      if (mapped)
        for (std::int32_t i = 0; i < 1400; ++i) row_of.push_back(i % 700);
      KernelRows kr(p.x, prm, devs, row_of);
      kr.set_held_calls(1);
      const std::int32_t vars = mapped ? 1400 : 700;
      std::vector<std::int32_t> vactive = active;
      if (mapped)
        for (std::int32_t i : active) vactive.push_back(i + 700);
      kr.set_active(vactive);
      std::vector<std::int32_t> rows_of_active;
      for (std::int32_t v : vactive) rows_of_active.push_back(v % 700);
      std::set<std::int32_t> asked;
      for (int request = 0; request < 2; ++request) {
        std::vector<std::int32_t> queries;
        for (std::int32_t a = 0; a < 600; ++a) queries.push_back((a * 3 + request) % vars);
        std::sort(queries.begin(), queries.end());
        queries.erase(std::unique(queries.begin(), queries.end()), queries.end());
        asked.insert(queries.begin(), queries.end());
        const auto got = kr.rows(queries);
        std::vector<std::int32_t> qrows;
        for (std::int32_t q : queries) qrows.push_back(q % 700);
        const auto want = ref::csr_kernel_rows(p.x, qrows, rows_of_active, prm.kernel, prm.gamma, prm.coef0, prm.degree);
        for (std::size_t a = 0; a < queries.size(); ++a)
          for (std::size_t b = 0; b < vactive.size(); ++b)
            ASSERT_NEAR(got[a][b], want[a * vactive.size() + b], 1e-5) << "request " << request << " query " << a;
      }
      // The first request is 3 launches; the second computes only the rows
      // the first did not (the first's are still held).
      EXPECT_EQ(kr.computed(), static_cast<std::int64_t>(asked.size() * vactive.size()));
    }
  }
}

// A distributed SVM member's matrix: its own rows, then guest rows that
// change round by round behind them (rows_changed, remap). Every row asked
// for must be the reference's on every device: the cpu keeps what it
// derived from the own rows (their dense copy) and extends it to the
// guests, and devices that copy get the changed tail. Guests more than
// the room reserved move the matrix, which is wrapped or copied again.
TEST(KernelRows, GuestRowsChangingBehindTheOwnRows) {
  static const Registry reg = Registry::discover_all();
  const Problem p = make_problem(700, 4);
  const SvmParams prm = params("none", WorkingSet::FirstOrder, 0);
  for (const std::string spec : {"cpu", "fpga-emu", "opencl"}) {
    std::vector<Device*> devs;
    try {
      devs = reg.select(spec, KernelId::CsrKernelRows);
    } catch (const InputError&) {
      continue;  // no OpenCL platform, or the backend not built: the others still run
    }
    if (devs.empty()) continue;
    SCOPED_TRACE(spec);
    // Own: rows [200, 500); variable v is row v.
    CsrMatrix sub;
    for (std::int32_t r = 200; r < 500; ++r) sub.add_row_from(p.x, r);
    sub.cols = p.x.cols;
    sub.row_ptr.reserve(sub.rows + 41);
    sub.col_idx.reserve(sub.nnz() + 40 * 8);
    sub.values.reserve(sub.nnz() + 40 * 8);
    std::vector<std::int32_t> row_of(700, -1);
    for (std::int32_t r = 200; r < 500; ++r) row_of[r] = r - 200;
    KernelRows kr(sub, prm, devs, row_of);
    std::vector<std::int32_t> own;
    for (std::int32_t r = 200; r < 500; r += 2) own.push_back(r);
    kr.set_active(own);
    std::vector<std::int32_t> guests;
    for (int round = 0; round < 4; ++round) {
      for (const std::int32_t g : guests) kr.remap(g, -1);
      guests.clear();
      // 20, 30, 40, then 60 guests (past the room reserved).
      for (std::int32_t g = 0; static_cast<int>(guests.size()) < (round < 3 ? 20 + 10 * round : 60); ++g)
        guests.push_back((g * 7 + round * 13) % 200 + (g % 2 ? 500 : 0));
      std::sort(guests.begin(), guests.end());
      guests.erase(std::unique(guests.begin(), guests.end()), guests.end());
      sub.rows = 300;
      sub.row_ptr.resize(301);
      sub.col_idx.resize(sub.row_ptr[300]);
      sub.values.resize(sub.row_ptr[300]);
      for (const std::int32_t g : guests) sub.add_row_from(p.x, g);
      kr.rows_changed(300);
      for (std::size_t i = 0; i < guests.size(); ++i) kr.remap(guests[i], 300 + static_cast<std::int32_t>(i));
      std::vector<std::int32_t> queries = guests;
      queries.insert(queries.end(), {201, 333});
      std::vector<float> got(queries.size() * own.size());
      kr.compute(queries, own, got.data());
      const auto want = ref::csr_kernel_rows(p.x, queries, own, prm.kernel, prm.gamma, prm.coef0, prm.degree);
      for (std::size_t k = 0; k < got.size(); ++k) ASSERT_NEAR(got[k], want[k], 1e-5) << "round " << round << " value " << k;
      for (std::size_t i = 0; i < guests.size(); ++i)
        EXPECT_NEAR(kr.diag(guests[i]), 1.0, 1e-12);  // RBF: K(x, x) = 1, from the guest's row
    }
  }
}

TEST(SvmShrink, NamesAndPeriods) {
  EXPECT_EQ(shrink_heuristic_names().size(), 13u);  // Narasimhan et al. 2014 Table 3 rows 1-13
  EXPECT_EQ(parse_shrink("multi5pc").period(10000), 500);
  EXPECT_EQ(parse_shrink("single50pc").period(10000), 5000);
  EXPECT_EQ(parse_shrink("multi1000").period(10), 1000);
  EXPECT_EQ(parse_shrink("single2").kind, ShrinkHeuristic::Kind::Single);
  EXPECT_EQ(parse_shrink("none").kind, ShrinkHeuristic::Kind::None);
  // auto: no shrinking while the cache holds full rows of n/8 samples.
  const ShrinkHeuristic a = parse_shrink("auto");
  EXPECT_EQ(resolve_shrink(a, 100, 10000).name, "none");   // 2621 rows >= 1250
  EXPECT_EQ(resolve_shrink(a, 100, 20000).name, "multi2");  // 1310 rows < 2500
  EXPECT_EQ(resolve_shrink(parse_shrink("single2"), 100, 10000).name, "single2");
  EXPECT_THROW(parse_shrink("multi7"), InputError);
}

}  // namespace
}  // namespace accel
