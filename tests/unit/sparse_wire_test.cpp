// The sparse allreduce's wire format and merge: what is encoded decodes
// back, malformed or hostile bytes are refused with a reason, and the merge
// is the members' sum in member order (every member gets the same bits).
#include <gtest/gtest.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cmath>
#include <limits>
#include <optional>
#include <random>
#include <set>
#include <string>
#include <thread>

#include "accel/error.hpp"
#include "accel/sparse_allreduce.hpp"
#include "sparse/reduce_scatter.hpp"
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

// The view of bytes that validate() would refuse (kept alive).
StepView encode_view(Kind kind, const Route& route) {
  static std::vector<Bytes> kept;
  kept.push_back(encode(kind, 10, {}, {}, 0, route));
  return view(kept.back());
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

// Merges into kept buffers: at every length, with shared indices, signed
// zeros, members with nothing and members long enough for the segmented
// two-way merge, the sum is bitwise each index's left-to-right sum in
// member order, and a second merge into the same buffers gives the same.
TEST(SparseMerge, ManyMembersAtEveryLengthSumLeftToRight) {
  std::mt19937_64 g(7);
  MergeScratch scratch;
  Merged out;
  for (const std::uint64_t n : {std::uint64_t{1}, std::uint64_t{2}, std::uint64_t{5000}, std::uint64_t{1} << 20,
                                std::uint64_t{1} << 32}) {
    SCOPED_TRACE(n);
    std::map<std::uint32_t, Step> s;
    std::map<std::uint32_t, float> want;
    for (std::uint32_t m = 0; m < 7; ++m) {
      std::set<std::uint32_t> at;
      // Long members (n >= 2^20) take the merge's segmented path.
      const std::uint64_t range = n >= (1u << 20) ? n : std::min<std::uint64_t>(n, 600);
      const std::size_t k = m == 3 ? 0 : std::min<std::uint64_t>(range / 2, n >= (1u << 20) ? 20000 : 300);
      while (at.size() < k) at.insert(static_cast<std::uint32_t>(g() % range));
      Step st{Kind::Pairs, n, {}, {}};
      for (const auto i : at) {
        const float v = g() % 5 == 0 ? (g() % 2 ? -0.0f : 0.0f) : std::uniform_real_distribution<float>(-1, 1)(g);
        st.indices.push_back(i);
        st.values.push_back(v);
        const auto [it, fresh] = want.emplace(i, v);
        if (!fresh) it->second += v;
      }
      s[m * 2] = std::move(st);  // ids with gaps
    }
    std::map<std::uint32_t, StepView> v;
    for (const auto& [id, st] : s) v[id] = st.view();
    for (int again = 0; again < 2; ++again) {
      merge_into(v, Kind::Pairs, out, scratch);
      ASSERT_EQ(out.indices.size(), want.size());
      std::size_t q = 0;
      for (const auto& [i, sum] : want) {
        EXPECT_EQ(out.indices[q], i);
        EXPECT_EQ(std::signbit(out.values[q]), std::signbit(sum)) << i;
        EXPECT_EQ(out.values[q], sum) << i;
        ++q;
      }
      EXPECT_EQ(out.members.size(), 7u);
    }
  }
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
  accel::SparseGroup again(o);
}

// A free loopback port (bound, read, released).
int free_port() {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof a;
  if (::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0 ||
      ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len) != 0)
    ADD_FAILURE() << "no free port";
  ::close(fd);
  return ntohs(a.sin_port);
}

