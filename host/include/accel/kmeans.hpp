// Lloyd's k-means over any set of devices. Each iteration launches
// kmeans_assign on every device's share of the rows and sums the partial
// (sums, counts) on the host: c_k = sum_k / count_k (the update of [Antimatroid]).
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <memory>
#include <vector>

#include "accel/io.hpp"
#include "accel/perf_model.hpp"

namespace accel {

class Device;

struct KMeansOptions {
  std::int64_t k = 8;
  int max_iter = 100;
  double tol = 1e-4;  // stop when every centroid moves less than tol; 0 = run max_iter
  std::string init = "kmeans++";  // kmeans++ | random | kmeans-parallel | path to a k x d .npy
  std::uint64_t seed = 0;
  // lloyd: every distance every iteration. yinyang: the same iterations with
  // rows skipped when bounds prove their label unchanged (devices that keep
  // bounds; the others run lloyd). auto: yinyang when d > 64, where a row
  // costs more to read and score than its bounds do (below, the cpu's
  // direct Lloyd loops are faster).
  std::string algorithm = "auto";
};

// Whether `algorithm` (auto | lloyd | yinyang) keeps bounds for rows of d
// dimensions; throws InputError for another name.
bool kmeans_uses_bounds(const std::string& algorithm, std::int64_t d);

struct KMeansIteration {
  int iteration = 0;         // 1-based
  double inertia = 0;        // of this iteration's assignment
  double max_shift = 0;      // largest centroid move in this iteration's update
  double seconds = 0, compute_seconds = 0, transfer_seconds = 0;
  std::int64_t reseeded = 0;  // empty clusters re-seeded in this update
  std::vector<std::int64_t> rows_per_device;
};

struct KMeansResult {
  Matrix centroids;
  std::vector<std::int32_t> labels;  // from a final assignment with the returned centroids
  double inertia = 0;                // of that final assignment
  int iterations = 0;
  bool converged = false;
  std::int64_t reseeded = 0;
  double seconds = 0, compute_seconds = 0, transfer_seconds = 0;
  std::vector<std::string> devices;
};

// One node's half of a Lloyd iteration: its rows split across its devices in proportion to measured
// throughput (Algorithm 1 of [SysInfo] when the
// measurements drift), partial sums added on the host. kmeans() runs one; a distributed job runs
// one per node and sums the nodes' partials.
struct PartialStep {
  std::vector<double> sums;          // k x d
  std::vector<std::int64_t> counts;  // k
  double inertia = 0;
  double compute_seconds = 0, transfer_seconds = 0;
};

class PartialAssigner {
 public:
  // rows (n x d, row-major) must outlive the assigner and not change; devices
  // must accept k and d. With `bounds`, devices that can keep Yinyang bounds
  // between steps do (KMeansAssignArgs::bounds).
  PartialAssigner(const float* rows, std::int64_t n, std::int64_t d, std::int64_t k, std::vector<Device*> devices,
                  PerfModel& model, bool bounds = false);
  ~PartialAssigner();
  PartialAssigner(const PartialAssigner&) = delete;
  PartialAssigner& operator=(const PartialAssigner&) = delete;

  PartialStep step(const std::vector<float>& centroids);
  // Re-divides rows among the devices from the measured rates; returns the
  // transfer seconds it cost (0 when nothing moved).
  double rebalance();
  std::vector<std::int64_t> rows_per_device() const;
  // Labels of the last step, n of them.
  void labels(std::int32_t* out) const;
  std::vector<std::string> device_names() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// The host-side update every participant runs identically: c = sums / counts
// (empty clusters keep their centroid, then are re-seeded by splitting the
// largest). Returns the largest centroid move; *reseeded counts re-seeds.
double update_centroids(const std::vector<double>& sums, std::vector<std::int64_t> counts, std::vector<float>& c,
                        std::int64_t k, std::int64_t d, std::int64_t* reseeded);

// Initial centroids by opts.init. Throws InputError for a bad file or shape.
Matrix kmeans_init(const Matrix& x, const KMeansOptions& opts);

// Runs Lloyd iterations on `devices`, splitting rows in proportion to the throughput `model`
// measures (Algorithm 1 of [SysInfo] when it drifts).
// on_iteration, when set, sees every iteration as it ends.
KMeansResult kmeans(const Matrix& x, const Matrix& initial, const KMeansOptions& opts,
                    const std::vector<Device*>& devices, PerfModel& model,
                    const std::function<void(const KMeansIteration&)>& on_iteration = {});

// Devices of `candidates` whose kernels accept k and d (FPGA designs bound
// them); throws InputError when none does.
std::vector<Device*> kmeans_capable(const std::vector<Device*>& candidates, std::int64_t k, std::int64_t d);

// Empty clusters: each is moved a small step off the largest cluster's
// centroid, splitting it. Returns how many were re-seeded. Exposed for tests.
std::int64_t reseed_empty(std::vector<double>& centroids, std::vector<std::int64_t>& counts, std::int64_t k,
                          std::int64_t d);

}  // namespace accel
