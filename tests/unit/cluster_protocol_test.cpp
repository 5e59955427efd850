// The engine's round message: what the coordinator writes reads back the
// same, moves of lost members' rows included, and a move no coordinator
// could mean (to the coordinator, to the rows' own member, of no rows) is
// refused rather than acted on.
#include <gtest/gtest.h>

#include "accel/error.hpp"
#include "protocol.hpp"
#include "workload.hpp"

using namespace accel::cluster;

namespace {

Contribution with_moves(std::vector<Move> moves) {
  Contribution c;
  c.data = {std::byte{1}, std::byte{2}, std::byte{3}};
  c.has_view = true;
  c.view = {{0, 1, 3}, {2}, {}};
  c.stand_ins = {{2, {std::byte{7}}}};
  c.work_rows = 1000;
  c.work_seconds = 0.25;
  c.room = 512 << 20;
  c.trims = {{1, 900}};
  c.has_moves = true;
  c.moves = std::move(moves);
  c.moves_id = 3;
  c.commit_moves = 2;
  c.moves_from = 12;
  return c;
}

void expect_same(const Contribution& a, const Contribution& b) {
  EXPECT_EQ(a.data, b.data);
  EXPECT_EQ(a.has_view, b.has_view);
  EXPECT_EQ(a.view, b.view);
  EXPECT_EQ(a.stand_ins, b.stand_ins);
  EXPECT_EQ(a.work_rows, b.work_rows);
  EXPECT_EQ(a.work_seconds, b.work_seconds);
  EXPECT_EQ(a.room, b.room);
  EXPECT_EQ(a.trims, b.trims);
  EXPECT_EQ(a.has_moves, b.has_moves);
  EXPECT_EQ(a.moves, b.moves);
  EXPECT_EQ(a.moves_from, b.moves_from);
  EXPECT_EQ(a.moves_id, b.moves_id);
  EXPECT_EQ(a.commit_moves, b.commit_moves);
}

}  // namespace

TEST(ClusterProtocol, MovesReadBack) {
  const auto c = with_moves({{2, 1, 500, 120, 120 * 32, 0x1234}, {2, 3, 620, 80, 80 * 32, 0}});
  expect_same(c, decode_contribution(encode(c), Limits{}));
}

TEST(ClusterProtocol, ANegativeMemoryRoomIsRefused) {
  auto c = with_moves({});
  c.room = -1;  // says nothing: allowed
  EXPECT_EQ(decode_contribution(encode(c), Limits{}).room, -1);
  c.room = -2;
  EXPECT_THROW(decode_contribution(encode(c), Limits{}), accel::InputError);
}

TEST(ClusterProtocol, AnEmptyListOfMovesIsNotNoList) {
  // An empty list announces that every lost row went back to its member.
  const auto c = with_moves({});
  const auto back = decode_contribution(encode(c), Limits{});
  EXPECT_TRUE(back.has_moves);
  EXPECT_TRUE(back.moves.empty());
  Contribution plain;
  EXPECT_FALSE(decode_contribution(encode(plain), Limits{}).has_moves);
}

TEST(ClusterProtocol, ImpossibleMovesAreRefused) {
  const Move bad[] = {
      {2, 0, 0, 10, 320},          // to the coordinator
      {2, 2, 0, 10, 320},          // to the rows' own member
      {2, 1, 0, 0, 0},             // of no rows
      {2, 1, -5, 10, 320},         // before the first row
      {2, 1, std::int64_t{1} << 46, 10, 320},  // past any input
  };
  for (const auto& m : bad) {
    const auto bytes = encode(with_moves({m}));
    EXPECT_THROW(decode_contribution(bytes, Limits{}), accel::InputError) << m.home << " " << m.by << " " << m.begin;
  }
}

TEST(ClusterProtocol, TruncatedMovesAreRefused) {
  const auto bytes = encode(with_moves({{2, 1, 500, 120, 3840}}));
  for (std::size_t cut = 1; cut <= 49; ++cut) {
    const std::span<const std::byte> part(bytes.data(), bytes.size() - cut);
    EXPECT_THROW(decode_contribution(part, Limits{}), accel::InputError) << cut;
  }
}

