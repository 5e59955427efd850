// The coordinator's measured speed (RateCollector) and when it re-splits
// rows (DriftPolicy): a member that stays slow for the policy's rounds
// triggers a re-split, noise and sub-floor rounds do not; a split that
// swings back narrows its swings (SwingDamper).
#include <gtest/gtest.h>

#include "rates.hpp"

using namespace accel::cluster;

TEST(RateCollector, MedianOfTheLastRounds) {
  RateCollector r;
  EXPECT_FALSE(r.rate(1).has_value());
  r.record(1, 1000, 1.0);
  EXPECT_DOUBLE_EQ(*r.rate(1), 1000);
  r.record(1, 1000, 1.0);
  r.record(1, 1000, 100.0);  // one stalled round moves nothing
  EXPECT_DOUBLE_EQ(*r.rate(1), 1000);
  r.record(1, 0, 1.0);  // no work: no information
  r.record(1, 10, 0.0);
  EXPECT_DOUBLE_EQ(*r.rate(1), 1000);
  r.record(1, 1000, 2.0);  // slowed to half: followed once most of the last 5 are slow
  EXPECT_DOUBLE_EQ(*r.rate(1), 1000);
  r.record(1, 1000, 2.0);
  EXPECT_DOUBLE_EQ(*r.rate(1), 500);
  r.record(1, 1000, 2.0);
  r.record(1, 1000, 2.0);
  EXPECT_DOUBLE_EQ(*r.rate(1), 500);
  r.forget(1);
  EXPECT_FALSE(r.rate(1).has_value());
}

TEST(DriftPolicy, SlowMemberForEnoughRoundsDrifts) {
  DriftPolicy p(1.1, 3);
  const std::map<std::uint32_t, double> slow{{0, 0.010}, {1, 0.020}};
  EXPECT_FALSE(p.drifted(slow));
  EXPECT_FALSE(p.drifted(slow));
  EXPECT_TRUE(p.drifted(slow));
  EXPECT_FALSE(p.drifted(slow));  // the streak starts again after a re-split
}

TEST(DriftPolicy, OneBalancedRoundBreaksTheStreak) {
  DriftPolicy p(1.1, 3);
  const std::map<std::uint32_t, double> slow{{0, 0.010}, {1, 0.020}}, even{{0, 0.010}, {1, 0.0105}};
  EXPECT_FALSE(p.drifted(slow));
  EXPECT_FALSE(p.drifted(slow));
  EXPECT_FALSE(p.drifted(even));
  EXPECT_FALSE(p.drifted(slow));
  EXPECT_FALSE(p.drifted(slow));
  EXPECT_TRUE(p.drifted(slow));
}

TEST(DriftPolicy, RoundsUnderTheFloorNeverDrift) {
  DriftPolicy p(1.1, 3, 0.002);
  const std::map<std::uint32_t, double> tiny{{0, 0.0002}, {1, 0.0009}};
  for (int i = 0; i < 10; ++i) EXPECT_FALSE(p.drifted(tiny));
}

TEST(DriftPolicy, OneMemberAloneNeverDrifts) {
  DriftPolicy p(1.1, 1);
  EXPECT_FALSE(p.drifted({{0, 1.0}}));
  EXPECT_FALSE(p.drifted({}));
}

TEST(DriftPolicy, RoundsRightAfterAMoveDoNotCount) {
  DriftPolicy p(1.1, 2);
  const std::map<std::uint32_t, double> slow{{0, 0.010}, {1, 0.020}};
  p.settle(3);
  EXPECT_TRUE(p.settling());
  for (int i = 0; i < 3; ++i) EXPECT_FALSE(p.drifted(slow));
  EXPECT_FALSE(p.settling());
  EXPECT_FALSE(p.drifted(slow));
  EXPECT_TRUE(p.drifted(slow));
}

