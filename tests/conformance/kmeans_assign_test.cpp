// Every device that runs kmeans_assign, on the same inputs, against the
// plain reference. Devices this machine lacks (GPUs, FPGAs) are reported as
// skipped with the reason their backend gave.
#include <gtest/gtest-spi.h>
#include <gtest/gtest.h>

#include <cmath>
#include <random>

#include "accel/error.hpp"
#include "accel/registry.hpp"
#include "cpu/kmeans_assign.hpp"
#include "reference/kmeans_ref.hpp"
#include "conformance/required_devices.hpp"

namespace accel {
namespace {

struct Case {
  std::string name;
  std::int64_t n, d, k;
  bool integer_valued;  // exact in float: labels (ties included) must match exactly
  int duplicates = 0;   // rows repeated
  bool far_centroid = false;  // one centroid no row is near: an empty cluster
};

struct Out {
  std::vector<std::int32_t> labels;
  std::vector<double> sums;
  std::vector<std::int64_t> counts;
  double inertia = 0;
};

void make_inputs(const Case& c, std::vector<float>& x, std::vector<float>& cent) {
  std::mt19937 rng(static_cast<unsigned>(c.n * 131 + c.d * 7 + c.k));
  std::uniform_int_distribution<int> small(-8, 8);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  x.resize(c.n * c.d);
  for (auto& v : x) v = c.integer_valued ? static_cast<float>(small(rng)) : normal(rng);
  for (int r = 1; r <= c.duplicates && r < c.n; ++r)
    std::copy_n(x.begin(), c.d, x.begin() + r * c.d);
  cent.resize(c.k * c.d);
  // Centroids are rows of x (as k-means initialises them), so exact ties and
  // zero distances occur.
  for (std::int64_t kk = 0; kk < c.k; ++kk) std::copy_n(x.begin() + (kk % c.n) * c.d, c.d, cent.begin() + kk * c.d);
  if (c.far_centroid) std::fill_n(cent.begin() + (c.k - 1) * c.d, c.d, 1e4f);
}

Out read_outputs(const Buffer& bl, const Buffer& bs, const Buffer& bn, const Buffer& bi, const Case& c) {
  Out o;
  o.labels.resize(c.n);
  o.sums.resize(c.k * c.d);
  o.counts.resize(c.k);
  bl.read(o.labels.data(), c.n * sizeof(std::int32_t));
  bs.read(o.sums.data(), o.sums.size() * sizeof(double));
  bn.read(o.counts.data(), o.counts.size() * sizeof(std::int64_t));
  bi.read(&o.inertia, sizeof(double));
  return o;
}

Out run_device(Device& dev, const std::vector<float>& x, const std::vector<float>& cent, const Case& c) {
  auto bx = dev.allocate(x.size() * sizeof(float));
  auto bc = dev.allocate(cent.size() * sizeof(float));
  auto bl = dev.allocate(c.n * sizeof(std::int32_t));
  auto bs = dev.allocate(c.k * c.d * sizeof(double));
  auto bn = dev.allocate(c.k * sizeof(std::int64_t));
  auto bi = dev.allocate(sizeof(double));
  bx->write(x.data(), x.size() * sizeof(float));
  bc->write(cent.data(), cent.size() * sizeof(float));
  dev.launch(KMeansAssignArgs{bx.get(), bc.get(), bl.get(), bs.get(), bn.get(), bi.get(), c.n, c.d, c.k}).wait();
  return read_outputs(*bl, *bs, *bn, *bi, c);
}

// Counts, sums and inertia that the device's own labels imply, in double:
// where a near-tie flipped a label, these are what the device must report.
ref::KMeansAssignOut stats_of_labels(const std::vector<std::int32_t>& labels, const std::vector<float>& x,
                                     const std::vector<float>& cent, const Case& c) {
  ref::KMeansAssignOut r;
  r.labels = labels;
  r.sums.assign(c.k * c.d, 0.0);
  r.counts.assign(c.k, 0);
  r.inertia = 0;
  for (std::int64_t i = 0; i < c.n; ++i) {
    const std::int32_t l = labels[i];
    ++r.counts[l];
    for (std::int64_t j = 0; j < c.d; ++j) {
      const double v = x[i * c.d + j], diff = v - cent[l * c.d + j];
      r.sums[l * c.d + j] += v;
      r.inertia += diff * diff;
    }
  }
  return r;
}

void expect_conforms(const Out& got, const ref::KMeansAssignOut& want, const Case& c, const std::string& who,
                     const std::vector<float>& x, const std::vector<float>& cent) {
  std::int64_t mismatched = 0;
  for (std::int64_t i = 0; i < c.n; ++i) {
    // Float data: a label may only differ where the two best distances are
    // within float rounding of each other.
    const double slack = c.integer_valued ? 0.0 : 1e-4 * (1.0 + want.gap[i] + std::abs(want.inertia / c.n));
    ASSERT_GE(got.labels[i], 0) << who << " row " << i;
    ASSERT_LT(got.labels[i], c.k) << who << " row " << i;
    if (got.labels[i] != want.labels[i]) {
      ++mismatched;
      EXPECT_LE(want.gap[i], slack) << who << " row " << i << ": label " << got.labels[i] << " vs " << want.labels[i];
    }
  }
  // A flipped near-tie moves a row between clusters: the sums are then
  // checked against the device's own labels, not skipped.
  const ref::KMeansAssignOut own = mismatched > 0 ? stats_of_labels(got.labels, x, cent, c) : want;
  for (std::int64_t kk = 0; kk < c.k; ++kk) EXPECT_EQ(got.counts[kk], own.counts[kk]) << who << " cluster " << kk;
  for (std::size_t j = 0; j < own.sums.size(); ++j)
    EXPECT_NEAR(got.sums[j], own.sums[j], 1e-5 * (1.0 + std::abs(own.sums[j]))) << who << " sum " << j;
  EXPECT_NEAR(got.inertia, own.inertia, 1e-5 * (1.0 + own.inertia)) << who;
}

const std::vector<Case> kCases = {
    {"small_int", 257, 3, 5, true},
    {"k1", 100, 4, 1, true},
    {"k_equals_n", 33, 2, 33, true},
    {"d1", 500, 1, 7, true},
    {"duplicates", 200, 5, 6, true, 50},
    {"empty_cluster", 300, 3, 4, true, 0, true},
    {"wide_int", 300, 64, 40, true},
    {"float_smalld", 4099, 2, 4, false},
    {"masked_k8", 1003, 2, 8, true},
    {"masked_d4_k3", 1001, 4, 3, true},
    {"wide8_int", 1029, 8, 8, true},  // d = 8 and 16: transposed in registers, a partial last step
    {"wide8_tiny", 5, 8, 3, true},    // fewer rows than one step
    {"wide16_float", 2003, 16, 30, false},
    {"wide16_dups", 515, 16, 9, true, 100},
    {"wide32_float", 777, 32, 12, false},
    {"wide48_float", 333, 48, 7, false},    // past d = 32 the transposed points live in L1
    {"wide128_float", 1000, 128, 20, false},
    {"rows_odd_d", 901, 37, 5, true},  // row by row: a partial last chunk, an odd number of chunks
    {"rows_mnist_like", 650, 784, 8, false},
    {"rows_two_groups", 903, 37, 13, true},  // k > 8: centroids in two passes over the rows; an odd last row
    {"rows_k16_float", 651, 784, 16, false},
    {"masked_d3_k7", 1005, 3, 7, false},      // float sums' lanes in double, k at compile time
    {"masked_d4_k8", 2001, 4, 8, false},
    {"masked_d4_k16", 1001, 4, 16, true},     // k past 8: eight lanes, k at run time
    {"masked_d2_k12", 1003, 2, 12, false},
    {"rows_d64_float", 1001, 64, 4, false},   // the rule takes the rows loop from d = 64 with k <= 8
    {"rows_d64_dups", 777, 64, 8, true, 50},  // exact ties between rows and centroids
    {"timed_pick", 400000, 3, 6, true},  // enough rows for the cpu to time its loops on slices of one launch
    {"float_wide", 1031, 100, 70, false},
    {"float_mnist_like", 700, 784, 256, false},
    {"float_groups", 3000, 10, 120, false},  // k > d: the bounds keep k/10 groups
};

class KMeansAssignConformance : public ::testing::TestWithParam<Case> {};

// Whether the device refuses the case. A refusal counts: only a shape past
// the device's stated limits may be refused (a backend that refused every
// shape had passed every case); one within them fails here.
bool refused_within_limits(const Device& dev, const Case& c) {
  const std::string why = dev.cannot_run(KMeansAssignArgs{.n = c.n, .d = c.d, .k = c.k});
  if (why.empty()) return false;
  const auto& info = dev.info();
  const bool past = (info.kmeans_max_k > 0 && c.k > info.kmeans_max_k) ||
                    (info.kmeans_max_d > 0 && c.d > info.kmeans_max_d);
  EXPECT_TRUE(past) << info.name << " refuses k=" << c.k << " d=" << c.d << " within its limits ('"
                    << info.limits << "'): " << why;
  return true;
}

TEST_P(KMeansAssignConformance, EveryDeviceMatchesReference) {
  const Case& c = GetParam();
  std::vector<float> x, cent;
  make_inputs(c, x, cent);
  const auto want = ref::kmeans_assign(x, c.n, c.d, cent, c.k);
  static const Registry reg = Registry::discover_all();
  int ran = 0;
  std::vector<std::string> ran_on;
  for (const auto& dev : reg.devices()) {
    const auto& info = dev->info();
    if (!dev->supports(KernelId::KMeansAssign)) continue;
    if (refused_within_limits(*dev, c)) continue;
    SCOPED_TRACE(info.name);
    expect_conforms(run_device(*dev, x, cent, c), want, c, info.name, x, cent);
    ++ran;
    ran_on.push_back(dev->info().name);
  }
  EXPECT_GE(ran, 2) << "cpu and fpga-emu are always present";
  test::expect_required_ran(ran_on);
}

// One of the CPU driver's loops by name, on rows x[0..n): "masked" (the
// widest lanes that fit), "masked8" (eight lanes), "wide", "rows",
// "gemm0" / "gemm1" (the gemm path's two score layouts).
Out run_cpu_loop(const std::string& loop, const float* x, std::int64_t n, std::int64_t d, const float* cent,
                 std::int64_t k) {
  Out o;
  o.labels.resize(n);
  o.sums.assign(k * d, 0.0);
  o.counts.assign(k, 0);
  std::int32_t* l = o.labels.data();
  double* s = o.sums.data();
  std::int64_t* cn = o.counts.data();
  if (loop == "masked" || loop == "masked8")
    cpu::kmeans_assign_masked(x, n, d, cent, k, l, s, cn, &o.inertia, loop == "masked8" ? 8 : 0);
  else if (loop == "wide")
    cpu::kmeans_assign_wide(x, n, d, cent, k, l, s, cn, &o.inertia);
  else if (loop == "rows")
    cpu::kmeans_assign_rows(x, n, d, cent, k, l, s, cn, &o.inertia);
  else
    cpu::kmeans_assign_gemm(x, n, d, cent, k, l, s, cn, &o.inertia, loop == "gemm1" ? 1 : 0);
  return o;
}

bool cpu_loop_fits(const std::string& loop, std::int64_t d, std::int64_t k) {
  if (loop == "masked" || loop == "masked8") return cpu::kmeans_assign_masked_fits(d, k);
  if (loop == "wide") return cpu::kmeans_assign_wide_fits(d);
  if (loop == "rows") return cpu::kmeans_assign_rows_fits(d, k);
  return true;
}

// The CPU driver's loops (chosen per shape by timing them) and the gemm
// path's two score layouts (chosen by speed): each must conform on every
// case it fits, not only on the shapes where it wins.
TEST_P(KMeansAssignConformance, EveryCpuLoopMatchesReference) {
  const Case& c = GetParam();
  std::vector<float> x, cent;
  make_inputs(c, x, cent);
  const auto want = ref::kmeans_assign(x, c.n, c.d, cent, c.k);
  for (const std::string loop : {"masked", "masked8", "wide", "gemm0", "gemm1", "rows"}) {
    if (!cpu_loop_fits(loop, c.d, c.k)) continue;
    expect_conforms(run_cpu_loop(loop, x.data(), c.n, c.d, cent.data(), c.k), want, c, "cpu " + loop, x, cent);
  }
}

// Launches that keep bounds (KMeansAssignArgs::bounds) must give what a full
// launch gives at every step: Lloyd updates (small moves, the common case),
// a jump of every centroid, a jitter below float rounding, a return to the
// start, and a state discarded by zeroing its header.
TEST_P(KMeansAssignConformance, BoundsMatchReferenceAcrossLaunches) {
  const Case& c = GetParam();
  std::vector<float> x, cent;
  make_inputs(c, x, cent);
  static const Registry reg = Registry::discover_all();
  int ran = 0;
  const KMeansAssignArgs shape{.n = c.n, .d = c.d, .k = c.k};
  for (const auto& dev : reg.devices()) {
    if (!dev->supports(KernelId::KMeansAssign) || refused_within_limits(*dev, c)) continue;
    auto bb = dev->create_state(shape);
    if (!bb) continue;  // a device that keeps no state
    SCOPED_TRACE(dev->info().name);
    auto bx = dev->allocate(x.size() * sizeof(float));
    auto bc = dev->allocate(cent.size() * sizeof(float));
    auto bl = dev->allocate(c.n * sizeof(std::int32_t));
    auto bs = dev->allocate(c.k * c.d * sizeof(double));
    auto bn = dev->allocate(c.k * sizeof(std::int64_t));
    auto bi = dev->allocate(sizeof(double));
    bx->write(x.data(), x.size() * sizeof(float));
    std::vector<float> cur = cent;
    std::mt19937 rng(7);
    std::normal_distribution<float> noise(0.0f, 1.0f);
    for (int step = 0; step < 9; ++step) {
      if (step == 4)
        for (auto& v : cur) v += c.integer_valued ? std::round(noise(rng)) : noise(rng);
      if (step == 5 && !c.integer_valued)  // (integer cases keep exact ties exact)
        for (auto& v : cur) v = std::nextafter(v, v + 1.0f);
      if (step == 6) cur = cent;
      if (step == 7) bb = dev->create_state(shape);  // a new state starts over
      bc->write(cur.data(), cur.size() * sizeof(float));
      dev->launch(KMeansAssignArgs{bx.get(), bc.get(), bl.get(), bs.get(), bn.get(), bi.get(), c.n, c.d, c.k,
                                   bb.get()})
          .wait();
      const Out o = read_outputs(*bl, *bs, *bn, *bi, c);
      const auto want = ref::kmeans_assign(x, c.n, c.d, cur, c.k);
      expect_conforms(o, want, c, dev->info().name + " bounds step " + std::to_string(step), x, cur);
      if (step < 3 || step >= 6)  // a Lloyd update (integer cases: rounded, to keep exact ties)
        for (std::int64_t kk = 0; kk < c.k; ++kk)
          for (std::int64_t j = 0; j < c.d && want.counts[kk] > 0; ++j) {
            const double m = want.sums[kk * c.d + j] / want.counts[kk];
            cur[kk * c.d + j] = static_cast<float>(c.integer_valued ? std::round(m) : m);
          }
    }
    ++ran;
  }
  EXPECT_GE(ran, 1) << "the cpu keeps bounds";
}

// A state made for fewer rows, or a plain buffer, is refused, not overrun.
TEST(KMeansAssignBounds, AStateOfAnotherShapeIsAnError) {
  const Registry reg = Registry::discover_all();
  Device* cpu = reg.select("cpu", KernelId::KMeansAssign).at(0);
  const std::int64_t n = 10, d = 4, k = 3;
  auto bx = cpu->allocate(n * d * sizeof(float)), bc = cpu->allocate(k * d * sizeof(float));
  auto bl = cpu->allocate(n * 4), bs = cpu->allocate(k * d * 8), bn = cpu->allocate(k * 8), bi = cpu->allocate(8);
  auto fewer = cpu->create_state(KMeansAssignArgs{.n = n / 2, .d = d, .k = k});
  auto plain = cpu->allocate(64);
  for (Buffer* state : {fewer.get(), plain.get()})
    EXPECT_THROW(cpu->launch(KMeansAssignArgs{bx.get(), bc.get(), bl.get(), bs.get(), bn.get(), bi.get(), n, d, k,
                                              state})
                     .wait(),
                 DeviceError);
}

INSTANTIATE_TEST_SUITE_P(Cases, KMeansAssignConformance, ::testing::ValuesIn(kCases),
                         [](const auto& info) { return info.param.name; });

// A backend that refuses every shape, within its (no) limits, is caught.
class RefusesEverything final : public Device {
 public:
  RefusesEverything() {
    info_.name = "refuses-everything";
    info_.kernels = {KernelId::KMeansAssign};
  }
  const DeviceInfo& info() const override { return info_; }
  std::unique_ptr<Buffer> allocate(std::size_t) override { return nullptr; }
  std::string cannot_run(const KernelArgs&) const override { return "no"; }
  Event enqueue(const KernelArgs&, std::vector<Event>) override { return {}; }

