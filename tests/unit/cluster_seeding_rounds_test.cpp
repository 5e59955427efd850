// k-means|| drawn in rounds by members over pieces of the input
// (seeding_rounds.hpp): the seeds equal one process's over the whole input
// however the rows are split, through a state handed to a participant
// mid-way, on degenerate data, and without a row nobody holds; and
// contributions no round can hold are refused.
#include <gtest/gtest.h>

#include <cmath>
#include <memory>
#include <random>

#include "accel/error.hpp"
#include "accel/kmeans.hpp"
#include "kmeans/seeding_rounds.hpp"

using namespace accel;
using namespace accel::cluster;
namespace kp = accel::kmeans_parallel;

namespace {

Matrix blobs(std::int64_t n, std::int64_t d, int groups, unsigned seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> g(0, 1);
  std::vector<float> centers(groups * d);
  for (auto& v : centers) v = 20 * g(rng);
  Matrix x;
  x.rows = n;
  x.cols = d;
  x.data.resize(n * d);
  for (std::int64_t i = 0; i < n; ++i)
    for (std::int64_t j = 0; j < d; ++j) x.data[i * d + j] = centers[(i % groups) * d + j] + g(rng);
  return x;
}

std::vector<float> single_node(const Matrix& x, std::int64_t k, std::uint64_t seed) {
  KMeansOptions o;
  o.k = k;
  o.init = "kmeans-parallel";
  o.seed = seed;
  return kmeans_init(x, o).data;
}

// Members, each a participant with its own state and the rows between two
// cuts; member `skip` never contributes (its rows are nobody's).
struct Members {
  std::vector<std::unique_ptr<kp::Piece>> pieces;
  std::vector<SeedingRounds> states;
  Members(const Matrix& x, const std::vector<std::int64_t>& cuts, std::int64_t k, std::uint64_t seed) {
    for (std::size_t m = 0; m + 1 < cuts.size(); ++m) {
      pieces.push_back(std::make_unique<kp::Piece>(x.row(cuts[m]), cuts[m], cuts[m + 1] - cuts[m], x.cols));
      states.emplace_back(seed, x.rows, x.cols, k);
    }
  }
  // One round: every member contributes from its piece, every one absorbs.
  void round(int skip = -1) {
    std::map<std::uint32_t, Bytes> got;
    for (std::size_t m = 0; m < states.size(); ++m)
      got[static_cast<std::uint32_t>(m)] =
          static_cast<int>(m) == skip ? states[m].nothing() : states[m].contribute({pieces[m].get()});
    for (auto& s : states) {
      for (const auto& [id, b] : got) s.validate(b);
      s.absorb(got);
    }
  }
  bool done() const { return states.front().done(); }
};

TEST(SeedingRounds, MembersDrawOneProcesssSeedsHoweverTheRowsAreSplit) {
  const Matrix x = blobs(30000, 12, 20, 3);
  const auto want = single_node(x, 20, 7);
  for (const auto& cuts : std::vector<std::vector<std::int64_t>>{{0, 30000}, {0, 1, 12345, 30000},
                                                                   {0, 255, 256, 257, 9999, 20000, 30000}}) {
    Members m(x, cuts, 20, 7);
    int rounds = 0;
    while (!m.done() && rounds < 40) m.round(), ++rounds;
    ASSERT_TRUE(m.done());
    EXPECT_EQ(m.states.front().rounds(), 6);
    for (const auto& s : m.states) EXPECT_EQ(s.seeds(), want) << cuts.size() - 1 << " members";
  }
}

TEST(SeedingRounds, AStateHandedOnMidWayContinuesAlike) {
  const Matrix x = blobs(8000, 5, 8, 4);
  Members m(x, {0, 3000, 8000}, 8, 11);
  m.round();
  m.round();
  m.round();  // after the first sample
  // Participant 1 restarts from participant 0's state; its piece is new.
  Out o;
  m.states[0].put(o);
  In in(o.b);
  SeedingRounds fresh;
  fresh.get(in);
  in.end();
  m.states[1] = fresh;
  m.pieces[1] = std::make_unique<kp::Piece>(x.row(3000), 3000, 5000, x.cols);
  while (!m.done()) m.round();
  EXPECT_EQ(m.states[0].seeds(), single_node(x, 8, 11));
  EXPECT_EQ(m.states[1].seeds(), m.states[0].seeds());
}

TEST(SeedingRounds, TooFewDistinctRowsFallBackToRandomRowsAsSingleNode) {
  Matrix x;
  x.rows = 500;
  x.cols = 3;
  x.data.resize(1500);
  for (std::int64_t i = 0; i < 500; ++i)
    for (int j = 0; j < 3; ++j) x.data[i * 3 + j] = static_cast<float>((i % 3) * 10 + j);
  Members m(x, {0, 100, 500}, 5, 2);
  while (!m.done()) m.round();
  EXPECT_EQ(m.states[0].seeds(), single_node(x, 5, 2));
}

TEST(SeedingRounds, ARowNobodyHoldsIsReplacedByAnother) {
  const Matrix x = blobs(4000, 4, 4, 5);
  Members m(x, {0, 2000, 4000}, 4, 1);
  // The first candidate's owner says nothing in the pick round.
  std::mt19937_64 rng(1);
  const int owner = std::uniform_int_distribution<std::int64_t>(0, 3999)(rng) < 2000 ? 0 : 1;
  m.round(owner);
  EXPECT_FALSE(m.done());
  int rounds = 1;
  while (!m.done() && rounds < 40) m.round(), ++rounds;
  ASSERT_TRUE(m.done());
  EXPECT_EQ(m.states[0].seeds().size(), 16u);
  EXPECT_EQ(m.states[0].seeds(), m.states[1].seeds());
}

TEST(SeedingRounds, ContributionsNoRoundCanHoldAreRefused) {
  const Matrix x = blobs(1000, 4, 4, 6);
  SeedingRounds s(1, x.rows, x.cols, 4);  // the pick round
  auto rows = [](std::vector<std::int64_t> ids, std::vector<float> v) {
    Out o;
    o.array(ids);
    o.array(v);
    return o.b;
  };
  EXPECT_NO_THROW(s.validate(rows({3}, {1, 2, 3, 4})));
  EXPECT_THROW(s.validate(rows({1000}, {1, 2, 3, 4})), InputError);  // past the input
  EXPECT_THROW(s.validate(rows({-1}, {1, 2, 3, 4})), InputError);
  EXPECT_THROW(s.validate(rows({3}, {1, 2, 3})), InputError);  // short
  EXPECT_THROW(s.validate(rows({3}, {1, NAN, 3, 4})), InputError);
  Bytes cost;
  {
    Out o;
    o.put(-1.0);
    cost = o.b;
  }
  Members m(x, {0, 1000}, 4, 1);
  m.round();  // now the cost round
  EXPECT_THROW(m.states[0].validate(cost), InputError);
  EXPECT_THROW(m.states[0].validate(rows({}, {})), InputError);  // a pick's shape in a cost round
  Out bad;
  bad.put<std::uint8_t>(9);
  In in(bad.b);
  SeedingRounds t;
  EXPECT_THROW(t.get(in), InputError);
}

}  // namespace
