// The gathered exchange's tree (tree.hpp): its shape over a view, the
// partial's wire form, and merging partials -- sums that add up become one,
// others stay apart, and a partial that shares a member is refused whole.
#include <gtest/gtest.h>

#include <cstring>
#include <map>
#include <set>

#include "accel/error.hpp"
#include "tree.hpp"

using namespace accel::cluster;

namespace {

Bytes number(double v) {
  Bytes b(sizeof v);
  std::memcpy(b.data(), &v, sizeof v);
  return b;
}
double value(const Bytes& b) {
  double v = 0;
  std::memcpy(&v, b.data(), sizeof v);
  return v;
}
// Adds two numbers; refuses a negative one (a contribution that does not add up).
std::optional<Bytes> add(std::span<const std::byte> a, std::span<const std::byte> b) {
  const double x = value(Bytes(a.begin(), a.end())), y = value(Bytes(b.begin(), b.end()));
  if (x < 0 || y < 0) return std::nullopt;
  return number(x + y);
}

Partial of(std::uint32_t id, double v) {
  Contribution c;
  c.data = number(v);
  c.work_rows = 100 * id;
  c.work_seconds = 0.5;
  return own_partial(id, c);
}

}  // namespace

// Every member of a view but the coordinator has one parent, is its
// parent's child, and the tree is binary, breadth first in id order.
TEST(ClusterTree, EveryMemberHangsOnceFromTheCoordinator) {
  for (std::uint32_t n = 1; n <= 40; ++n) {
    std::vector<std::uint32_t> active{0};
    for (std::uint32_t i = 1; i <= n; ++i) active.push_back(3 * i);  // ids with gaps
    std::map<std::uint32_t, std::uint32_t> parent;
    std::size_t edges = 0;
    for (auto q : active) {
      const auto s = tree_spot(active, q);
      ASSERT_TRUE(s);
      EXPECT_LE(s->children.size(), kTreeFanout);
      for (auto c : s->children) {
        EXPECT_TRUE(parent.emplace(c, q).second) << c << " has two parents";
        ++edges;
      }
    }
    EXPECT_EQ(edges, n);
    EXPECT_EQ(tree_parents(active), parent);
    for (auto q : active)
      if (q != 0) EXPECT_EQ(tree_spot(active, q)->parent, parent.at(q));
  }
  EXPECT_EQ(tree_spot({0, 1, 2, 3, 4}, 3)->parent, 1u);
  EXPECT_EQ(tree_spot({0, 1, 2, 3, 4}, 0)->children, (std::vector<std::uint32_t>{1, 2}));
  EXPECT_FALSE(tree_spot({0, 1, 2}, 7));
}

TEST(ClusterTree, APartialReadsBackAsWritten) {
  Partial p = of(4, 1.5);
  ASSERT_TRUE(merge(p, of(9, -1.0), add));  // does not add up: a second sum
  const Partial q = decode_partial(encode(p), Limits{});
  ASSERT_EQ(q.heads.size(), 2u);
  ASSERT_EQ(q.sums.size(), 2u);
  EXPECT_EQ(q.heads[1].id, 9u);
  EXPECT_EQ(q.heads[1].sum, 1u);
  EXPECT_EQ(q.heads[1].work_rows, 900);
  EXPECT_EQ(value(q.sums[1]), -1.0);
}

TEST(ClusterTree, SumsThatAddUpBecomeOne) {
  Partial p = of(1, 1.0);
  ASSERT_TRUE(merge(p, of(3, 2.0), add));
  Partial child = of(4, 4.0);
  ASSERT_TRUE(merge(child, of(8, 8.0), add));
  ASSERT_TRUE(merge(p, child, add));
  ASSERT_EQ(p.sums.size(), 1u);
  EXPECT_EQ(value(p.sums[0]), 15.0);
  std::set<std::uint32_t> ids;
  for (const auto& h : p.heads) ids.insert(h.id);
  EXPECT_EQ(ids, (std::set<std::uint32_t>{1, 3, 4, 8}));
}

// A member counted twice would be; the partial is left out whole.
TEST(ClusterTree, APartialThatSharesAMemberIsRefused) {
  Partial p = of(1, 1.0);
  ASSERT_TRUE(merge(p, of(3, 2.0), add));
  Partial other = of(5, 5.0);
  ASSERT_TRUE(merge(other, of(3, 2.0), add));
  EXPECT_FALSE(merge(p, other, add));
  EXPECT_EQ(p.heads.size(), 2u);
  EXPECT_EQ(value(p.sums[0]), 3.0);
}

// Bytes no member writes: a member twice, the coordinator's id, a sum no
// member is in, a member in no sum, impossible figures, trailing bytes.
TEST(ClusterTree, ImpossiblePartialsAreBadInput) {
  auto bad = [](Partial p) { EXPECT_THROW(decode_partial(encode(p), Limits{}), accel::InputError); };
  Partial twice = of(2, 1.0);
  twice.heads.push_back(twice.heads[0]);
  bad(twice);
  bad(of(0, 1.0));
  Partial spare = of(2, 1.0);
  spare.sums.push_back(number(2.0));
  bad(spare);
  Partial nowhere = of(2, 1.0);
  nowhere.heads[0].sum = 3;
  bad(nowhere);
  Partial figures = of(2, 1.0);
  figures.heads[0].work_seconds = -1;
  bad(figures);
  Bytes trailing = encode(of(2, 1.0));
  trailing.push_back(std::byte{0});
  EXPECT_THROW(decode_partial(trailing, Limits{}), accel::InputError);
  EXPECT_THROW(decode_partial({}, Limits{}), accel::InputError);
}
