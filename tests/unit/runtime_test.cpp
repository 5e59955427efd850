#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <future>
#include <thread>
#include <numeric>
#include <stdexcept>

#include "accel/error.hpp"
#include "accel/faults.hpp"
#include "accel/perf_model.hpp"
#include "accel/registry.hpp"
#include "accel/work_queue.hpp"
#include "kmeans_assign.hpp"  // kernels_hls: KMEANS_MAX_K

namespace accel {
namespace {

// The fault seam: nothing unless asked; the ACCEL_FAULT_* variables read
// into a plan, a malformed one an InputError naming it; set_faults() is
// what the code asks.
TEST(Faults, FromTheEnvironmentAndSet) {
  for (const char* v : {"ACCEL_FAULT_SLOW_ROUNDS", "ACCEL_FAULT_SLOW_ROWS", "ACCEL_FAULT_PARTIAL_SEND"}) ::unsetenv(v);
  Faults f = faults_from_environment();
  EXPECT_FALSE(f.rounds.at(0));
  EXPECT_FALSE(f.rows.at(1000000));
  EXPECT_EQ(f.partial_send_round, -1);
  ::setenv("ACCEL_FAULT_SLOW_ROUNDS", "5:2.5", 1);
  ::setenv("ACCEL_FAULT_PARTIAL_SEND", "7:1", 1);
  f = faults_from_environment();
  EXPECT_FALSE(f.rounds.at(4));
  EXPECT_TRUE(f.rounds.at(5));
  EXPECT_DOUBLE_EQ(f.rounds.factor, 2.5);
  EXPECT_EQ(f.partial_send_round, 7);
  EXPECT_EQ(f.partial_send_peers, 1u);
  ::setenv("ACCEL_FAULT_SLOW_ROWS", "1:200", 1);
  try {
    faults_from_environment();
    ADD_FAILURE() << "a factor of 200 was taken";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("ACCEL_FAULT_SLOW_ROWS"), std::string::npos) << e.what();
  }
  for (const char* v : {"ACCEL_FAULT_SLOW_ROUNDS", "ACCEL_FAULT_SLOW_ROWS", "ACCEL_FAULT_PARTIAL_SEND"}) ::unsetenv(v);
  EXPECT_FALSE(faults().rounds.at(5));  // read by the accel command only, not by the library
  set_faults(f);
  EXPECT_TRUE(faults().rounds.at(5));
  set_faults({});
  EXPECT_FALSE(faults().rounds.at(5));
}

TEST(WorkQueue, RunsInOrderAndRethrows) {
  WorkQueue q;
  std::vector<int> order;
  auto a = q.submit([&] { order.push_back(1); });
  auto b = q.submit([&] { throw DeviceError("boom"); });
  auto c = q.submit([&] { order.push_back(3); });
  a.wait();
  EXPECT_THROW(b.wait(), DeviceError);
  c.wait();
  EXPECT_EQ(order, (std::vector<int>{1, 3}));
  EXPECT_GE(c.seconds(), 0.0);
}

// run_here: on the caller's thread when the queue is idle; behind queued
// work (on the queue's thread, in order) otherwise; work submitted while it
// runs waits for it; what it throws reaches the caller.
TEST(WorkQueue, RunHereRunsInlineWhenIdleAndInOrderOtherwise) {
  WorkQueue q;
  std::thread::id ran_on;
  q.run_here([&] { ran_on = std::this_thread::get_id(); });
  EXPECT_EQ(ran_on, std::this_thread::get_id());

  std::vector<int> order;
  std::promise<void> release;
  auto gate = release.get_future().share();
  auto first = q.submit([&, gate] {
    gate.wait();
    order.push_back(1);
  });
  std::thread opener([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    release.set_value();
  });
  q.run_here([&] {
    order.push_back(2);
    ran_on = std::this_thread::get_id();
  });
  opener.join();
  first.wait();
  EXPECT_EQ(order, (std::vector<int>{1, 2}));
  EXPECT_NE(ran_on, std::this_thread::get_id());

  std::atomic<bool> inside{false}, overlapped{false};
  q.run_here([&] {
    inside = true;
    auto later = q.submit([&] { overlapped = inside.load(); });
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    inside = false;
    (void)later;
  });
  q.submit([] {}).wait();
  EXPECT_FALSE(overlapped);
  EXPECT_THROW(q.run_here([] { throw DeviceError("boom"); }), DeviceError);
  q.run_here([&] { order.push_back(3); });  // the queue still works
  EXPECT_EQ(order.back(), 3);
}

TEST(Registry, AlwaysHasCpuAndFpgaEmu) {
  const Registry reg = Registry::discover_all();
  auto cpu = reg.select("cpu", KernelId::KMeansAssign);
  ASSERT_EQ(cpu.size(), 1u);
  EXPECT_EQ(cpu[0]->info().family, "cpu");
  EXPECT_EQ(cpu[0]->info().type, "cpu");
  EXPECT_GT(cpu[0]->info().compute_units, 0);
  EXPECT_GT(cpu[0]->info().memory_bytes, 0u);
  EXPECT_EQ(reg.select("fpga-emu", KernelId::KMeansAssign).size(), 1u);
  // all: every device with its own hardware; emulation only when named, and
  // a comma list is the union of its parts.
  for (auto* d : reg.select("all", KernelId::KMeansAssign)) EXPECT_FALSE(d->info().on_host_cores) << d->info().name;
  const auto both = reg.select("cpu,fpga-emu,cpu", KernelId::KMeansAssign);
  ASSERT_EQ(both.size(), 2u);
  EXPECT_EQ(both[0]->info().family, "cpu");
  EXPECT_EQ(both[1]->info().family, "fpga-emu");
  EXPECT_GE(reg.select("all,fpga-emu", KernelId::KMeansAssign).size(), 2u);
  // auto never picks emulation
  for (auto* d : reg.select("auto", KernelId::KMeansAssign)) EXPECT_FALSE(d->info().on_host_cores) << d->info().name;
}

TEST(Registry, UnknownDeviceIsInputError) {
  const Registry reg = Registry::discover_all();
  try {
    reg.select("tpu", KernelId::KMeansAssign);
    FAIL();
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("tpu"), std::string::npos);
  }
}