// The group keeps nothing process-wide and runs its engine on the caller's
// thread: three members in one process, each on its own thread, sum their
// steps (both exchanges), and every member gets the same sums. Member 1
// passes one SparseSum to every step: the same sums, and (allgather) its
// vectors circulate between it and the group, two buffers in all.
TEST(SparseGroup, ThreeMembersInOneProcess) {
  for (const char* exchange : {"allgather", "reduce-scatter"}) {
    const std::string at = "127.0.0.1:" + std::to_string(free_port());
    constexpr int kSize = 3, kSteps = 4;
    std::set<const void*> buffers;
    std::vector<std::vector<accel::SparseSum>> got(kSize);
    std::vector<std::string> errors(kSize);
    std::vector<std::thread> threads;
    for (int r = 0; r < kSize; ++r)
      threads.emplace_back([&, r] {
        try {
          accel::SparseGroupOptions o;
          o.rank = r;
          o.size = kSize;
          o.coordinator = at;
          o.job = 4242;
          o.tls = "tcp";
          o.timeout_ms = 20000;
          o.exchange = exchange;
          accel::SparseGroup g(o);
          accel::SparseSum reused;
          for (int s = 0; s < kSteps; ++s) {
            // Member r holds index r + k for k < 3, value r + 1 (+ step).
            const std::vector<std::uint32_t> i{static_cast<std::uint32_t>(r), static_cast<std::uint32_t>(r + 1),
                                               static_cast<std::uint32_t>(r + 2)};
            const std::vector<float> v(3, static_cast<float>(r + 1 + s));
            if (r != 1) {
              got[r].push_back(g.allreduce(8, i, v, s));
              continue;
            }
            g.allreduce(8, i, v, s, reused);
            got[r].push_back(reused);
            buffers.insert(reused.indices.data());
          }
          g.close();
        } catch (const std::exception& e) {
          errors[r] = e.what();
        }
      });
    for (auto& t : threads) t.join();
    for (int r = 0; r < kSize; ++r) ASSERT_EQ(errors[r], "") << "rank " << r << ", " << exchange;
    for (int s = 0; s < kSteps; ++s) {
      // Index j sums the members r with r <= j <= r + 2.
      std::vector<std::uint32_t> want_i;
      std::vector<float> want_v;
      for (std::uint32_t j = 0; j < 5; ++j) {
        float sum = 0;
        for (int r = 0; r < kSize; ++r)
          if (static_cast<int>(j) >= r && static_cast<int>(j) <= r + 2) sum += static_cast<float>(r + 1 + s);
        want_i.push_back(j);
        want_v.push_back(sum);
      }
      for (int r = 0; r < kSize; ++r) {
        EXPECT_EQ(got[r][s].indices, want_i) << "rank " << r << " step " << s << ", " << exchange;
        EXPECT_EQ(got[r][s].values, want_v) << "rank " << r << " step " << s << ", " << exchange;
        EXPECT_EQ(got[r][s].members, (std::vector<std::uint32_t>{0, 1, 2}));
      }
    }
    if (std::string(exchange) == "allgather") EXPECT_EQ(buffers.size(), 2u);
  }
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

// Reduce-scatter: members' pairs cut at the owners' ranges, each owner's
// sum of the shards meant for it, and the sums side by side.
namespace {

// Member m's random pairs of length n (about one index in `every`).
Step random_step(std::mt19937& g, std::uint64_t n, std::uint64_t tag, int every) {
  Step st{Kind::Pairs, n, {}, {}, tag};
  for (std::uint32_t i = 0; i < n; ++i)
    if (static_cast<int>(g() % every) == 0) {
      st.indices.push_back(i);
      st.values.push_back(std::uniform_real_distribution<float>(-1, 1)(g));
    }
  return st;
}

// Both rounds of a reduce-scatter among `owners`, as the engine would carry
// them: each owner gets the shards addressed to it, then everyone the sums.
std::optional<Merged> reduce_scatter(const std::map<std::uint32_t, Step>& steps,
                                     const std::vector<std::uint32_t>& owners, std::vector<Bytes>& kept) {
  std::map<std::uint32_t, std::vector<Bytes>> cut;
  for (const auto& [id, s] : steps) cut[id] = shards(s.view(), owners, Mode::ReduceScatter);
  std::map<std::uint32_t, StepView> second;
  for (std::size_t j = 0; j < owners.size(); ++j) {
    std::map<std::uint32_t, StepView> first;
    for (const auto& [id, c] : cut) first[id] = check(c[j]);
    kept.push_back(reduce(owners[j], first, owners, Mode::ReduceScatter));
    second[owners[j]] = check(kept.back());
  }
  return assemble(second);
}

}  // namespace

TEST(SparseReduceScatter, EqualsTheAllgatherBitForBit) {
  std::mt19937 g(11);
  for (std::uint64_t n : {std::uint64_t{1}, std::uint64_t{7}, std::uint64_t{1000}, std::uint64_t{4099}}) {
    std::map<std::uint32_t, Step> s;
    std::vector<std::uint32_t> owners{0, 2, 3, 5};
    for (auto o : owners) s[o] = random_step(g, n, 100 + o, 3);
    std::vector<Bytes> kept;
    const auto rs = reduce_scatter(s, owners, kept);
    ASSERT_TRUE(rs) << n;
    const Merged ag = merge_steps(s);
    EXPECT_EQ(rs->indices, ag.indices) << n;
    EXPECT_EQ(rs->values, ag.values) << n;
    EXPECT_EQ(rs->members, owners);
    EXPECT_EQ(rs->tags, (std::vector<std::uint64_t>{100, 102, 103, 105}));
  }
}

TEST(SparseReduceScatter, RangesCoverTheVectorOnce) {
  for (std::uint64_t n : {std::uint64_t{1}, std::uint64_t{5}, std::uint64_t{1000003}, std::uint64_t{1} << 32})
    for (std::size_t m : {std::size_t{1}, std::size_t{2}, std::size_t{3}, std::size_t{7}}) {
      EXPECT_EQ(range_begin(n, m, 0), 0u);
      EXPECT_EQ(range_begin(n, m, m), n);
      for (std::size_t j = 0; j < m; ++j) EXPECT_LE(range_begin(n, m, j), range_begin(n, m, j + 1));
    }
}

TEST(SparseReduceScatter, AnOwnerMissingAShardSaysIncomplete) {
  std::mt19937 g(5);
  std::map<std::uint32_t, Step> s;
  const std::vector<std::uint32_t> owners{0, 1, 2};
  for (auto o : owners) s[o] = random_step(g, 300, o, 4);
  std::map<std::uint32_t, std::vector<Bytes>> cut;
  for (const auto& [id, st] : s) cut[id] = shards(st.view(), owners, Mode::ReduceScatter);
  // Owner 1's round: member 2's shard did not come.
  std::map<std::uint32_t, StepView> first{{0, check(cut[0][1])}, {1, check(cut[1][1])}};
  StepView r = check(reduce(1, first, owners, Mode::AllGather));
  EXPECT_FALSE(r.route.complete);
  EXPECT_TRUE(r.indices.empty());
  // The coordinator's word for member 2 is its own shard (meant for 0), not 1's.
  first[2] = check(cut[2][0]);
  r = check(reduce(1, first, owners, Mode::AllGather));
  EXPECT_FALSE(r.route.complete);
  // A member that split by other owners.
  const auto other = shards(s[2].view(), {0, 1}, Mode::AllGather);
  first[2] = check(other[1]);
  EXPECT_FALSE(check(reduce(1, first, owners, Mode::AllGather)).route.complete);
  first[2] = check(cut[2][1]);
  EXPECT_TRUE(check(reduce(1, first, owners, Mode::AllGather)).route.complete);
}

TEST(SparseReduceScatter, ASecondRoundWithoutEveryOwnersSumIsRedone) {
  std::mt19937 g(8);
  std::map<std::uint32_t, Step> s;
  const std::vector<std::uint32_t> owners{0, 1, 2};
  for (auto o : owners) s[o] = random_step(g, 500, o, 4);
  std::vector<Bytes> kept;
  ASSERT_TRUE(reduce_scatter(s, owners, kept));
  std::map<std::uint32_t, StepView> second;
  for (std::size_t j = 0; j < owners.size(); ++j) second[owners[j]] = check(kept[j]);
  auto lost = second;
  lost.erase(1);  // owner 1 died before its sum reached anyone
  EXPECT_FALSE(assemble(lost));
  auto incomplete = second;  // owner 2 lacked a shard
  incomplete[2] = check(encode(Kind::Reduced, 500, {}, {}, 0, Route{Mode::AllGather, 2, false, 0, owners, {}}));
  EXPECT_FALSE(assemble(incomplete));
  auto newcomer = second;  // a member back mid-step sends its pairs: the owners' sums still count
  newcomer[3] = check(encode(Kind::Pairs, 500, std::vector<std::uint32_t>{1}, std::vector<float>{1.0f}));
  EXPECT_TRUE(assemble(newcomer));
}

TEST(SparseReduceScatter, RankZeroPicksByTheBytesEachMemberReceives) {
  // Four members of 25k pairs each: disjoint indices (union 100k) favour the
  // allgather; the same indices (union 25k) the reduce-scatter.
  EXPECT_EQ(choose(4, 100000, 100000), Mode::AllGather);
  EXPECT_EQ(choose(4, 100000, 25000), Mode::ReduceScatter);
  EXPECT_EQ(choose(2, 100000, 50000), Mode::AllGather);  // two members: never fewer bytes
  EXPECT_EQ(choose(1, 100000, 100000), Mode::AllGather);
  EXPECT_EQ(choose(8, 1000, 1000), Mode::AllGather);  // small: the second round's latency decides
}

TEST(SparseWire, RoutesRoundTripAndNextIsRewrittenInPlace) {
  Route r{Mode::ReduceScatter, 3, true, 77, {1, 3, 4}, {9, 8, 7}};
  Bytes b = encode(Kind::Reduced, 100, std::vector<std::uint32_t>{50}, std::vector<float>{2.0f}, 5, r);
  StepView v = check(b);
  EXPECT_EQ(v.route.next, Mode::ReduceScatter);
  EXPECT_EQ(v.route.to, 3u);
  EXPECT_TRUE(v.route.complete);
  EXPECT_EQ(v.route.inputs, 77u);
  EXPECT_EQ(v.route.owners, r.owners);
  EXPECT_EQ(v.route.tags, r.tags);
  set_next(b, Mode::AllGather);
  EXPECT_EQ(check(b).route.next, Mode::AllGather);
  r.owners = {3, 1};
  EXPECT_THROW(check(encode(Kind::Shard, 100, {}, {}, 0, r)), accel::InputError);  // owners not ascending
}

TEST(SparseReduceScatter, ASumLongerThanAContributionIsIncomplete) {
  // Two members whose pairs all fall in owner 0's half: its sum would hold
  // both, more than one contribution may, and every peer would refuse it.
  const auto half = static_cast<std::uint32_t>(accel::kMaxSparsePairs) - 8;
  const std::uint64_t n = std::uint64_t{4} * half + 64;
  const std::vector<std::uint32_t> owners{0, 1};
  std::map<std::uint32_t, std::vector<Bytes>> cut;
  for (std::uint32_t m : owners) {
    Step st{Kind::Pairs, n, {}, {}, m};
    for (std::uint32_t i = 0; i < half; ++i) st.indices.push_back(2 * i + m);  // disjoint: the union is 2 x half
    st.values.assign(half, 1.0f);
    cut[m] = shards(st.view(), owners, Mode::ReduceScatter);
  }
  std::map<std::uint32_t, StepView> first{{0, check(cut[0][0])}, {1, check(cut[1][0])}};
  const StepView r = check(reduce(0, first, owners, Mode::ReduceScatter));
  EXPECT_FALSE(r.route.complete);
  EXPECT_TRUE(r.indices.empty());
}

TEST(SparseReduceScatter, RoutesWithoutTheirOwnerAreRefused) {
  const std::vector<std::uint32_t> i{1};
  const std::vector<float> v{1.0f};
  EXPECT_THROW(check(encode(Kind::Shard, 10, i, v, 0, Route{Mode::ReduceScatter, 0, false, 1, {}, {}})),
               accel::InputError);  // no owners
  EXPECT_THROW(check(encode(Kind::Reduced, 10, i, v, 0, Route{Mode::ReduceScatter, 5, true, 1, {0, 1}, {0, 0}})),
               accel::InputError);  // sent by an owner that is not one
  // A second round whose lowest sender names no owners is no sum.
  std::map<std::uint32_t, StepView> second{{0, encode_view(Kind::Reduced, Route{Mode::AllGather, 0, true, 0, {}, {}})}};
  EXPECT_FALSE(assemble(second));
}
