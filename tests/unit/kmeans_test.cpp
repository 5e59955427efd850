#include <gtest/gtest.h>

#include <cmath>
#include <random>

#include "accel/error.hpp"
#include "accel/kmeans.hpp"
#include "accel/registry.hpp"

namespace accel {
namespace {

Matrix blobs(std::int64_t n, std::int64_t d, std::int64_t centers, unsigned seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> noise(0.0f, 0.3f);
  Matrix m;
  m.rows = n;
  m.cols = d;
  m.data.resize(n * d);
  for (std::int64_t i = 0; i < n; ++i)
    for (std::int64_t j = 0; j < d; ++j) m.data[i * d + j] = 10.0f * static_cast<float>((i % centers) == j % centers) + noise(rng);
  return m;
}

const Registry& registry() {
  static const Registry reg = Registry::discover_all();
  return reg;
}

KMeansResult run(const Matrix& x, KMeansOptions o, const std::string& device) {
  PerfModel model;
  const auto devs = kmeans_capable(registry().select(device, KernelId::KMeansAssign), o.k, x.cols);
  return kmeans(x, kmeans_init(x, o), o, devs, model);
}

TEST(KMeans, FindsSeparatedBlobs) {
  const Matrix x = blobs(3000, 3, 3, 1);
  KMeansOptions o;
  o.k = 3;
  o.seed = 7;
  const auto r = run(x, o, "cpu");
  EXPECT_TRUE(r.converged);
  // Every blob maps to one cluster.
  for (std::int64_t i = 3; i < x.rows; ++i) EXPECT_EQ(r.labels[i], r.labels[i % 3]);
  EXPECT_NE(r.labels[0], r.labels[1]);
  EXPECT_NE(r.labels[1], r.labels[2]);
  EXPECT_LT(r.inertia / x.rows, 3 * 0.3 * 0.3 * 1.5);
}

TEST(KMeans, TolZeroRunsExactlyMaxIter) {
  const Matrix x = blobs(500, 2, 4, 2);
  KMeansOptions o;
  o.k = 4;
  o.tol = 0;
  o.max_iter = 13;
  const auto r = run(x, o, "cpu");
  EXPECT_EQ(r.iterations, 13);
  EXPECT_FALSE(r.converged);
}

TEST(KMeans, AllDevicesGiveTheSameAnswerAsOne) {
  // Integer-valued data: every backend computes the same sums exactly.
  Matrix x;
  x.rows = 2000;
  x.cols = 4;
  std::mt19937 rng(3);
  std::uniform_int_distribution<int> v(-20, 20);
  for (std::int64_t i = 0; i < x.rows * x.cols; ++i) x.data.push_back(static_cast<float>(v(rng)));
  KMeansOptions o;
  o.k = 6;
  o.tol = 0;
  o.max_iter = 8;
  o.init = "random";
  const auto one = run(x, o, "cpu");
  const auto all = run(x, o, "cpu,fpga-emu");
  EXPECT_GE(all.devices.size(), 2u);
  EXPECT_EQ(one.labels, all.labels);
  for (std::size_t j = 0; j < one.centroids.data.size(); ++j)
    EXPECT_NEAR(one.centroids.data[j], all.centroids.data[j], 1e-5 * (1 + std::abs(one.centroids.data[j])));
  EXPECT_NEAR(one.inertia, all.inertia, 1e-5 * one.inertia);
}

TEST(KMeans, FpgaEmuMatchesCpu) {
  const Matrix x = blobs(1000, 5, 4, 4);
  KMeansOptions o;
  o.k = 4;
  o.tol = 0;
  o.max_iter = 5;
  o.init = "random";
  const auto a = run(x, o, "cpu");
  const auto b = run(x, o, "fpga-emu");
  EXPECT_EQ(a.labels, b.labels);
  EXPECT_NEAR(a.inertia, b.inertia, 1e-5 * a.inertia);
}

TEST(KMeans, KEqualsNAndKOne) {
  const Matrix x = blobs(20, 2, 2, 5);
  KMeansOptions o;
  o.k = 20;
  o.init = "random";
  auto r = run(x, o, "cpu");
  EXPECT_NEAR(r.inertia, 0.0, 1e-9);
  o.k = 1;
  r = run(x, o, "cpu");
  for (auto l : r.labels) EXPECT_EQ(l, 0);
}

TEST(KMeans, KGreaterThanNIsInputError) {
  const Matrix x = blobs(5, 2, 2, 6);
  KMeansOptions o;
  o.k = 6;
  EXPECT_THROW(kmeans_init(x, o), InputError);
}

TEST(KMeans, InitMethodsGiveDistinctRows) {
  const Matrix x = blobs(400, 3, 4, 8);
  for (const char* init : {"random", "kmeans++", "kmeans-parallel"}) {
    KMeansOptions o;
    o.k = 4;
    o.init = init;
    const Matrix c = kmeans_init(x, o);
    ASSERT_EQ(c.rows, 4) << init;
    // k-means++ and k-means|| spread over the 4 blobs: all pairwise far apart.
    if (std::string(init) != "random")
      for (int a = 0; a < 4; ++a)
        for (int b = a + 1; b < 4; ++b) {
          double s = 0;
          for (int j = 0; j < 3; ++j) s += std::pow(c.data[a * 3 + j] - c.data[b * 3 + j], 2);
          EXPECT_GT(s, 25.0) << init;
        }
  }
}

TEST(KMeans, EmptyClustersAreReseededBySplittingTheLargest) {
  std::vector<double> c = {0, 0, 5, 5, 9, 9};
  std::vector<std::int64_t> counts = {10, 0, 4};
  EXPECT_EQ(reseed_empty(c, counts, 3, 2), 1);
  EXPECT_EQ(counts[1], 5);
  EXPECT_EQ(counts[0], 5);
  EXPECT_NE(c[2], c[0]);
  EXPECT_NEAR(c[2], 0.0, 1e-2);
}

TEST(KMeans, DuplicatePointsCauseReseedingNotCrash) {
  // 3 distinct points, k = 5: clusters empty out and are re-seeded.
  Matrix x;
  x.rows = 30;
  x.cols = 1;
  for (int i = 0; i < 30; ++i) x.data.push_back(static_cast<float>(i % 3));
  KMeansOptions o;
  o.k = 5;
  o.init = "random";
  o.max_iter = 10;
  o.seed = 1;
  const auto r = run(x, o, "cpu");
  EXPECT_NEAR(r.inertia, 0.0, 1e-6);
}

}  // namespace
}  // namespace accel

