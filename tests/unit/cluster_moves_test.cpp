// The plan of which worker computes which rows (moves.hpp): every row is
// computed exactly once, lost members' rows all go to workers, shares
// follow rates, and a worker gives only the end of its rows.
#include <gtest/gtest.h>

#include <map>
#include <random>
#include <string>

#include "moves.hpp"

using namespace accel::cluster;

namespace {

std::uint64_t bytes(std::int64_t b, std::int64_t e) { return static_cast<std::uint64_t>(e - b) * 32; }

// Rows each id computes under the plan, checking that every row of the
// input is computed exactly once (own first rows, then pieces).
std::map<std::uint32_t, std::int64_t> computed(const MovePlanInput& in, const std::vector<Move>& plan,
                                               std::int64_t units) {
  std::vector<int> times(static_cast<std::size_t>(units), 0);
  std::map<std::uint32_t, std::int64_t> rows;
  auto mark = [&](std::uint32_t by, std::int64_t b, std::int64_t n) {
    for (std::int64_t r = b; r < b + n; ++r) ++times[static_cast<std::size_t>(r)];
    rows[by] += n;
  };
  for (std::uint32_t q = 0; q < in.begin.size(); ++q) {
    const bool lost = std::find(in.lost.begin(), in.lost.end(), q) != in.lost.end();
    // A lost member's first rows that no worker had room for: the
    // coordinator's stand-in computes them (key 1000 + q).
    mark(lost ? 1000 + q : q, in.begin[q], own_rows(q, in.begin[q], in.kept[q], plan));
  }
  for (const auto& m : plan) {
    EXPECT_NE(m.by, m.home);
    EXPECT_EQ(m.bytes, bytes(m.begin, m.begin + m.rows));
    mark(m.by, m.begin, m.rows);
  }
  for (std::int64_t r = 0; r < units; ++r) EXPECT_EQ(times[static_cast<std::size_t>(r)], 1) << "row " << r;
  return rows;
}

}  // namespace

TEST(ClusterMoves, ALostMembersRowsGoToTheWorkersByRate) {
  MovePlanInput in;
  in.begin = {0, 100, 200, 300};
  in.kept = {100, 100, 100, 100};
  in.workers = {1, 3};
  in.rates = {1.0, 3.0};  // worker 3 three times as fast
  in.lost = {2};
  const auto plan = plan_moves(in, bytes);
  const auto rows = computed(in, plan, 400);
  EXPECT_EQ(rows.at(1) + rows.at(3), 300);
  EXPECT_EQ(rows.at(3), 225);  // its share of 300 rows at 3:1
  std::int64_t of_2 = 0;
  for (const auto& m : plan) {
    if (m.home == 2) of_2 += m.rows;
    else EXPECT_EQ(m.begin + m.rows, in.begin[m.home] + in.kept[m.home]);  // worker 1 gives the end of its rows
  }
  EXPECT_EQ(of_2, 100);
}

TEST(ClusterMoves, NoWorkerGetsMoreThanItsMemoryHolds) {
  MovePlanInput in;
  in.begin = {0, 100, 200, 300};
  in.kept = {100, 100, 100, 100};
  in.workers = {1, 3};
  in.rates = {1.0, 3.0};
  in.most = {80, 10};  // worker 3, the fast one, has room for 10 rows more
  in.lost = {2};
  const auto plan = plan_moves(in, bytes);
  const auto rows = computed(in, plan, 400);
  EXPECT_EQ(rows.at(3), 110);
  EXPECT_EQ(rows.at(1), 180);  // the rest by the one with room, up to it
  EXPECT_EQ(rows.at(1002), 10);  // nobody's room: worker 2's first rows stay stood in for
  for (const auto& m : plan) EXPECT_EQ(m.home, 2u);  // nobody is over a target it could give to
}

TEST(ClusterMoves, WithRoomForAllTheRoomChangesNothing) {
  MovePlanInput in;
  in.begin = {0, 100, 200, 300};
  in.kept = {100, 100, 100, 100};
  in.workers = {1, 3};
  in.rates = {1.0, 3.0};
  in.lost = {2};
  const auto unbounded = plan_moves(in, bytes);
  in.most = {-1, 1000};
  EXPECT_EQ(plan_moves(in, bytes), unbounded);
  in.most = {0, 0};  // no room anywhere: nothing moves
  EXPECT_TRUE(plan_moves(in, bytes).empty());
}

