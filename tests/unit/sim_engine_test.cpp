// The engine's own coordinator and workers (run_coordinator, run_worker:
// the code `accel coordinator` and `accel worker` run) in the simulator:
// a k-means job of P simulated members, failure-free and with a member
// killed, is the same from the same seed and ends at the failure-free
// centroids.
#include <gtest/gtest.h>

#include <omp.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <random>
#include <string>
#include <vector>

#include "accel/io.hpp"
#include "engine.hpp"
#include "kmeans/kmeans_job.hpp"
#include "world.hpp"

namespace accel::cluster::sim {
namespace {

using namespace std::chrono_literals;

constexpr std::uint64_t kToken = 0x51a7;

std::string blobs(const std::string& dir, std::int64_t n, std::int64_t d, int centers) {
  std::mt19937_64 g(3);
  std::normal_distribution<float> noise(0, 1);
  std::vector<float> c(centers * d), x(n * d);
  for (auto& v : c) v = noise(g) * 8;
  for (std::int64_t i = 0; i < n; ++i)
    for (std::int64_t j = 0; j < d; ++j) x[i * d + j] = c[(i % centers) * d + j] + noise(g);
  const std::string path = dir + "/x.npy";
  write_npy(path, x.data(), {n, d});
  return path;
}

struct KMeansRun {
  std::vector<float> centroids;
  std::string log;  // the coordinator's JSON lines
  double seconds = 0;
  int coordinator_exit = -1;
};

// P - 1 workers and the coordinator; `kill`: worker and virtual time.
KMeansRun run_kmeans(std::uint64_t seed, int workers, std::optional<std::pair<int, Clock::duration>> kill = {}) {
  const std::string dir = testing::TempDir() + "/sim_engine_" + std::to_string(seed) + "_" +
                          std::to_string(kill ? kill->first : 0);
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  const std::string input = blobs(dir, 24000, 4, 6);
  World w(seed, {10us, 1.25e9});
  KMeansRun out;
  w.spawn("coordinator", [&] {
    omp_set_num_threads(1);
    KMeansJobOptions ko;
    ko.input = input;
    ko.k = 6;
    ko.max_iter = 40;
    ko.tol = 0;
    ko.output_centroids = dir + "/centroids.npy";
    KMeansJob job(ko);
    CoordinatorOptions o;
    o.job = kToken;
    o.job_file = dir + "/job.token";
    o.workers = workers;
    o.listen = "127.0.0.1:40000";
    o.timeout_ms = 200;
    o.print_summary = false;
    o.log_json = dir + "/coordinator.jsonl";
    out.coordinator_exit = run_coordinator(o, job);
  });
  for (int i = 1; i <= workers; ++i) {
    const auto p = w.spawn(
        "worker-" + std::to_string(i),
        [&, i] {
          omp_set_num_threads(1);
          WorkerOptions o;
          o.job = kToken;
          o.coordinator = "127.0.0.1:40000";
          o.id = static_cast<std::uint32_t>(i);
          o.timeout_ms = 200;
          run_worker(o);
        },
        1ms);
    if (kill && kill->first == i) w.kill(p, kill->second);
  }
  EXPECT_TRUE(w.run(600s));
  out.seconds = std::chrono::duration<double>(w.elapsed()).count();
  if (out.coordinator_exit == 0) {
    const Matrix m = load_matrix(dir + "/centroids.npy");
    out.centroids.assign(m.row(0), m.row(0) + m.rows * m.cols);
  }
  std::ifstream in(dir + "/coordinator.jsonl");
  out.log.assign(std::istreambuf_iterator<char>(in), {});
  return out;
}

TEST(SimEngine, AKMeansJobIsTheSameFromTheSameSeed) {
  const auto a = run_kmeans(1, 3), b = run_kmeans(1, 3);
  ASSERT_EQ(a.coordinator_exit, 0);
  EXPECT_EQ(a.centroids, b.centroids);
  EXPECT_EQ(a.seconds, b.seconds);
  EXPECT_EQ(a.log, b.log);  // every round's line, its virtual times included
  EXPECT_EQ(a.centroids.size(), 6u * 4);
}

TEST(SimEngine, AWorkerKilledMidJobLeavesTheFailureFreeCentroids) {
  const auto ref = run_kmeans(2, 4);
  ASSERT_EQ(ref.coordinator_exit, 0);
  // Killed in round 15 of 40: at that round's time in the failure-free run.
  const auto line = ref.log.find("\"iteration\":15,");
  ASSERT_NE(line, std::string::npos);
  const double at = std::stod(ref.log.substr(ref.log.find("\"t_s\":", line) + 6));
  const auto k = run_kmeans(2, 4, std::pair{2, std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(at))});
  ASSERT_EQ(k.coordinator_exit, 0);
  EXPECT_NE(k.log.find("\"evicted\":[2]"), std::string::npos) << "worker 2 was not lost";
  EXPECT_EQ(ref.log.find("\"evicted\":[2]"), std::string::npos);
  ASSERT_EQ(k.centroids.size(), ref.centroids.size());
  for (std::size_t i = 0; i < ref.centroids.size(); ++i)
    EXPECT_NEAR(k.centroids[i], ref.centroids[i], 1e-6 * std::max(1.0f, std::abs(ref.centroids[i]))) << i;
}

}  // namespace
}  // namespace accel::cluster::sim