 private:
  DeviceInfo info_;
};

TEST(KMeansAssignConformance, ARefusalWithinTheLimitsFails) {
  const RefusesEverything dev;
  EXPECT_NONFATAL_FAILURE(refused_within_limits(dev, Case{"small", 10, 2, 2, false}), "within its limits");
  // Past stated limits, a refusal is fine.
  struct Limited final : Device {
    DeviceInfo i;
    Limited() { i.name = "limited", i.kmeans_max_k = 4, i.kernels = {KernelId::KMeansAssign}; }
    const DeviceInfo& info() const override { return i; }
    std::unique_ptr<Buffer> allocate(std::size_t) override { return nullptr; }
    std::string cannot_run(const KernelArgs&) const override { return "k too large"; }
    Event enqueue(const KernelArgs&, std::vector<Event>) override { return {}; }
  } limited;
  EXPECT_TRUE(refused_within_limits(limited, Case{"big k", 10, 2, 8, false}));
}

// Backends this build has but this machine cannot run: visible as skips.
TEST(KMeansAssignConformance, HardwareBackendsPresentOrExplained) {
  const Registry reg = Registry::discover_all();
  std::string missing;
  for (const auto& r : reg.reports())
    if (r.devices == 0) {
      EXPECT_FALSE(r.why_none.empty()) << r.backend << " found nothing and gave no reason";
      missing += r.backend + ": " + r.why_none + "; ";
    }
  if (!missing.empty()) GTEST_SKIP() << "no hardware for: " << missing;
}

// The gemm path's two score layouts must give the same labels, counts, sums
// and inertia, to the bit: which one runs is learnt by timing and shared by
// the process (LayoutPicker), so a difference would make a result depend on
// what the process ran before. OpenBLAS may sum a score over d in another
// order in each layout (it does on Zen 4), so they agree only because rows
// whose best scores lie within the rounding bound are settled by distance
// in double; this checks it on rows placed halfway between two centroids.
std::int64_t nearest_in_order(const float* xi, std::int64_t d, const float* c, std::int64_t k) {
  std::int64_t arg = 0;
  double best = 1e300;
  for (std::int64_t kk = 0; kk < k; ++kk) {
    double s = 0;
    for (std::int64_t j = 0; j < d; ++j) s += (double(xi[j]) - c[kk * d + j]) * (double(xi[j]) - c[kk * d + j]);
    if (s < best) best = s, arg = kk;
  }
  return arg;
}

// Rows halfway between two random centroids (plus noise far below float
// rounding): many of them have two scores within rounding of each other.
void make_near_ties(std::int64_t n, std::int64_t d, std::int64_t k, unsigned seed, std::vector<float>& x,
                    std::vector<float>& cent) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> g(0.0f, 1.0f);
  cent.resize(k * d);
  x.resize(n * d);
  for (auto& v : cent) v = g(rng);
  std::uniform_int_distribution<std::int64_t> pick(0, k - 1);
  for (std::int64_t i = 0; i < n; ++i) {
    const std::int64_t a = pick(rng), b = (a + 1 + pick(rng) % (k - 1)) % k;
    for (std::int64_t j = 0; j < d; ++j)
      x[i * d + j] = 0.5f * (cent[a * d + j] + cent[b * d + j]) + 1e-6f * g(rng);
  }
}

// Rows whose two nearest centroids' scores differ by less than one float
// score's rounding bound, (d + 2) 2^-24 (|x| |c|max + |c|max^2 / 2): float
// scores alone may order them either way.
std::int64_t count_near_ties(const std::vector<float>& x, const std::vector<float>& cent, std::int64_t n,
                             std::int64_t d, std::int64_t k) {
  double cmax2 = 0;
  for (std::int64_t kk = 0; kk < k; ++kk) {
    double s = 0;
    for (std::int64_t j = 0; j < d; ++j) s += double(cent[kk * d + j]) * cent[kk * d + j];
    cmax2 = std::max(cmax2, s);
  }
  std::int64_t hard = 0;
  for (std::int64_t i = 0; i < n; ++i) {
    const float* xi = x.data() + i * d;
    double first = 1e300, second = 1e300, xx = 0;
    for (std::int64_t j = 0; j < d; ++j) xx += double(xi[j]) * xi[j];
    for (std::int64_t kk = 0; kk < k; ++kk) {
      double s = 0;
      for (std::int64_t j = 0; j < d; ++j) s += (double(xi[j]) - cent[kk * d + j]) * (double(xi[j]) - cent[kk * d + j]);
      if (s < first) second = first, first = s;
      else if (s < second) second = s;
    }
    hard += (second - first) / 2 < (d + 2) * 0x1p-24 * (std::sqrt(xx * cmax2) + cmax2 / 2);
  }
  return hard;
}

TEST(KMeansAssignLayouts, NearTiesGetTheSameLabelFromEitherLayout) {
  const std::int64_t n = 20000, d = 100, k = 128;
  std::vector<float> cent, x;
  make_near_ties(n, d, k, 11, x, cent);
  Out o[2];
  for (int layout = 0; layout < 2; ++layout) {
    o[layout].labels.resize(n);
    o[layout].sums.resize(k * d);
    o[layout].counts.resize(k);
    cpu::kmeans_assign_gemm(x.data(), n, d, cent.data(), k, o[layout].labels.data(), o[layout].sums.data(),
                            o[layout].counts.data(), &o[layout].inertia, layout);
  }
  std::int64_t differ = 0, rounded = 0;
  for (std::int64_t i = 0; i < n; ++i) {
    differ += o[0].labels[i] != o[1].labels[i];
    rounded += o[0].labels[i] != nearest_in_order(x.data() + i * d, d, cent.data(), k);
  }
  // Else this test would check nothing: the rows must be that close.
  EXPECT_GT(count_near_ties(x, cent, n, d, k), n / 100) << "too few rows within float rounding of a tie";
  EXPECT_EQ(rounded, 0) << "rows not labelled with their nearest centroid in double";
  EXPECT_EQ(differ, 0) << "rows labelled differently by the two layouts";
  EXPECT_EQ(o[0].counts, o[1].counts);
  EXPECT_EQ(o[0].sums, o[1].sums);
  EXPECT_EQ(o[0].inertia, o[1].inertia);
}

// The rows loop labels sixteen rows a vector with a tie bound computed in
// float lanes (the rows past the last whole block zero-padded to one): it
// must send every row within rounding of a tie to the double settle, so
// each row gets its nearest centroid in double.
TEST(KMeansAssignLoops, RowsLoopSettlesNearTiesInDouble) {
  const std::int64_t n = 16 * 250 + 3;  // whole blocks and a tail of three rows
  for (const auto [d, k] : {std::pair<std::int64_t, std::int64_t>{64, 8}, {100, 16}, {784, 5}}) {
    SCOPED_TRACE("d=" + std::to_string(d) + " k=" + std::to_string(k));
    std::vector<float> cent, x;
    make_near_ties(n, d, k, 13, x, cent);
    Out o;
    o.labels.resize(n);
    o.sums.resize(k * d);
    o.counts.resize(k);
    cpu::kmeans_assign_rows(x.data(), n, d, cent.data(), k, o.labels.data(), o.sums.data(), o.counts.data(),
                            &o.inertia);
    std::int64_t rounded = 0;
    for (std::int64_t i = 0; i < n; ++i) rounded += o.labels[i] != nearest_in_order(x.data() + i * d, d, cent.data(), k);
    EXPECT_GT(count_near_ties(x, cent, n, d, k), n / 100) << "too few rows within float rounding of a tie";
    EXPECT_EQ(rounded, 0) << "rows not labelled with their nearest centroid in double";
  }
}

// The cluster engine splits rows among members and has members stand in
// for lost ones' rows, and checks that a run with failures ends where the
// failure-free one does: so where a launch's rows begin may move a loop's
// sums and inertia by double rounding only, never by float's. Each loop
// runs on all rows, and on three launches split at odd rows whose outputs
// are added; float lanes flushed by position (the masked loop's, before)
// put them ~1e-7 apart.
TEST(KMeansAssignLoops, SplitLaunchesAgreeToDoubleRounding) {
  struct Shape {
    const char* loop;
    std::int64_t d, k;
  };
  const Shape shapes[] = {{"masked", 2, 8},   {"masked", 3, 5}, {"masked", 4, 4}, {"masked8", 2, 8},
                          {"masked8", 4, 12}, {"wide", 8, 8},   {"wide", 2, 16},  {"rows", 64, 4},
                          {"gemm0", 100, 70}};
  const std::int64_t n = 20011, cuts[] = {0, 6007, 13001, n};
  for (const Shape& sh : shapes) {
    SCOPED_TRACE(std::string(sh.loop) + " d=" + std::to_string(sh.d) + " k=" + std::to_string(sh.k));
    const Case c{"split", n, sh.d, sh.k, false};
    std::vector<float> x, cent;
    make_inputs(c, x, cent);
    auto run = [&](std::int64_t i0, std::int64_t i1, Out& o) {
      o = run_cpu_loop(sh.loop, x.data() + i0 * c.d, i1 - i0, c.d, cent.data(), c.k);
    };
    Out whole;
    run(0, n, whole);
    std::vector<double> sums(c.k * c.d, 0.0);
    std::vector<std::int64_t> counts(c.k, 0);
    double inertia = 0;
    for (int p = 0; p < 3; ++p) {
      Out part;
      run(cuts[p], cuts[p + 1], part);
      for (std::size_t e = 0; e < sums.size(); ++e) sums[e] += part.sums[e];
      for (std::int64_t kk = 0; kk < c.k; ++kk) counts[kk] += part.counts[kk];
      inertia += part.inertia;
      for (std::int64_t i = cuts[p]; i < cuts[p + 1]; ++i) ASSERT_EQ(part.labels[i - cuts[p]], whole.labels[i]) << "row " << i;
    }
    EXPECT_EQ(counts, whole.counts);
    // Each sum is of ~n / k rows of |x| < 6: double rounding moves it by far
    // less than 1e-10 of the sum of the magnitudes; float's by ~1e-7.
    std::vector<double> mag(c.k * c.d, 0.0);
    for (std::int64_t i = 0; i < n; ++i)
      for (std::int64_t j = 0; j < c.d; ++j) mag[whole.labels[i] * c.d + j] += std::abs(x[i * c.d + j]);
    for (std::size_t e = 0; e < sums.size(); ++e) EXPECT_NEAR(sums[e], whole.sums[e], 1e-10 * mag[e]) << "sum " << e;
    EXPECT_NEAR(inertia, whole.inertia, 1e-10 * whole.inertia);
  }
}

}  // namespace
}  // namespace accel
