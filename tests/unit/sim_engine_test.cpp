// The engine's own coordinator and workers (run_coordinator, run_worker:
// the code `accel coordinator` and `accel worker` run) in the simulator:
// a k-means job of P simulated members, failure-free and with a member
// killed, is the same from the same seed and ends at the failure-free
// centroids.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <string>

#include "swarm.hpp"

namespace accel::cluster::sim {
namespace {

using namespace std::chrono_literals;

SwarmOptions options() {
  SwarmOptions o;
  o.dir = testing::TempDir() + "/sim_engine";
  std::filesystem::create_directories(o.dir);
  o.shape = {24000, 4, 6};
  o.iterations = 40;
  o.timeout_ms = 200;
  o.link = {10us, 1.25e9};
  return o;
}

TEST(SimEngine, AKMeansJobIsTheSameFromTheSameSeed) {
  const SwarmOptions o = options();
  const auto a = run_job(1, 3, {}, {}, o, o.dir + "/a"), b = run_job(1, 3, {}, {}, o, o.dir + "/b");
  ASSERT_EQ(a.coordinator_exit, 0) << a.coordinator_error;
  EXPECT_TRUE(a.ended);
  EXPECT_EQ(a.centroids, b.centroids);
  EXPECT_EQ(a.seconds, b.seconds);
  EXPECT_EQ(a.logs, b.logs);  // every process's lines, virtual times included
  EXPECT_EQ(a.centroids.size(), 6u * 4);
}

TEST(SimEngine, AWorkerKilledMidJobLeavesTheFailureFreeCentroids) {
  const SwarmOptions o = options();
  const auto ref = run_job(2, 4, {}, {}, o, o.dir + "/ref");
  ASSERT_EQ(ref.coordinator_exit, 0) << ref.coordinator_error;
  // Killed in round 15 of 40: at that round's time in the failure-free run.
  const auto k = run_job(2, 4, {{Fault::Kill, 2, 15}}, ref.round_at, o, o.dir + "/killed");
  ASSERT_EQ(k.coordinator_exit, 0) << k.coordinator_error;
  EXPECT_NE(k.logs.at("coordinator").find("\"evicted\":[2]"), std::string::npos) << "worker 2 was not lost";
  EXPECT_EQ(ref.logs.at("coordinator").find("\"evicted\":[2]"), std::string::npos);
  ASSERT_EQ(k.centroids.size(), ref.centroids.size());
  for (std::size_t i = 0; i < ref.centroids.size(); ++i)
    EXPECT_NEAR(k.centroids[i], ref.centroids[i], 1e-6 * std::max(1.0f, std::abs(ref.centroids[i]))) << i;
}

}  // namespace
}  // namespace accel::cluster::sim