TEST(SwingDamper, MovesInOneDirectionGoTheWholeWay) {
  SwingDamper d;
  const std::vector<std::uint32_t> ids{0, 1};
  EXPECT_EQ(d.damp(ids, {6000, 6000}, {8000, 4000}), (std::vector<std::int64_t>{8000, 4000}));
  d.moved(ids, {6000, 6000}, {8000, 4000});
  // The worker keeps slowing: it loses more, undamped.
  EXPECT_EQ(d.damp(ids, {8000, 4000}, {9000, 3000}), (std::vector<std::int64_t>{9000, 3000}));
}

TEST(SwingDamper, ASplitSwingingBackAndForthNarrowsToWhereTheRatesAgree) {
  // A worker on a shared core looks slow with 6000 rows and fast with
  // 4000: Algorithm 1 alternates between the two splits.
  SwingDamper d;
  const std::vector<std::uint32_t> ids{0, 1};
  std::vector<std::int64_t> now{6000, 6000};
  std::vector<std::int64_t> swing;
  for (int i = 0; i < 14; ++i) {
    const std::vector<std::int64_t> target = now[1] > 5000 ? std::vector<std::int64_t>{8000, 4000}
                                                           : std::vector<std::int64_t>{6000, 6000};
    const auto next = d.damp(ids, now, target);
    EXPECT_EQ(next[0] + next[1], 12000);
    swing.push_back(std::abs(next[1] - now[1]));
    d.moved(ids, now, next);
    now = next;
  }
  // Algorithm 1 alone would swing 2000 rows every time; each pair of
  // moves here (back, then on) narrows by a factor 3/4: 2000 1000 750 656
  // 615 427 461 288 341 199 252 141 186 101.
  EXPECT_EQ(swing[0], 2000);
  for (std::size_t i = 3; i < swing.size(); i += 2) EXPECT_LT(swing[i], swing[i - 2]) << i;
  EXPECT_LT(swing.back(), 250);
  EXPECT_NEAR(now[1], 5000, 250);
}

TEST(SwingDamper, KeepsTheSumWithManyMembersAndOddRows) {
  SwingDamper d;
  const std::vector<std::uint32_t> ids{0, 1, 2};
  d.moved(ids, {100, 100, 101}, {150, 70, 81});
  const auto next = d.damp(ids, {150, 70, 81}, {97, 103, 101});  // member 0 gives back: a reversal
  EXPECT_EQ(next[0] + next[1] + next[2], 301);
  EXPECT_EQ(next[0], 124);  // 150 - 53/2, truncated, plus the row the truncations left
  for (auto v : next) EXPECT_GE(v, 0);
}

TEST(SwingDamper, AProposalNotMadeLeavesNoTrace) {
  SwingDamper d;
  const std::vector<std::uint32_t> ids{0, 1};
  d.moved(ids, {6000, 6000}, {8000, 4000});
  (void)d.damp(ids, {8000, 4000}, {6000, 6000});  // not made (too small to pay, say)
  EXPECT_EQ(d.damp(ids, {8000, 4000}, {6000, 6000}), (std::vector<std::int64_t>{7000, 5000}));
}

TEST(SwingDamper, ATrendAfterASwingIsFollowedTheWholeWayAgain) {
  SwingDamper d;
  const std::vector<std::uint32_t> ids{0, 1};
  d.moved(ids, {6000, 6000}, {8000, 4000});  // a busy process beside worker 1
  d.moved(ids, {8000, 4000}, {7000, 5000});  // it ended: a reversal, halved
  // Worker 1 goes on speeding up: each move onward goes 1.5 times as far
  // (a fraction of Algorithm 1's), up to the whole way.
  EXPECT_EQ(d.damp(ids, {7000, 5000}, {5000, 7000}), (std::vector<std::int64_t>{5500, 6500}));
  d.moved(ids, {7000, 5000}, {5500, 6500});
  EXPECT_EQ(d.damp(ids, {5500, 6500}, {3500, 8500}), (std::vector<std::int64_t>{3500, 8500}));
}