TEST(Registry, BackendsWithoutDevicesSayWhy) {
  const Registry reg = Registry::discover_all();
  for (const auto& r : reg.reports())
    if (r.devices == 0) EXPECT_FALSE(r.why_none.empty()) << r.backend;
}

TEST(FpgaEmu, BuffersAreNotHostVisible) {
  const Registry reg = Registry::discover_all();
  auto* emu = reg.select("fpga-emu", KernelId::KMeansAssign)[0];
  auto buf = emu->allocate(64);
  EXPECT_EQ(buf->host_ptr(), nullptr);
  EXPECT_EQ(emu->wrap_host(nullptr, 0), nullptr);
  int v = 42, back = 0;
  buf->write(&v, sizeof v, 8);
  buf->read(&back, sizeof back, 8);
  EXPECT_EQ(back, 42);
  EXPECT_THROW(buf->write(&v, sizeof v, 62), std::out_of_range);
}

TEST(FpgaEmu, RejectsShapesBeyondItsOnChipBuffers) {
  const Registry reg = Registry::discover_all();
  auto* emu = reg.select("fpga-emu", KernelId::KMeansAssign)[0];
  const std::int64_t k = KMEANS_MAX_K + 1, d = 1, n = 1;
  EXPECT_EQ(emu->cannot_run(KMeansAssignArgs{.n = n, .d = d, .k = k - 1}), "");
  const std::string why = emu->cannot_run(KMeansAssignArgs{.n = n, .d = d, .k = k});
  EXPECT_NE(why.find("k <= " + std::to_string(KMEANS_MAX_K)), std::string::npos) << why;
  EXPECT_NE(emu->info().limits.find("k <= " + std::to_string(KMEANS_MAX_K)), std::string::npos);
  // A launch beyond them fails on the device too.
  auto x = emu->allocate(4), c = emu->allocate(k * 4), l = emu->allocate(4), s = emu->allocate(k * 8),
       cnt = emu->allocate(k * 8), in = emu->allocate(8);
  auto ev = emu->launch(KMeansAssignArgs{x.get(), c.get(), l.get(), s.get(), cnt.get(), in.get(), n, d, k});
  EXPECT_THROW(ev.wait(), DeviceError);
}

TEST(PerfModel, AveragesMeasurements) {
  PerfModel m;
  ShapeKey key{"cpu", KernelId::KMeansAssign, 2, 4};
  EXPECT_FALSE(m.rows_per_second(key));
  m.record(key, 1000, 1.0);
  EXPECT_DOUBLE_EQ(*m.rows_per_second(key), 1000.0);
  m.record(key, 2000, 1.0);
  EXPECT_GT(*m.rows_per_second(key), 1000.0);
  EXPECT_LT(*m.rows_per_second(key), 2000.0);
}

TEST(Rebalance, MovesLoadTowardCapability) {
  // Twice the speed gets twice the rows (Algorithm 1 of [SysInfo]).
  auto out = rebalance({500, 500, 500}, {2.0, 1.0, 1.0}, 0.0);
  EXPECT_EQ(std::accumulate(out.begin(), out.end(), std::int64_t{0}), 1500);
  EXPECT_EQ(out, (std::vector<std::int64_t>{750, 375, 375}));
}

TEST(Rebalance, LeavesBalancedLoadsAlone) {
  EXPECT_EQ(rebalance({100, 101}, {1.0, 1.0}, 0.05), (std::vector<std::int64_t>{100, 101}));
}

TEST(Rebalance, ZeroCapabilityGetsNothing) {
  auto out = rebalance({10, 10, 10}, {1.0, 0.0, 1.0}, 0.0);
  EXPECT_EQ(out[1], 0);
  EXPECT_EQ(out[0] + out[2], 30);
}

}  // namespace
}  // namespace accel
