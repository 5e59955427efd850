// topk_histogram on every device that runs it, against the reference:
// identical counts and candidate lists, moments within rounding.
#include <gtest/gtest.h>

#include <cstring>

#include <set>

#include <algorithm>
#include <cmath>
#include <limits>
#include <random>

#include "accel/registry.hpp"
#include "accel/error.hpp"
#include "reference/topk_ref.hpp"
#include "conformance/required_devices.hpp"

namespace accel {
namespace {

struct Case {
  std::string name;
  std::vector<float> x;
  std::uint32_t lo, hi;
  int shift;
  std::int64_t bins;
  bool collect;
};

std::vector<float> laplace(std::int64_t n, unsigned seed) {
  std::mt19937 rng(seed);
  std::exponential_distribution<float> e(200.0f);
  std::bernoulli_distribution sign(0.5);
  std::vector<float> x(n);
  for (auto& v : x) v = (sign(rng) ? 1 : -1) * e(rng) + 5e-4f;
  return x;
}

std::vector<Case> cases() {
  std::vector<Case> c;
  const std::uint32_t inf = 0x7f800000u;
  c.push_back({"full_range", laplace(100003, 1), 0, inf, 18, inf >> 18, false});
  c.push_back({"window_collect", laplace(100003, 2), 0x3c000000u, inf, 18, (inf - 0x3c000000u) >> 18, true});
  c.push_back({"fine_slice", laplace(50000, 3), 0x3c000000u, 0x3c000000u + 65536, 0, 65536, true});
  c.push_back({"one_bin_count", laplace(4097, 4), 0x3c800000u, inf, 31, 1, false});
  auto special = laplace(3000, 5);
  special[7] = std::numeric_limits<float>::quiet_NaN();
  special[100] = std::numeric_limits<float>::infinity();
  special[101] = -std::numeric_limits<float>::infinity();
  special[2000] = 3e38f;
  c.push_back({"nonfinite_and_huge", special, 0x3c000000u, inf, 18, (inf - 0x3c000000u) >> 18, true});
  c.push_back({"smaller_than_a_block", {0.5f, -0.25f, 0.0f, -0.0f, 1e-30f}, 0, inf, 18, inf >> 18, true});
  c.push_back({"empty", {}, 0, inf, 18, inf >> 18, true});
  c.push_back({"all_zero", std::vector<float>(5000, 0.0f), 0, inf, 20, inf >> 20, true});
  return c;
}

class TopKHistogramConformance : public ::testing::TestWithParam<Case> {};

TEST_P(TopKHistogramConformance, EveryDeviceMatchesReference) {
  const Case& c = GetParam();
  const auto want = ref::topk_histogram(c.x, c.lo, c.hi, c.shift, c.bins);
  static const Registry reg = Registry::discover_all();
  int ran = 0;
  std::vector<std::string> ran_on;
  for (const auto& dev : reg.devices()) {
    if (!dev->supports(KernelId::TopKHistogram)) continue;
    SCOPED_TRACE(dev->info().name);
    const std::int64_t n = static_cast<std::int64_t>(c.x.size());
    auto data = dev->allocate(std::max<std::size_t>(n * 4, 4));
    auto hist = dev->allocate(c.bins * 8), mom = dev->allocate(24), out = dev->allocate(24);
    auto cand = dev->allocate(std::max<std::size_t>(n * 8, 8)), cnt = dev->allocate(8);
    auto vals = dev->allocate(std::max<std::size_t>(n * 4, 4));
    if (n) data->write(c.x.data(), n * 4);
    // With and without the moments (the exact method does not read them):
    // everything else must be the same either way.
    for (const bool want_moments : {true, false}) {
    SCOPED_TRACE(want_moments ? "with moments" : "without moments");
    TopKHistogramArgs a{data.get(), hist.get(), mom.get(), out.get(), n, c.lo, c.hi, c.shift, c.bins};
    a.want_moments = want_moments;
    if (c.collect) {
      a.candidates = cand.get();
      a.candidate_count = cnt.get();
      a.capacity = n;
      a.candidate_values = vals.get();
    }
    dev->launch(a).wait();
    std::vector<std::uint64_t> h(c.bins);
    hist->read(h.data(), c.bins * 8);
    EXPECT_EQ(h, want.hist);
    double m[3];
    std::uint64_t o[3];
    mom->read(m, 24);
    out->read(o, 24);
    if (want_moments) {
      // A float sum's rounding is bounded by its terms' magnitudes (sum of
      // |x|), not by the sum of squares, which overflows at 3e38 and made
      // this check vacuous there.
      double l1 = 0;
      for (float v : c.x)
        if (std::isfinite(v)) l1 += std::abs(static_cast<double>(v));
      EXPECT_NEAR(m[0], want.sum, 1e-5 * (1 + l1));
      EXPECT_NEAR(m[1], want.sumsq, 1e-5 * (1 + want.sumsq));
      EXPECT_EQ(m[2], want.maxabs);
    }
    EXPECT_EQ(o[0], want.below);
    EXPECT_EQ(o[1], want.above);
    EXPECT_EQ(o[2], want.nonfinite);
    if (c.collect) {
      std::uint64_t found = 0;
      cnt->read(&found, 8);
      ASSERT_EQ(found, want.candidates.size());
      std::vector<std::int64_t> got(found);
      std::vector<float> got_values(found);
      if (found) cand->read(got.data(), found * 8);
      if (found) vals->read(got_values.data(), found * 4);
      for (std::uint64_t j = 0; j < found; ++j) {  // each value beside its index, bit for bit
        ASSERT_TRUE(got[j] >= 0 && got[j] < n);
        std::uint32_t want_bits, got_bits;
        std::memcpy(&want_bits, &c.x[got[j]], 4);
        std::memcpy(&got_bits, &got_values[j], 4);
        EXPECT_EQ(got_bits, want_bits) << "candidate " << j << " (index " << got[j] << ")";
      }
      std::sort(got.begin(), got.end());  // any order is allowed
      EXPECT_EQ(got, want.candidates);
    }
    }
    ++ran;
    ran_on.push_back(dev->info().name);
  }
  EXPECT_GE(ran, 2) << "cpu and fpga-emu are always present";
  test::expect_required_ran(ran_on);
}

INSTANTIATE_TEST_SUITE_P(Cases, TopKHistogramConformance, ::testing::ValuesIn(cases()),
                         [](const auto& info) { return info.param.name; });

TEST(TopKHistogramConformance, CandidatesBeyondCapacityAreCountedNotWritten) {
  static const Registry reg = Registry::discover_all();
  const auto x = laplace(10000, 9);
  const auto want = ref::topk_histogram(x, 0x3c000000u, 0x7f800000u, 31, 1);
  ASSERT_GT(want.candidates.size(), 10u);
  for (const auto& dev : reg.devices()) {
    if (!dev->supports(KernelId::TopKHistogram)) continue;
    // Room for 10 candidates and 6 guard slots beyond the capacity.
    auto data = dev->allocate(x.size() * 4), hist = dev->allocate(8), mom = dev->allocate(24),
         out = dev->allocate(24), cand = dev->allocate(16 * 8), cnt = dev->allocate(8);
    data->write(x.data(), x.size() * 4);
    std::vector<std::int64_t> slots(16, -7);
    cand->write(slots.data(), 16 * 8);
    TopKHistogramArgs a{data.get(), hist.get(), mom.get(), out.get(), static_cast<std::int64_t>(x.size()),
                        0x3c000000u, 0x7f800000u, 31, 1, cand.get(), cnt.get(), 10};
    dev->launch(a).wait();
    std::uint64_t found = 0;
    cnt->read(&found, 8);
    EXPECT_EQ(found, want.candidates.size()) << dev->info().name;
    cand->read(slots.data(), 16 * 8);
    for (int i = 0; i < 10; ++i)  // written: true candidates, each once
      EXPECT_TRUE(std::binary_search(want.candidates.begin(), want.candidates.end(), slots[i]))
          << dev->info().name << " slot " << i << ": " << slots[i];
    std::set<std::int64_t> distinct(slots.begin(), slots.begin() + 10);
    EXPECT_EQ(distinct.size(), 10u) << dev->info().name;
    for (int i = 10; i < 16; ++i) EXPECT_EQ(slots[i], -7) << dev->info().name << " wrote past the capacity";
  }
}

TEST(TopKHistogramConformance, InconsistentArgumentsAreDeviceErrors) {
  static const Registry reg = Registry::discover_all();
  for (const auto& dev : reg.devices()) {
    if (!dev->supports(KernelId::TopKHistogram)) continue;
    auto data = dev->allocate(16), hist = dev->allocate(8), mom = dev->allocate(24), out = dev->allocate(24);
    // 2 bins cannot hold the whole float range at shift 18.
    TopKHistogramArgs a{data.get(), hist.get(), mom.get(), out.get(), 4, 0, 0x7f800000u, 18, 2};
    EXPECT_THROW(dev->launch(a).wait(), DeviceError) << dev->info().name;
  }
}

}  // namespace
}  // namespace accel
