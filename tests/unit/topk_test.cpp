#include <algorithm>
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <memory>
#include <random>

#include "accel/error.hpp"
#include "accel/registry.hpp"
#include "accel/topk.hpp"
#include "conformance/required_devices.hpp"
#include "reference/topk_ref.hpp"

namespace accel {
namespace {

const Registry& registry() {
  static const Registry reg = Registry::discover_all();
  return reg;
}

std::vector<float> laplace(std::int64_t n, unsigned seed, float mean = 5e-4f, float stddev = 5e-3f) {
  std::mt19937 rng(seed);
  std::exponential_distribution<float> e(std::sqrt(2.0f) / stddev);
  std::bernoulli_distribution sign(0.5);
  std::vector<float> x(n);
  for (auto& v : x) v = mean + (sign(rng) ? 1 : -1) * e(rng);
  return x;
}

const std::vector<TopKMethod> kAll = {TopKMethod::Exact, TopKMethod::LdteBs, TopKMethod::LdteHist,
                                      TopKMethod::NthElement, TopKMethod::Sample};

// S must be exactly {i : |x_i| >= tau, finite}, ascending.
void expect_consistent(const std::vector<float>& x, const TopKResult& r) {
  std::vector<std::int64_t> want;
  for (std::size_t i = 0; i < x.size(); ++i)
    if (std::isfinite(x[i]) && std::fabs(x[i]) >= r.tau) want.push_back(static_cast<std::int64_t>(i));
  EXPECT_EQ(r.indices, want);
}

class TopKMethods : public ::testing::TestWithParam<std::tuple<TopKMethod, std::string>> {
 protected:
  TopKSelector selector() { return TopKSelector(registry().select(std::get<1>(GetParam()), KernelId::TopKHistogram)[0]); }
  TopKOptions opts(double ratio) {
    TopKOptions o;
    o.ratio = ratio;
    o.method = std::get<0>(GetParam());
    return o;
  }
};

TEST_P(TopKMethods, LaplaceAtTheSeedsSetting) {
  // Large enough (2^21) that exact and ldte-hist take the sampled-window path.
  const auto x = laplace(1 << 21, 11);
  auto sel = selector();
  const auto r = sel.select(x.data(), static_cast<std::int64_t>(x.size()), opts(0.001));
  EXPECT_EQ(r.k, static_cast<std::int64_t>(std::ceil(0.001 * x.size())));
  expect_consistent(x, r);
  const auto s = static_cast<std::int64_t>(r.indices.size());
  switch (std::get<0>(GetParam())) {
    case TopKMethod::Exact:
    case TopKMethod::NthElement:
      EXPECT_EQ(r.tau, ref::kth_largest_magnitude(x, r.k));
      EXPECT_EQ(s, r.k);  // distinct values
      break;
    case TopKMethod::LdteBs:
    case TopKMethod::LdteHist:
      EXPECT_GE(s, r.k);
      EXPECT_LE(s, static_cast<std::int64_t>(1.5 * r.k));
      EXPECT_GT(r.estimate, 0);
      break;
    case TopKMethod::Sample:
      EXPECT_NEAR(static_cast<double>(s) / r.k, 1.0, 0.5);
      break;
  }
  // One read of R: the sampled floor lies below the k-th value, and the
  // pass lists the window's values.
  if (std::get<0>(GetParam()) == TopKMethod::Exact || std::get<0>(GetParam()) == TopKMethod::LdteHist)
    EXPECT_EQ(r.passes, 1);
}

TEST_P(TopKMethods, GaussAndUniformStillMeetTheBounds) {
  // Not Laplacian: the estimate is off and the methods must correct it.
  std::mt19937 rng(5);
  std::normal_distribution<float> g(0, 1);
  std::uniform_real_distribution<float> u(-1, 1);
  for (int dist = 0; dist < 2; ++dist) {
    std::vector<float> x(1 << 20);
    for (auto& v : x) v = dist == 0 ? g(rng) : u(rng);
    auto sel = selector();
    const auto r = sel.select(x.data(), static_cast<std::int64_t>(x.size()), opts(0.01));
    expect_consistent(x, r);
    const auto s = static_cast<std::int64_t>(r.indices.size());
    if (std::get<0>(GetParam()) != TopKMethod::Sample) {
      EXPECT_GE(s, r.k) << dist;
      EXPECT_LE(s, static_cast<std::int64_t>(1.5 * r.k)) << dist;
    }
  }
}

TEST_P(TopKMethods, EdgeCases) {
  auto sel = selector();
  auto run = [&](const std::vector<float>& x, double ratio) {
    auto r = sel.select(x.data(), static_cast<std::int64_t>(x.size()), opts(ratio));
    expect_consistent(x, r);
    return r;
  };
  const auto x = laplace(1000, 3);
  auto r = run(x, 0.0);  // k = 0
  EXPECT_EQ(r.k, 0);
  EXPECT_TRUE(r.indices.empty());
  r = run(x, 1.0);  // k >= n
  EXPECT_EQ(r.indices.size(), x.size());
  r = run(std::vector<float>(777, 0.0f), 0.01);  // all zeros: every value ties
  EXPECT_EQ(r.indices.size(), 777u);
  r = run(std::vector<float>(500, -2.5f), 0.1);  // all equal
  EXPECT_EQ(r.indices.size(), 500u);
  auto spike = laplace(5000, 4);
  spike[1234] = 1e30f;  // a single huge value
  r = run(spike, 1.0 / 5000);
  EXPECT_EQ(r.k, 1);
  if (std::get<0>(GetParam()) != TopKMethod::Sample) {
    ASSERT_FALSE(r.indices.empty());
    EXPECT_EQ(r.indices.back(), 1234);
  }
  r = run({0.5f, -3.0f, 2.0f}, 0.34);  // n smaller than any block
  EXPECT_EQ(r.k, 2);
  if (std::get<0>(GetParam()) != TopKMethod::Sample) EXPECT_EQ(r.indices, (std::vector<std::int64_t>{1, 2}));
  r = run({}, 0.5);
  EXPECT_EQ(r.k, 0);
}

TEST_P(TopKMethods, NonFiniteIsAnErrorNamingTheIndexOrExcluded) {
  auto sel = selector();
  auto x = laplace(4000, 6);
  x[2718] = std::numeric_limits<float>::quiet_NaN();
  x[3000] = -std::numeric_limits<float>::infinity();
  auto o = opts(0.01);
  try {
    sel.select(x.data(), static_cast<std::int64_t>(x.size()), o);
    FAIL() << "no error";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("R[2718] is NaN"), std::string::npos) << e.what();
  }
  o.nonfinite = NonFinitePolicy::Exclude;
  const auto r = sel.select(x.data(), static_cast<std::int64_t>(x.size()), o);
  expect_consistent(x, r);
  if (std::get<0>(GetParam()) != TopKMethod::Sample) EXPECT_EQ(r.nonfinite, 2);
}

INSTANTIATE_TEST_SUITE_P(
    Methods, TopKMethods,
    ::testing::Combine(::testing::ValuesIn(kAll), ::testing::Values(std::string("cpu"), std::string("fpga-emu"))),
    [](const auto& info) {
      std::string s = to_string(std::get<0>(info.param)) + "_" + std::get<1>(info.param);
      std::replace(s.begin(), s.end(), '-', '_');
      return s;
    });

// R already on the device (a CUDA tensor's case): select(Buffer&) must give
// what select(host pointer) gives on the same device, for every device
// and method: the exact methods read candidates' values from the pass
// instead of R; the others copy R back first. PoCL's buffers have no host
// pointer, so CI runs the device-resident path there too.
TEST(TopKDeviceResident, EveryDeviceMatchesItsHostPath) {
  std::mt19937 rng(8);
  std::normal_distribution<float> g(0, 1);
  std::vector<std::vector<float>> inputs = {laplace(1 << 21, 21), laplace(3 << 19, 22, 0.0f, 1.0f),
                                            laplace(5000, 23)};
  std::vector<float> gauss(1 << 20);
  for (auto& v : gauss) v = g(rng);
  inputs.push_back(gauss);
  auto with_nan = laplace(1 << 20, 24);
  with_nan[777] = std::numeric_limits<float>::quiet_NaN();
  inputs.push_back(with_nan);
  int devices = 0;
  std::vector<std::string> ran_on;
  for (const auto& dev : registry().devices()) {
    if (!dev->supports(KernelId::TopKHistogram)) continue;
    ++devices;
    ran_on.push_back(dev->info().name);
    SCOPED_TRACE(dev->info().name);
    TopKSelector host_sel(dev.get()), dev_sel(dev.get());
    for (const auto method : kAll)
      for (std::size_t c = 0; c < inputs.size(); ++c) {
        SCOPED_TRACE(to_string(method) + " input " + std::to_string(c));
        const auto& x = inputs[c];
        const auto n = static_cast<std::int64_t>(x.size());
        TopKOptions o;
        o.ratio = c == 1 || c == 2 ? 0.01 : 0.001;  // input 1: S past 4096, the radix sort
        o.method = method;
        o.nonfinite = NonFinitePolicy::Exclude;
        auto buf = dev->allocate(x.size() * sizeof(float));
        buf->write(x.data(), x.size() * sizeof(float));
        const auto want = host_sel.select(x.data(), n, o);
        const auto got = dev_sel.select(*buf, n, o);
        EXPECT_EQ(got.k, want.k);
        EXPECT_EQ(got.tau, want.tau);
        EXPECT_EQ(got.indices, want.indices);
        EXPECT_EQ(got.ties, want.ties);
        EXPECT_EQ(got.nonfinite, want.nonfinite);
        EXPECT_EQ(got.passes, want.passes);
      }
    // A NaN under NonFinitePolicy::Error is named from the device's R too.
    auto buf = dev->allocate(with_nan.size() * sizeof(float));
    buf->write(with_nan.data(), with_nan.size() * sizeof(float));
    TopKOptions o;
    o.method = TopKMethod::Exact;
    try {
      dev_sel.select(*buf, static_cast<std::int64_t>(with_nan.size()), o);
      ADD_FAILURE() << "no error";
    } catch (const InputError& e) {
      EXPECT_NE(std::string(e.what()).find("R[777] is NaN"), std::string::npos) << e.what();
    }
  }
  EXPECT_GE(devices, 2);
  test::expect_required_ran(ran_on);
}

TEST(TopKDeviceResident, ABufferTooSmallIsAnError) {
  Device* cpu = registry().select("cpu", KernelId::TopKHistogram)[0];
  TopKSelector sel(cpu);
  auto buf = cpu->allocate(400);
  EXPECT_THROW(sel.select(*buf, 101, TopKOptions{}), InputError);
}

TEST(TopK, BadRatioAndMethod) {
  TopKSelector sel(registry().select("cpu", KernelId::TopKHistogram)[0]);
  std::vector<float> x(10, 1.0f);
  TopKOptions o;
  o.ratio = 1.5;
  EXPECT_THROW(sel.select(x.data(), 10, o), InputError);
  EXPECT_THROW(parse_topk_method("quickselect"), InputError);
}

TEST(Sparsifier, ConservesEverythingFedIn) {
  // Gradients are multiples of 1/64 within +-4: every float sum is exact,
  // so emitted + residual must equal the sum of the gradients exactly.
  TopKSelector sel(registry().select("cpu", KernelId::TopKHistogram)[0]);
  SparsifierOptions so;
  so.topk.ratio = 0.01;
  so.topk.method = TopKMethod::LdteHist;
  const std::int64_t n = 20000;
  Sparsifier sp(n, so, sel);
  std::mt19937 rng(8);
  std::uniform_int_distribution<int> v(-256, 256);
  std::vector<double> fed(n, 0.0), emitted(n, 0.0);
  std::vector<float> g(n);
  for (int step = 0; step < 30; ++step) {
    for (std::int64_t i = 0; i < n; ++i) {
      g[i] = v(rng) / 64.0f;
      fed[i] += g[i];
    }
    const auto out = sp.step(g.data());
    EXPECT_GE(out.indices.size(), static_cast<std::size_t>(so.topk.ratio * n));
    for (std::size_t j = 0; j < out.indices.size(); ++j) {
      emitted[out.indices[j]] += out.values[j];
      EXPECT_EQ(sp.residual()[out.indices[j]], 0.0f);
    }
  }
  for (std::int64_t i = 0; i < n; ++i) EXPECT_EQ(emitted[i] + sp.residual()[i], fed[i]) << i;
}

TEST(Sparsifier, MomentumCorrectionAndMasking) {
  TopKSelector sel(registry().select("cpu", KernelId::TopKHistogram)[0]);
  SparsifierOptions so;
  so.topk.ratio = 0.25;
  so.topk.method = TopKMethod::Exact;
  so.momentum = 0.5;
  Sparsifier sp(4, so, sel);
  // Step 1: u = g, r = g; top 1 of 4 is index 3, zeroed in r and u.
  std::vector<float> g = {1, 2, 3, 10};
  auto out = sp.step(g.data());
  ASSERT_EQ(out.indices, (std::vector<std::int64_t>{3}));
  EXPECT_EQ(out.values[0], 10.0f);
  // Step 2: u = 0.5 u + g = {1.5, 3, 4.5, 1}; r = {1, 2, 3, 0} + u = {2.5, 5, 7.5, 1}.
  g = {1, 2, 3, 1};
  out = sp.step(g.data());
  ASSERT_EQ(out.indices, (std::vector<std::int64_t>{2}));
  EXPECT_EQ(out.values[0], 7.5f);
  EXPECT_EQ(sp.residual(), (std::vector<float>{2.5f, 5.0f, 0.0f, 1.0f}));
}

TEST(Sparsifier, WarmupSchedule) {
  TopKSelector sel(registry().select("cpu", KernelId::TopKHistogram)[0]);
  SparsifierOptions so;
  so.topk.ratio = 0.001;
  so.warmup = true;
  Sparsifier sp(10, so, sel);
  const double want[] = {0.25, 0.0625, 0.015625, 0.00390625, 0.001, 0.001};
  for (int e = 0; e < 6; ++e) {
    sp.set_epoch(e);
    EXPECT_DOUBLE_EQ(sp.ratio(), want[e]) << e;
  }
  // Between whole epochs, the ratio falls by the same factor 4 an epoch,
  // continuously: halfway through the first, 25% / 2.
  sp.set_epoch(0.5);
  EXPECT_DOUBLE_EQ(sp.ratio(), 0.125);
  sp.set_epoch(3.9);
  EXPECT_GT(sp.ratio(), 0.001);
  EXPECT_LT(sp.ratio(), 0.00390625);
}

// A bucket of layers from 3 to 30000 values; host_below 4096 sends the two
// large ones through the device's selector, the rest through the host pass.
const std::vector<std::int64_t> kLayers = {30000, 3, 512, 9000, 40, 5000};

// exact with the small layers on the host, or ldte-hist with every layer
// on the device (host_below 0).
class BucketLayers : public ::testing::TestWithParam<TopKMethod> {};

TEST_P(BucketLayers, EachLayerSelectsWhatItsOwnSparsifierWould) {
  TopKSelector sel(registry().select("cpu", KernelId::TopKHistogram)[0]);
  BucketOptions bo;
  bo.sparsifier.topk.ratio = 0.01;
  bo.sparsifier.topk.method = GetParam();
  bo.sparsifier.momentum = 0.9;
  bo.host_below = GetParam() == TopKMethod::Exact ? 4096 : 0;
  BucketSparsifier bucket(kLayers, bo, sel);
  std::vector<std::unique_ptr<Sparsifier>> alone;
  for (auto n : kLayers) alone.push_back(std::make_unique<Sparsifier>(n, bo.sparsifier, sel));
  const auto& off = bucket.offsets();
  for (int step = 0; step < 5; ++step) {
    const auto g = laplace(bucket.size(), 40 + step);
    const auto got = bucket.step(g.data());
    std::vector<std::int64_t> want_i;
    std::vector<float> want_v;
    for (std::size_t l = 0; l < kLayers.size(); ++l) {
      const auto one = alone[l]->step(g.data() + off[l]);
      for (std::size_t j = 0; j < one.indices.size(); ++j) {
        want_i.push_back(one.indices[j] + off[l]);
        want_v.push_back(one.values[j]);
      }
    }
    EXPECT_EQ(got.indices, want_i) << "step " << step;
    EXPECT_EQ(got.values, want_v) << "step " << step;
  }
  for (std::size_t l = 0; l < kLayers.size(); ++l)
    for (std::int64_t i = 0; i < kLayers[l]; ++i) ASSERT_EQ(bucket.residual()[off[l] + i], alone[l]->residual()[i]);
}

INSTANTIATE_TEST_SUITE_P(BucketSparsifier, BucketLayers, ::testing::Values(TopKMethod::Exact, TopKMethod::LdteHist),
                         [](const auto& info) { return info.param == TopKMethod::Exact ? "exact" : "ldte_hist"; });

TEST(BucketSparsifier, WholeLayersAreMomentumSgdAndKeepNoResidual) {
  TopKSelector sel(registry().select("cpu", KernelId::TopKHistogram)[0]);
  BucketOptions bo;
  bo.sparsifier.topk.ratio = 0.001;
  bo.sparsifier.topk.method = TopKMethod::LdteHist;
  bo.sparsifier.momentum = 0.5;
  bo.dense_below = 600;  // layers of 3, 512 and 40 values are whole
  BucketSparsifier bucket(kLayers, bo, sel);
  const auto& off = bucket.offsets();
  std::vector<float> velocity(bucket.size(), 0.0f);
  for (int step = 0; step < 4; ++step) {
    const auto g = laplace(bucket.size(), 70 + step);
    const auto got = bucket.step(g.data());
    for (std::int64_t i = 0; i < bucket.size(); ++i) velocity[i] = 0.5f * velocity[i] + g[i];
    for (std::size_t l : {1, 2, 4}) {
      // Every value of the layer, in order, and it is the velocity.
      const auto first = std::lower_bound(got.indices.begin(), got.indices.end(), off[l]) - got.indices.begin();
      ASSERT_LE(first + kLayers[l], static_cast<std::int64_t>(got.indices.size()));
      for (std::int64_t i = 0; i < kLayers[l]; ++i) {
        ASSERT_EQ(got.indices[first + i], off[l] + i);
        ASSERT_FLOAT_EQ(got.values[first + i], velocity[off[l] + i]) << "layer " << l << " value " << i;
        ASSERT_EQ(bucket.residual()[off[l] + i], 0.0f);
      }
    }
    // A sparsified layer sends about its ratio (k <= |S| <= 1.5 k).
    const auto in_first = std::lower_bound(got.indices.begin(), got.indices.end(), off[1]) - got.indices.begin();
    EXPECT_GE(in_first, 30);
    EXPECT_LE(in_first, 45);
  }
}

TEST(BucketSparsifier, BadInputNamesTheLayer) {
  TopKSelector sel(registry().select("cpu", KernelId::TopKHistogram)[0]);
  BucketOptions bo;
  bo.host_below = 4096;
  EXPECT_THROW(BucketSparsifier({}, bo, sel), InputError);
  EXPECT_THROW(BucketSparsifier({10, 0}, bo, sel), InputError);
  BucketOptions bad = bo;
  bad.sparsifier.topk.ratio = 0;
  EXPECT_THROW(BucketSparsifier({10}, bad, sel), InputError);
  for (std::size_t l : {2, 5}) {  // a host-selected layer, then a device-selected one
    BucketSparsifier bucket(kLayers, bo, sel);
    auto g = laplace(bucket.size(), 9);
    g[bucket.offsets()[l] + 7] = std::numeric_limits<float>::quiet_NaN();
    try {
      bucket.step(g.data());
      ADD_FAILURE() << "no error for a NaN in layer " << l;
    } catch (const InputError& e) {
      const std::string what = e.what();
      EXPECT_NE(what.find("layer " + std::to_string(l) + " (bucket offset"), std::string::npos) << what;
      EXPECT_TRUE(what.find("value 7 is NaN") != std::string::npos || what.find("R[7] is NaN") != std::string::npos)
          << what;
    }
  }
  bo.sparsifier.topk.nonfinite = NonFinitePolicy::Exclude;
  BucketSparsifier bucket(kLayers, bo, sel);
  auto g = laplace(bucket.size(), 9);
  g[bucket.offsets()[2] + 7] = std::numeric_limits<float>::infinity();
  const auto got = bucket.step(g.data());
  EXPECT_FALSE(std::binary_search(got.indices.begin(), got.indices.end(), bucket.offsets()[2] + 7));
  EXPECT_EQ(got.stats.nonfinite, 1);
}

}  // namespace
}  // namespace accel