namespace accel {
namespace {

TEST(KMeans, DeviceAllSplitsRowsByMeasuredThroughput) {
  // The model says the cpu is 3x the emulator: rows follow 3:1 from the first
  // iteration, and every iteration's measurement lands in the model.
  const Matrix x = blobs(20000, 16, 4, 9);
  KMeansOptions o;
  o.k = 16;
  o.tol = 0;
  o.max_iter = 2;
  o.init = "random";
  const std::vector<Device*> devs = {registry().select("cpu", KernelId::KMeansAssign)[0],
                                    registry().select("fpga-emu", KernelId::KMeansAssign)[0]};
  PerfModel model;
  for (auto* d : devs) model.record({d->info().name, KernelId::KMeansAssign, x.cols, o.k}, d->info().family == "cpu" ? 3000 : 1000, 1.0);
  std::vector<std::vector<std::int64_t>> rows;
  kmeans(x, kmeans_init(x, o), o, devs, model, [&](const KMeansIteration& it) { rows.push_back(it.rows_per_device); });
  ASSERT_EQ(rows.size(), 2u);
  for (std::size_t i = 0; i < devs.size(); ++i) {
    EXPECT_NEAR(static_cast<double>(rows[0][i]) / x.rows, i == 0 ? 0.75 : 0.25, 0.03);
    const auto rate = model.rows_per_second({devs[i]->info().name, KernelId::KMeansAssign, x.cols, o.k});
    ASSERT_TRUE(rate);
    EXPECT_NE(*rate, devs[i]->info().family == "cpu" ? 3000.0 : 1000.0) << "measurement recorded";
  }
}

}  // namespace
}  // namespace accel
