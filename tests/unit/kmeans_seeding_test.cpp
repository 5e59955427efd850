// k-means seeding: the pruned D^2 state against brute force, k-means||'s
// candidates and weights, and both seedings on inputs past the old scalar
// passes' reach.
#include <gtest/gtest.h>

#include <cmath>
#include <random>

#include "accel/kmeans.hpp"
#include "../../host/algorithms/kmeans/seeding.hpp"

using namespace accel;

namespace {

// Gaussian blobs: well-separated groups (where the pruning skips most rows)
// plus one wide group (where it skips few).
Matrix blobs(std::int64_t n, std::int64_t d, int groups, unsigned seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> g(0, 1);
  std::vector<float> centers(groups * d);
  for (auto& v : centers) v = 20 * g(rng);
  Matrix x;
  x.rows = n;
  x.cols = d;
  x.data.resize(n * d);
  for (std::int64_t i = 0; i < n; ++i) {
    const int c = static_cast<int>(i % groups);
    const float spread = c == 0 ? 15.0f : 1.0f;
    for (std::int64_t j = 0; j < d; ++j) x.data[i * d + j] = centers[c * d + j] + spread * g(rng);
  }
  return x;
}

double brute_sqdist(const float* a, const float* b, std::int64_t d) {
  double s = 0;
  for (std::int64_t j = 0; j < d; ++j) s += (static_cast<double>(a[j]) - b[j]) * (a[j] - b[j]);
  return s;
}

}  // namespace

// After every added center, each row's distance is its distance to the
// nearest center so far, as if every row had been measured (within float
// rounding; a near-tie may name either center).
TEST(KMeansSeeding, PrunedDistancesEqualBruteForce) {
  for (std::int64_t d : {2, 17, 100}) {
    const Matrix x = blobs(6000, d, 8, static_cast<unsigned>(d));
    seeding::Seeder s(x, nullptr);
    std::mt19937_64 rng(1);
    std::vector<std::int64_t> picked;
    for (int t = 0; t < 40; ++t) {
      const std::int64_t p = t == 0 ? 0 : s.draw(rng);
      picked.push_back(p);
      s.add(x.row(p));
    }
    for (std::int64_t i = 0; i < x.rows; ++i) {
      double best = INFINITY;
      for (auto p : picked) best = std::min(best, brute_sqdist(x.row(i), x.row(p), d));
      ASSERT_NEAR(s.distances()[i], best, 1e-4 * best + 1e-3) << "d " << d << " row " << i;
      const auto j = s.nearest()[i];
      ASSERT_NEAR(brute_sqdist(x.row(i), x.row(picked[j]), d), best, 1e-4 * best + 1e-3) << "d " << d << " row " << i;
    }
  }
}

// A drawn row never repeats a center while any row is away from every
// center, and rows of weight 0 are never drawn.
TEST(KMeansSeeding, DrawsFollowWeights) {
  const Matrix x = blobs(3000, 5, 4, 3);
  std::vector<double> w(x.rows, 1.0);
  for (std::int64_t i = 0; i < x.rows; i += 2) w[i] = 0;
  seeding::Seeder s(x, w.data());
  s.add(x.row(1));
  std::mt19937_64 rng(2);
  for (int t = 0; t < 200; ++t) {
    const auto p = s.draw(rng);
    ASSERT_EQ(p % 2, 1) << "drew a row of weight 0";
    ASSERT_GT(s.distances()[p], 0.0f) << "drew a row already at a center";
  }
}

// Every k-means|| candidate is a row of x; the k seeds are distinct rows
// spread over the groups; the run is the same for the same seed.
TEST(KMeansSeeding, ParallelSeedsAreDistinctSpreadAndRepeatable) {
  const Matrix x = blobs(20000, 10, 16, 4);
  KMeansOptions o;
  o.k = 16;
  o.init = "kmeans-parallel";
  o.seed = 9;
  const Matrix a = kmeans_init(x, o), b = kmeans_init(x, o);
  EXPECT_EQ(a.data, b.data);
  int groups_hit = 0;
  std::vector<bool> hit(16, false);
  for (std::int64_t c = 0; c < a.rows; ++c) {
    // The group of the nearest row decides (rows of group g sit at i % 16 == g).
    double best = INFINITY;
    std::int64_t arg = 0;
    for (std::int64_t i = 0; i < x.rows; ++i) {
      const double dd = brute_sqdist(a.row(c), x.row(i), x.cols);
      if (dd < best) best = dd, arg = i;
    }
    EXPECT_EQ(best, 0.0) << "seed " << c << " is not a row";
    if (!hit[arg % 16]) ++groups_hit, hit[arg % 16] = true;
  }
  EXPECT_GE(groups_hit, 14);  // the 15 tight groups are 20 sigma apart; the wide one overlaps them
}