TEST(ClusterMoves, AJoinerTakesTheEndsOfTheOthersRows) {
  MovePlanInput in;
  in.begin = {0, 100, 400, 700};  // id 3 joined: no rows of its own
  in.kept = {100, 300, 300, 0};
  in.workers = {1, 2, 3};
  in.rates = {1.0, 1.0, 1.0};
  const auto plan = plan_moves(in, bytes);
  const auto rows = computed(in, plan, 700);
  EXPECT_EQ(rows.at(3), 200);
  EXPECT_EQ(rows.at(1), 200);
  for (const auto& m : plan) {
    EXPECT_EQ(m.by, 3u);
    EXPECT_EQ(m.begin + m.rows, in.begin[m.home] + in.kept[m.home]);  // an end, not a middle
  }
}

TEST(ClusterMoves, AWorkerGetsOnePieceOfEachMember) {
  MovePlanInput in;
  in.begin = {0, 10, 1010, 2010, 3010};
  in.kept = {10, 1000, 1000, 1000, 0};
  in.workers = {1, 4};
  in.rates = {1.0, 5.0};
  in.lost = {2, 3};
  const auto plan = plan_moves(in, bytes);
  computed(in, plan, 3010);
  std::map<std::pair<std::uint32_t, std::uint32_t>, int> pieces;
  for (const auto& m : plan) EXPECT_EQ(++pieces[std::make_pair(m.home, m.by)], 1) << m.home << " to " << m.by;
}

TEST(ClusterMoves, NothingMovesWithoutCauseOrWorkers) {
  MovePlanInput in;
  in.begin = {0, 100, 200};
  in.kept = {100, 100, 100};
  in.workers = {1, 2};
  in.rates = {1.0, 1.02};  // nearly equal: a tail of 1 row is not worth a read
  EXPECT_TRUE(plan_moves(in, bytes).empty());
  in.workers = {};
  in.rates = {};
  in.lost = {1, 2};
  EXPECT_TRUE(plan_moves(in, bytes).empty());  // the coordinator stands in instead
}

TEST(ClusterMoves, OwnRowsStopAtTheFirstPieceGiven) {
  const std::vector<Move> plan = {{2, 1, 250, 50, 0}, {2, 3, 230, 20, 0}, {1, 3, 180, 20, 0}};
  EXPECT_EQ(own_rows(2, 200, 100, plan), 30);
  EXPECT_EQ(own_rows(1, 100, 100, plan), 80);
  EXPECT_EQ(own_rows(3, 300, 100, plan), 100);
  EXPECT_EQ(own_rows(2, 200, 100, {{2, 1, 200, 100, 0}}), 0);
}

// Random memberships, rates, rooms and losses: every row is computed once,
// and no worker is given more rows of others than its room (the fallback
// for what rounding leaves once deficits are spent goes to a worker with
// room, never past it).
TEST(ClusterMoves, NoPlanExceedsAnyWorkersRoom) {
  std::mt19937_64 g(11);
  for (int trial = 0; trial < 3000; ++trial) {
    const int members = 2 + static_cast<int>(g() % 9);
    MovePlanInput in;
    std::int64_t at = 0;
    for (int q = 0; q < members; ++q) {
      const std::int64_t rows = static_cast<std::int64_t>(g() % 400);
      in.begin.push_back(at);
      in.kept.push_back(rows);
      at += rows;
    }
    for (int q = 1; q < members; ++q) {
      if (g() % 3 == 0) {
        in.lost.push_back(static_cast<std::uint32_t>(q));
      } else {
        in.workers.push_back(static_cast<std::uint32_t>(q));
        in.rates.push_back(0.5 + static_cast<double>(g() % 100) / 10);
        in.most.push_back(g() % 4 == 0 ? -1 : static_cast<std::int64_t>(g() % 300));
      }
    }
    const auto plan = plan_moves(in, bytes);
    SCOPED_TRACE("trial " + std::to_string(trial));
    computed(in, plan, at);
    std::map<std::uint32_t, std::int64_t> given;
    for (const auto& m : plan) given[m.by] += m.rows;
    for (std::size_t i = 0; i < in.workers.size(); ++i)
      if (in.most[i] >= 0) EXPECT_LE(given[in.workers[i]], in.most[i]) << "worker " << in.workers[i];
  }
}
