// The sparse allreduce's wire format and merge: what is encoded decodes
// back, malformed or hostile bytes are refused with a reason, and the merge
// is the members' sum in member order (every member gets the same bits).
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <random>

#include "accel/error.hpp"
#include "accel/sparse_allreduce.hpp"
#include "sparse/sparse_wire.hpp"

using namespace accel::cluster;
using namespace accel::cluster::sparse;

namespace {

Step pairs(std::uint64_t n, std::vector<std::uint32_t> i, std::vector<float> v) {
  return {Kind::Pairs, n, std::move(i), std::move(v)};
}

Merged merge_steps(const std::map<std::uint32_t, Step>& steps) {
  std::map<std::uint32_t, StepView> v;
  for (const auto& [id, s] : steps) v[id] = s.view();
  return merge(v);
}

// Validates a copy of the bytes (kept alive for the view).
StepView check(const Bytes& b) {
  static std::vector<Bytes> kept;
  kept.push_back(b);
  return validate(kept.back());
}

}  // namespace

TEST(SparseWire, RoundTrips) {
  const std::vector<std::uint32_t> i{0, 5, 99};
  const std::vector<float> v{1.5f, -2.0f, 3.25f};
  const Bytes b = encode(Kind::Pairs, 100, i, v, 42);
  const StepView s = validate(b);
  EXPECT_EQ(s.tag, 42u);
  EXPECT_EQ(s.kind, Kind::Pairs);
  EXPECT_EQ(s.n, 100u);
  EXPECT_EQ(std::vector<std::uint32_t>(s.indices.begin(), s.indices.end()), i);
  EXPECT_EQ(std::vector<float>(s.values.begin(), s.values.end()), v);
  EXPECT_EQ(check(encode(Kind::Closing, 0, {}, {})).kind, Kind::Closing);
}

TEST(SparseWire, RefusesBadPairs) {
  const std::vector<float> v2{1, 2};
  EXPECT_THROW(check(encode(Kind::Pairs, 10, std::vector<std::uint32_t>{3, 3}, v2)), accel::InputError);  // repeated
  EXPECT_THROW(check(encode(Kind::Pairs, 10, std::vector<std::uint32_t>{4, 2}, v2)), accel::InputError);  // descending
  EXPECT_THROW(check(encode(Kind::Pairs, 10, std::vector<std::uint32_t>{4, 10}, v2)), accel::InputError);  // not below n
  const std::vector<float> nan{1, std::numeric_limits<float>::quiet_NaN()};
  EXPECT_THROW(check(encode(Kind::Pairs, 10, std::vector<std::uint32_t>{1, 2}, nan)), accel::InputError);
  EXPECT_THROW(check_pairs(10, std::vector<std::uint32_t>{1}, v2), accel::InputError);  // sizes differ
  EXPECT_THROW(check_pairs((std::uint64_t{1} << 32) + 1, {}, {}), accel::InputError);
  try {
    check_pairs(10, std::vector<std::uint32_t>{4, 12}, v2);
    FAIL();
  } catch (const accel::InputError& e) {
    EXPECT_NE(std::string(e.what()).find("12"), std::string::npos) << e.what();
  }
}

TEST(SparseWire, RefusesTruncatedAndHostileBytes) {
  Bytes b = encode(Kind::Pairs, 100, std::vector<std::uint32_t>{1, 2}, std::vector<float>{1, 2});
  for (std::size_t cut = 0; cut < b.size(); ++cut)
    EXPECT_THROW(validate(Bytes(b.begin(), b.begin() + cut)), accel::InputError) << cut;
  Bytes kind = b;
  kind[0] = std::byte{7};
  EXPECT_THROW(validate(kind), accel::InputError);
  Bytes huge = b;  // a pair count far beyond the bound
  huge[24 + 7] = std::byte{0x7f};
  EXPECT_THROW(validate(huge), accel::InputError);
  Bytes trailing = b;
  trailing.push_back(std::byte{0});
  EXPECT_THROW(validate(trailing), accel::InputError);
}

TEST(SparseMerge, SumsInMemberOrder) {
  std::map<std::uint32_t, Step> s;
  s[0] = pairs(10, {1, 4}, {1.0f, 2.0f});
  s[1] = pairs(10, {0, 4, 9}, {3.0f, 0.5f, -1.0f});
  s[3] = pairs(10, {4}, {0.25f});
  s[2] = {Kind::Idle, 0, {}, {}};
  s[4] = pairs(10, {}, {});  // counted, nothing to add
  const Merged m = merge_steps(s);
  EXPECT_TRUE(m.error.empty());
  EXPECT_FALSE(m.closing);
  EXPECT_EQ(m.members, (std::vector<std::uint32_t>{0, 1, 3, 4}));
  EXPECT_EQ(m.tags.size(), 4u);
  EXPECT_EQ(m.indices, (std::vector<std::uint32_t>{0, 1, 4, 9}));
  EXPECT_EQ(m.values, (std::vector<float>{3.0f, 1.0f, 2.75f, -1.0f}));
}