// A task's digest travels with it, and the digest tells other rows apart
// wherever they differ in a small partition, and in the blocks it reads of
// a large one.
TEST(ClusterProtocol, TheTasksDigestReadsBack) {
  Task t;
  t.workload = "kmeans";
  t.self = 2;
  t.units = 100;
  t.begin = 10;
  t.rows = 20;
  t.input = "/data/x.npy";
  t.pull = true;
  t.digest = 0xfeedbeefcafe;
  t.pair_keys.resize(3);
  const Task back = decode_task(encode(t), Limits{});
  EXPECT_EQ(back.digest, t.digest);
  EXPECT_EQ(back, t);
  t.gathered = true;  // the flags' second bit
  EXPECT_TRUE(decode_task(encode(t), Limits{}).gathered);
  t.tree = true;  // the third
  EXPECT_TRUE(decode_task(encode(t), Limits{}).tree);
  t.confirmed = true;  // the fourth
  EXPECT_TRUE(decode_task(encode(t), Limits{}).confirmed);
  Bytes bad = encode(t);
  // Past the name, self, units, begin, rows, max_rounds, data_bytes and input: the flags.
  const std::size_t flags = 8 + t.workload.size() + 4 + 8 * 5 + 8 + t.input.size();
  ASSERT_EQ(bad[flags], std::byte{15});
  bad[flags] = std::byte{16};
  EXPECT_THROW(decode_task(bad, Limits{}), accel::InputError);
}

// The gathered exchange's decision: the outcome and the state read back;
// unknown flags, a log that is no JSON object, or trailing bytes are refused.
TEST(ClusterProtocol, AGatheredDecisionReadsBack) {
  RoundOutcome out;
  out.last = true;
  out.log = {{"inertia", 12.5}};
  const Bytes state{std::byte{1}, std::byte{2}, std::byte{3}};
  const Gathered g = decode_gathered(encode_gathered(out, state), 1 << 20);
  EXPECT_FALSE(g.outcome.stop);
  EXPECT_TRUE(g.outcome.last);
  EXPECT_EQ(g.outcome.log, out.log);
  EXPECT_EQ(g.state, state);
  Bytes bad = encode_gathered(out, state);
  bad[0] = std::byte{8};
  EXPECT_THROW(decode_gathered(bad, 1 << 20), accel::InputError);
  out.log = nlohmann::json::array();
  EXPECT_THROW(decode_gathered(encode_gathered(out, state), 1 << 20), accel::InputError);
  bad = encode_gathered(RoundOutcome{}, state);
  bad.push_back(std::byte{0});
  EXPECT_THROW(decode_gathered(bad, 1 << 20), accel::InputError);
  EXPECT_THROW(decode_gathered(encode_gathered(RoundOutcome{}, state), 2), accel::InputError);  // state over the limit
}

TEST(ClusterProtocol, RowsDigestSeesChanges) {
  std::vector<std::byte> small(100000, std::byte{7});
  const auto d = rows_digest(small);
  EXPECT_NE(d, 0u);
  small[54321] = std::byte{8};
  EXPECT_NE(rows_digest(small), d);
  EXPECT_NE(rows_digest(std::span(small).first(99999)), rows_digest(small));
  EXPECT_NE(rows_digest({}), 0u);
  std::vector<std::byte> large(std::size_t{64} << 20, std::byte{1});
  const auto before = rows_digest(large);
  large.back() = std::byte{2};  // the last block is always read
  EXPECT_NE(rows_digest(large), before);
  large.back() = std::byte{1};
  large[0] = std::byte{3};  // and the first
  EXPECT_NE(rows_digest(large), before);
}

// A confirmation (Task::confirmed): the ids the coordinator counted, which
// must come ascending and once each (a member keeps what they name).
TEST(ClusterProtocol, AConfirmationReadsBackAscendingOnly) {
  const std::vector<std::uint32_t> ids = {0, 2, 5, 9};
  EXPECT_EQ(decode_ids(encode_ids(ids), Limits{}), ids);
  EXPECT_TRUE(decode_ids(encode_ids({}), Limits{}).empty());
  EXPECT_THROW(decode_ids(encode_ids({0, 5, 2}), Limits{}), accel::InputError);
  EXPECT_THROW(decode_ids(encode_ids({0, 2, 2}), Limits{}), accel::InputError);
  Bytes cut = encode_ids(ids);
  cut.pop_back();
  EXPECT_THROW(decode_ids(cut, Limits{}), accel::InputError);
  Limits few;
  few.max_peers = 2;  // three ids at most
  EXPECT_THROW(decode_ids(encode_ids(ids), few), accel::InputError);
}
