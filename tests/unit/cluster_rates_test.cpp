// The coordinator's measured speed (RateCollector) and when it re-splits
// rows (DriftPolicy): a member that stays slow for the policy's rounds
// triggers a re-split, noise and sub-floor rounds do not.
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