TEST(SparseMerge, MatchesADenseSumBitForBit) {
  std::mt19937 g(3);
  const std::uint64_t n = 5000;
  std::map<std::uint32_t, Step> s;
  std::vector<float> dense(n, 0.0f);
  std::vector<char> hit(n, 0);
  for (std::uint32_t m = 0; m < 5; ++m) {
    Step st{Kind::Pairs, n, {}, {}};
    for (std::uint32_t i = 0; i < n; ++i)
      if (g() % 7 == 0) {
        st.indices.push_back(i);
        st.values.push_back(std::uniform_real_distribution<float>(-1, 1)(g));
        dense[i] = hit[i] ? dense[i] + st.values.back() : st.values.back();
        hit[i] = 1;
      }
    s[m] = std::move(st);
  }
  const Merged mg = merge_steps(s);
  std::size_t k = 0;
  for (std::uint32_t i = 0; i < n; ++i)
    if (hit[i]) {
      ASSERT_LT(k, mg.indices.size());
      EXPECT_EQ(mg.indices[k], i);
      EXPECT_EQ(mg.values[k], dense[i]);
      ++k;
    }
  EXPECT_EQ(k, mg.indices.size());
}

TEST(SparseMerge, DifferentLengthsAreAnErrorNamingTheMembers) {
  std::map<std::uint32_t, Step> s;
  s[1] = pairs(10, {1}, {1.0f});
  s[2] = pairs(11, {1}, {1.0f});
  const Merged m = merge_steps(s);
  EXPECT_NE(m.error.find("member 1"), std::string::npos) << m.error;
  EXPECT_NE(m.error.find("member 2"), std::string::npos) << m.error;
  EXPECT_TRUE(m.indices.empty());
}

TEST(SparseMerge, MemberZeroClosingEndsTheGroupAnotherLeaves) {
  std::map<std::uint32_t, Step> s;
  s[0] = pairs(10, {1}, {1.0f});
  s[1] = {Kind::Closing, 0, {}, {}};
  Merged m = merge_steps(s);
  EXPECT_FALSE(m.closing);
  EXPECT_EQ(m.members, (std::vector<std::uint32_t>{0}));
  s[0] = {Kind::Closing, 0, {}, {}};
  s[1] = pairs(10, {1}, {1.0f});
  m = merge_steps(s);
  EXPECT_TRUE(m.closing);
  EXPECT_EQ(m.members, (std::vector<std::uint32_t>{1}));
}

TEST(SparseGroup, OneMemberSumsItsOwnPairs) {
  accel::SparseGroupOptions o;
  o.size = 1;
  accel::SparseGroup g(o);
  const std::vector<std::uint32_t> i{2, 7};
  const std::vector<float> v{1.0f, -3.0f};
  const auto sum = g.allreduce(10, i, v);
  EXPECT_EQ(sum.indices, i);
  EXPECT_EQ(sum.values, v);
  EXPECT_THROW(g.allreduce(10, std::vector<std::uint32_t>{7, 2}, v), accel::InputError);
  g.close();
  EXPECT_THROW(g.allreduce(10, i, v), accel::InputError);
  accel::SparseGroup again(o);  // a closed group leaves the process free for another
}

TEST(SparseGroup, RefusesBadOptions) {
  accel::SparseGroupOptions o;
  o.size = 2;
  o.rank = 2;
  EXPECT_THROW(accel::SparseGroup{o}, accel::InputError);
  o.rank = 0;
  o.size = 0;
  EXPECT_THROW(accel::SparseGroup{o}, accel::InputError);
}

TEST(SparseMerge, SignedZerosSumAsPlainAddition) {
  std::map<std::uint32_t, Step> s;
  s[0] = pairs(4, {0, 1, 2}, {-0.0f, -0.0f, 1.0f});
  s[1] = pairs(4, {0, 2}, {-0.0f, -1.0f});
  s[2] = pairs(4, {1}, {0.0f});
  const Merged m = merge_steps(s);
  ASSERT_EQ(m.values.size(), 3u);
  EXPECT_TRUE(std::signbit(m.values[0]));   // -0 + -0
  EXPECT_FALSE(std::signbit(m.values[1]));  // -0 + 0
  EXPECT_EQ(m.values[2], 0.0f);
}
