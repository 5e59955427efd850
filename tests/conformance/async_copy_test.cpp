// Asynchronous copies on every device (Buffer::write_async / read_async and
// Device::launch's `after`): a launch after its input's copy sees the
// copied bytes, a read started after a launch sees its output, and the
// results equal those of the synchronous path; errors travel in the Events.
#include <gtest/gtest.h>

#include <chrono>
#include <cstring>
#include <random>
#include <thread>

#include "accel/error.hpp"
#include "accel/registry.hpp"
#include "accel/work_queue.hpp"
#include "conformance/required_devices.hpp"

namespace accel {
namespace {

const Registry& registry() {
  static const Registry reg = Registry::discover_all();
  return reg;
}

std::vector<float> data(std::size_t n) {
  std::mt19937 rng(11);
  std::normal_distribution<float> g(0.0f, 1.0f);
  std::vector<float> x(n);
  for (auto& v : x) v = g(rng);
  return x;
}

struct Histogram {
  std::vector<std::uint64_t> hist, outside;
  std::vector<double> moments;
};

// One topk_histogram pass over x; copies async or not.
Histogram run(Device& dev, const std::vector<float>& x, bool async) {
  constexpr int kShift = 20;
  const std::int64_t bins = (0x7f800000u >> kShift) + 1;
  auto bx = dev.allocate(x.size() * 4), bh = dev.allocate(bins * 8), bm = dev.allocate(24), bo = dev.allocate(24);
  TopKHistogramArgs a;
  a.data = bx.get(), a.hist = bh.get(), a.moments = bm.get(), a.outside = bo.get();
  a.n = static_cast<std::int64_t>(x.size()), a.shift = kShift, a.bins = bins;
  Histogram h{std::vector<std::uint64_t>(bins), std::vector<std::uint64_t>(3), std::vector<double>(3)};
  if (!async) {
    bx->write(x.data(), x.size() * 4);
    dev.launch(a).wait();
    bh->read(h.hist.data(), bins * 8);
    bo->read(h.outside.data(), 24);
    bm->read(h.moments.data(), 24);
    return h;
  }
  // Two halves, each its own copy: the launch waits for both.
  const std::size_t half = x.size() / 2 * 4;
  std::vector<Event> copies = {bx->write_async(x.data(), half),
                               bx->write_async(reinterpret_cast<const char*>(x.data()) + half, x.size() * 4 - half, half)};
  dev.launch(a, copies).wait();
  wait_all({bh->read_async(h.hist.data(), bins * 8), bo->read_async(h.outside.data(), 24),
            bm->read_async(h.moments.data(), 24)});
  return h;
}

TEST(AsyncCopies, EveryDeviceGivesTheSynchronousResult) {
  const auto x = data(1 << 20);
  int ran = 0;
  std::vector<std::string> ran_on;
  for (const auto& dev : registry().devices()) {
    if (!dev->supports(KernelId::TopKHistogram)) continue;
    SCOPED_TRACE(dev->info().name);
    const Histogram sync = run(*dev, x, false), async = run(*dev, x, true);
    EXPECT_EQ(async.hist, sync.hist);
    EXPECT_EQ(async.outside, sync.outside);
    EXPECT_EQ(async.moments, sync.moments);
    std::uint64_t total = async.outside[0] + async.outside[1] + async.outside[2];
    for (auto c : async.hist) total += c;
    EXPECT_EQ(total, x.size());
    ++ran;
    ran_on.push_back(dev->info().name);
  }
  EXPECT_GE(ran, 2) << "cpu and fpga-emu are always present";
  test::expect_required_ran(ran_on);
}

TEST(AsyncCopies, ARoundTripReturnsTheBytes) {
  const auto x = data(4096);
  for (const auto& dev : registry().devices()) {
    SCOPED_TRACE(dev->info().name);
    auto b = dev->allocate(x.size() * 4);
    std::vector<float> back(x.size());
    b->write_async(x.data(), x.size() * 4).wait();
    b->read_async(back.data(), back.size() * 4).wait();
    EXPECT_EQ(back, x);
  }
}

TEST(AsyncCopies, ABadRangeIsTheEventsError) {
  for (const auto& dev : registry().devices()) {
    SCOPED_TRACE(dev->info().name);
    auto b = dev->allocate(64);
    char bytes[128] = {};
    Event w = b->write_async(bytes, 128);
    EXPECT_ANY_THROW(w.wait());
    EXPECT_ANY_THROW(b->read_async(bytes, 8, 60).wait());
    // A launch after a failed copy fails with it, and runs nothing.
    auto bh = dev->allocate(8), bm = dev->allocate(24), bo = dev->allocate(24);
    TopKHistogramArgs a;
    a.data = b.get(), a.hist = bh.get(), a.moments = bm.get(), a.outside = bo.get(), a.n = 16, a.bins = 1, a.shift = 31;
    if (dev->supports(KernelId::TopKHistogram)) EXPECT_ANY_THROW(dev->launch(a, {w}).wait());
  }
}

// A launch's device time is its own: the wait for its inputs is not in it
// (the performance model splits work by these seconds).
TEST(AsyncCopies, ALaunchsSecondsExcludeItsWait) {
  WorkQueue slow;
  Event copy = slow.submit([] { std::this_thread::sleep_for(std::chrono::milliseconds(200)); });
  WorkQueue launches;
  const auto t0 = std::chrono::steady_clock::now();
  Event e = launches.submit([] {}, {copy});
  e.wait();
  EXPECT_GE(std::chrono::steady_clock::now() - t0, std::chrono::milliseconds(150));
  EXPECT_LT(e.seconds(), 0.05);
}

}  // namespace
}  // namespace accel
