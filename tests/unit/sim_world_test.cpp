// The simulator's world and transport (host/cluster/sim): virtual time,
// the link model, peer failure, determinism from a seed, and the engine's
// own barrier (Node::sync) run on them by P simulated members.
#include <gtest/gtest.h>

#include <map>
#include <set>
#include <string>
#include <vector>

#include "node.hpp"
#include "sim_transport.hpp"
#include "world.hpp"

namespace accel::cluster::sim {
namespace {

using namespace std::chrono_literals;

transport::Options options(std::uint32_t id) {
  transport::Options o;
  o.job_token = 0x5eed;
  o.self_id = id;
  o.incarnation = 1;
  return o;
}

double seconds(Clock::duration d) { return std::chrono::duration<double>(d).count(); }

TEST(SimWorld, SleepsAndMessagesTakeVirtualTimeOnly) {
  World w(1, {1ms, 1e6});  // 1 ms and 1 MB/s
  std::vector<std::byte> addr;
  double slept = 0, arrived = -1;
  std::size_t got = 0;
  w.spawn("receiver", [&] {
    SimTransport t(w, options(1));
    addr = t.worker_address();
    const auto t0 = Clock::now();
    auto r = t.receive(std::chrono::milliseconds(60'000));
    ASSERT_TRUE(r);
    arrived = seconds(Clock::now() - t0);
    got = r->message.payload.size();
  });
  w.spawn("sender", [&] {
    SimTransport t(w, options(2));
    const auto t0 = Clock::now();
    sleep_for(5s);
    slept = seconds(Clock::now() - t0);
    const auto ep = t.connect(addr);
    std::vector<std::byte> payload(100'000 - transport::kControlHeaderBytes);
    EXPECT_TRUE(t.send(ep, 7, 1, payload)->ok());
  });
  const auto wall = std::chrono::steady_clock::now();
  ASSERT_TRUE(w.run(60s));
  EXPECT_LT(std::chrono::steady_clock::now() - wall, 5s);
  EXPECT_DOUBLE_EQ(slept, 5.0);
  EXPECT_NEAR(arrived, 5.0 + 0.1 + 0.001, 1e-6);  // 100 kB at 1 MB/s, then the latency
  EXPECT_EQ(got, 100'000 - transport::kControlHeaderBytes);
}

TEST(SimWorld, AKilledPeersEndpointFailsAndWakesTheWaiter) {
  World w(1, {});
  std::vector<std::byte> addr;
  double woke = -1;
  const auto victim = w.spawn("victim", [&] {
    SimTransport t(w, options(1));
    addr = t.worker_address();
    sleep_for(3600s);
  });
  w.spawn("waiter", [&] {
    SimTransport t(w, options(2));
    sleep_for(1ms);
    const auto ep = t.connect(addr);
    EXPECT_TRUE(t.alive(ep));
    EXPECT_FALSE(t.receive(std::chrono::milliseconds(60'000)));  // returns at the failure, not the timeout
    woke = seconds(w.elapsed());
    EXPECT_FALSE(t.alive(ep));
    EXPECT_FALSE(t.send(ep, 7, 1, {})->ok());
  });
  w.kill(victim, 2s);
  ASSERT_TRUE(w.run(60s));
  EXPECT_DOUBLE_EQ(woke, 2.0);
  EXPECT_TRUE(w.ended(victim));
}

TEST(SimWorld, ProcessesLeftAtTheLimitAreUnwound) {
  World w(1, {});
  bool unwound = false;
  w.spawn("forever", [&] {
    struct Guard {
      bool& flag;
      ~Guard() { flag = true; }
    } g{unwound};
    for (;;) sleep_for(1s);
  });
  EXPECT_FALSE(w.run(10s));
  EXPECT_TRUE(unwound);
}

// A partition holds the cut-off process's messages, both ways, until it
// heals, and they arrive then in the order they were sent; the process
// runs on meanwhile, and after the heal messages take the link's time.
TEST(SimWorld, APartitionHoldsMessagesUntilItHealsInOrder) {
  World w(1, {1ms, 1e9});
  std::vector<std::byte> addr;
  std::vector<std::pair<std::uint64_t, double>> arrived;  // iteration, virtual seconds
  double sender_ran_to = -1;
  w.spawn("receiver", [&] {
    SimTransport t(w, options(1));
    addr = t.worker_address();
    while (arrived.size() < 3) {
      auto r = t.receive(std::chrono::milliseconds(60'000));
      ASSERT_TRUE(r);
      arrived.emplace_back(r->message.header.iteration, seconds(w.elapsed()));
    }
  });
  const auto sender = w.spawn("sender", [&] {
    SimTransport t(w, options(2));
    sleep_for(1ms);
    const auto ep = t.connect(addr);
    sleep_for(9ms);  // t = 10 ms: cut off from 5 ms to 105 ms
    EXPECT_TRUE(t.send(ep, 7, 1, {})->ok());
    sleep_for(10ms);
    EXPECT_TRUE(t.send(ep, 7, 2, {})->ok());
    sleep_for(100ms);  // t = 120 ms: healed
    sender_ran_to = seconds(w.elapsed());
    EXPECT_TRUE(t.send(ep, 7, 3, {})->ok());
  });
  w.partition(sender, 5ms, 100ms);
  ASSERT_TRUE(w.run(60s));
  ASSERT_EQ(arrived.size(), 3u);
  EXPECT_EQ(arrived[0].first, 1u);
  EXPECT_EQ(arrived[1].first, 2u);
  EXPECT_EQ(arrived[2].first, 3u);
  EXPECT_NEAR(arrived[0].second, 0.106, 1e-6);  // the heal, then the latency
  EXPECT_NEAR(arrived[1].second, 0.106, 1e-6);
  EXPECT_DOUBLE_EQ(sender_ran_to, 0.120);
  EXPECT_NEAR(arrived[2].second, 0.121, 1e-6);
}

// The bounds the swarm checks: the longest wait, the most messages held
// unreceived, and those a full queue dropped.
TEST(SimWorld, ItMeasuresWaitsAndHeldMessages) {
  World w(1, {1ms, 1e9});
  std::vector<std::byte> addr;
  w.spawn("receiver", [&] {
    auto o = options(1);
    o.max_queued_messages = 3;
    SimTransport t(w, o);
    addr = t.worker_address();
    sleep_for(2s);  // five messages arrive meanwhile: three are held, two dropped
    int got = 0;
    while (t.receive(std::chrono::milliseconds(10))) ++got;
    EXPECT_EQ(got, 3);
  });
  w.spawn("sender", [&] {
    SimTransport t(w, options(2));
    sleep_for(1ms);
    const auto ep = t.connect(addr);
    for (int i = 0; i < 5; ++i) EXPECT_TRUE(t.send(ep, 7, i, {})->ok());
  });
  ASSERT_TRUE(w.run(60s));
  EXPECT_EQ(w.stats().peak_held, 3u);
  EXPECT_EQ(w.stats().dropped_full, 2u);
  EXPECT_NEAR(seconds(w.stats().longest_wait), 2.0, 0.01);  // woken by the arrivals ~2 ms in, then asleep to 2 s
}

TEST(SimWorld, BulkTransfersLandAfterTheirLinkTime) {
  World w(1, {0s, 1e9});
  std::vector<std::byte> addr, ticket;
  std::vector<std::byte> dst(1 << 20);
  double landed = -1;
  w.spawn("receiver", [&] {
    SimTransport t(w, options(1));
    addr = t.worker_address();
    auto h = t.expect(dst.data(), dst.size());
    ticket = h.ticket;
    ASSERT_TRUE(t.wait(h.completion, std::chrono::milliseconds(10'000)));
    landed = seconds(w.elapsed());
  });
  w.spawn("sender", [&] {
    SimTransport t(w, options(2));
    sleep_for(1ms);
    std::vector<std::byte> src(1 << 20, std::byte{7});
    auto c = t.push(t.connect(addr), ticket, src.data(), src.size());
    EXPECT_TRUE(t.wait(c, std::chrono::milliseconds(10'000)));
    EXPECT_TRUE(c->ok());
  });
  ASSERT_TRUE(w.run(60s));
  EXPECT_NEAR(landed, 0.001 + (1 << 20) / 1e9, 1e-9);
  EXPECT_EQ(dst[12345], std::byte{7});
}

// P members run `rounds` rounds of the engine's all-to-all barrier
// (Node::sync); member 0 plays the coordinator's part of it: its
// contribution carries the view, evicted members leave the view, and it
// answers kNeed with what it counted. Each member's trace line is what it
// counted in a round: the members and their data.
struct BarrierRun {
  std::map<std::pair<std::int64_t, std::uint32_t>, std::string> counted;  // (round, member) -> what it counted
  World::Stats stats;
  double seconds = 0;
};

// Each member computes for `compute` of virtual time a round.
BarrierRun run_barrier(std::uint64_t seed, std::uint32_t P, int rounds, std::size_t bytes,
                       std::optional<std::pair<std::uint32_t, Clock::duration>> kill = {},
                       Clock::duration compute = 1ms) {
  World w(seed, {10us, 1.25e9});
  BarrierRun out;
  std::vector<std::vector<std::byte>> addr(P);
  const transport::MacKey key{};
  for (std::uint32_t id = 0; id < P; ++id) {
    const auto p = w.spawn("member-" + std::to_string(id), [&, id] {
      Node node(options(id), Ms(100), Limits{});
      addr[id] = node.net().worker_address();
      sleep_for(1ms);  // every address published
      for (std::uint32_t q = 0; q < P; ++q)
        if (q != id) node.connect_peer(q, addr[q]), node.set_key(q, key);
      Membership view;
      for (std::uint32_t q = 0; q < P; ++q) view.active.push_back(q);
      std::map<std::int64_t, std::map<std::uint32_t, Bytes>> counted;
      std::vector<std::pair<std::uint32_t, std::pair<std::int64_t, std::uint32_t>>> needs;
      auto other = [&](const transport::Received& r) {
        if (id != 0 || r.message.header.type != kNeed) return;
        const auto t = static_cast<std::int64_t>(r.message.header.iteration);
        const auto q = decode_u32(r.message.payload);
        if (!counted.count(t)) return needs.push_back({r.message.header.sender, {t, q}});
        const auto it = counted[t].find(q);
        node.send(r.message.header.sender, kCounted, t, encode_counted(q, it == counted[t].end() ? nullptr : &it->second));
      };
      for (std::int64_t t = 1; t <= rounds; ++t) {
        sleep_for(compute);
        Contribution mine;
        mine.data.assign(bytes, static_cast<std::byte>(w.rng()() & 0xff));
        if (id == 0) mine.has_view = true, mine.view = view;
        SyncStats st;
        std::map<std::uint32_t, Contribution> got;
        try {
          got = node.sync(t, mine, view, [](std::span<const std::byte>) {}, other, st);
        } catch (const std::exception&) {
          return;  // evicted, or the coordinator is gone
        }
        std::string line;
        for (const auto& [q, c] : got) {
          line += std::to_string(q) + ":" + std::to_string(c.data.size()) + ":";
          line += c.data.empty() ? "-" : std::to_string(std::to_integer<int>(c.data[0]));
          line += " ";
          counted[t][q] = c.data;
        }
        out.counted[{t, id}] = line;
        if (id == 0) {
          for (auto q : st.evicted) std::erase(view.active, q);
          for (const auto& [to, need] : std::exchange(needs, {})) {
            const auto it = counted[need.first].find(need.second);
            node.send(to, kCounted, need.first,
                      encode_counted(need.second, it == counted[need.first].end() ? nullptr : &it->second));
          }
        }
      }
      node.net().progress_until([] { return false; }, Ms(50));  // the last words leave
    });
    if (kill && kill->first == id) w.kill(p, kill->second);
  }
  EXPECT_TRUE(w.run(3600s));
  out.stats = w.stats();
  out.seconds = seconds(w.elapsed());
  return out;
}

// Per round, every member that finished it counted the same contributions.
void expect_agreement(const BarrierRun& run, int rounds) {
  for (std::int64_t t = 1; t <= rounds; ++t) {
    std::set<std::string> lines;
    for (const auto& [key, line] : run.counted)
      if (key.first == t) lines.insert(line);
    EXPECT_LE(lines.size(), 1u) << "round " << t << " counted differently";
  }
}

TEST(SimBarrier, OneSeedOneRun) {
  const auto a = run_barrier(7, 8, 20, 4096), b = run_barrier(7, 8, 20, 4096);
  EXPECT_EQ(a.counted, b.counted);
  EXPECT_EQ(a.stats.messages, b.stats.messages);
  EXPECT_EQ(a.seconds, b.seconds);
  EXPECT_EQ(a.counted.size(), 8u * 20);
  const auto c = run_barrier(8, 8, 20, 4096);
  EXPECT_NE(a.counted, c.counted);  // other draws of the data
  expect_agreement(a, 20);
}

TEST(SimBarrier, AllToAllSendsEachMemberPMinusOneContributionsARound) {
  for (std::uint32_t P : {4u, 16u, 64u}) {
    const auto r = run_barrier(1, P, 5, 1024);
    EXPECT_EQ(r.counted.size(), P * 5u);
    // Each member notifies the P - 1 others every round.
    EXPECT_EQ(r.stats.messages, std::uint64_t{P} * (P - 1) * 5) << "P = " << P;
    expect_agreement(r, 5);
  }
}

TEST(SimBarrier, AMemberKilledMidRunIsEvictedAndTheRestAgree) {
  for (std::uint64_t seed = 1; seed <= 5; ++seed) {
    const auto r = run_barrier(seed, 6, 30, 2048, std::pair{3u, Clock::duration(10ms + seed * 1ms / 7)});
    expect_agreement(r, 30);
    int rounds_of_3 = 0, last_rounds = 0;
    for (const auto& [key, line] : r.counted) {
      rounds_of_3 += key.second == 3;
      last_rounds += key.first == 30;
    }
    EXPECT_LT(rounds_of_3, 30) << "seed " << seed;
    EXPECT_EQ(last_rounds, 5) << "seed " << seed;  // every survivor reached the end
  }
}

}  // namespace
}  // namespace accel::cluster::sim
