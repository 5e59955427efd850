// Swarm runs (issue 30): one seed draws a job and a fault schedule, runs
// the engine's coordinator and workers in a World, and checks the
// invariants. A failing seed replays bit for bit from its number.
//
// The job: k-means (move: lost rows are computed by the others) of a
// coordinator and 3 to 8 workers. The nemesis, drawn from the seed:
// workers killed (some restarted later, several at once), workers paused
// under or past the barrier's timeout, the coordinator killed and resumed
// from its checkpoint, a worker or the coordinator cut off from the others
// by a partition (World::partition), workers without an id joining the
// running job, a worker leaving it (SIGTERM), a slow worker (World::slow),
// and the coordinator's checkpoint writes failing for a while, as on a full
// disk. Invariants: the coordinator
// exits 0; every participant logged the same inertia for each round it
// counted; the centroids equal the failure-free run's within 1e-6
// (relative); every process ended before the time limit.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "accel/sparse_allreduce.hpp"
#include "engine.hpp"
#include "world.hpp"

namespace accel::cluster::sim {

// Every swarm job's token.
inline constexpr std::uint64_t kSwarmToken = 0x5a4d;

// The job's input: rows x cols float32 around k centres, and k.
struct JobShape {
  std::int64_t rows = 12000, cols = 4, k = 5;
};

struct SwarmOptions {
  std::string dir;  // scratch: the input, logs, outputs
  // kmeans, svm (C-SVC on two classes; rounds: the solver's), sparse (the
  // sparse allreduce: o.iterations steps of SparseGroups; sparse_swarm.hpp),
  // or mixed: each seed draws one of the three.
  std::string workload = "kmeans";
  std::string exchange = "auto";  // sparse: rank 0's SparseGroupOptions::exchange
  // k-means and SVM: the workers read their own rows (--pull; a lost
  // worker's rows move to the others, who read them), and they write
  // snapshots a restart resumes from (--snapshot-dir).
  bool pull = false, snapshots = false;
  JobShape shape;
  int min_workers = 3, max_workers = 8;
  int iterations = 60;
  LinkModel link{std::chrono::milliseconds(1), 1.25e8};  // 1 ms, 1 Gbit/s
  int timeout_ms = 50;
  int gather_from = kGatherFrom;  // CoordinatorOptions::gather_from
  int tree_from = kTreeFrom;      // CoordinatorOptions::tree_from
  // Also draw windows of a lossy network: control messages dropped,
  // duplicated and delayed (World::MessageFaults).
  bool message_faults = false;
  // Keep the logs and outputs of seeds that pass too (a failing seed's are
  // always kept).
  bool keep = false;
  // Bytes of memory every worker says it can still take for rows
  // (WorkerOptions::memory_room); -1: they say nothing.
  std::int64_t worker_room = -1;
};

enum class Fault { Kill, KillRestart, Pause, Lossy, CoordinatorRestart, Partition, Join, Leave, Slow, DiskFull };

struct FaultAt {
  Fault kind;
  int worker = 1;             // 0: the coordinator (Partition), a new worker without an id (Join)
  int round = 1;             // in the failure-free run's time
  Clock::duration length{};  // the pause, the lossy window, the partition, the slowness, the full disk, or how long until the restart
  Clock::duration step{};    // Slow: what each arrival costs it
};

// A sum a sparse member received: its rank, its incarnation (1, then one
// more for each restart) and its step's tag.
struct SparseDelivery {
  std::uint32_t rank = 0, incarnation = 1;
  std::uint64_t call = 0;
  SparseSum sum;
};

struct JobRun {
  int coordinator_exit = -1;
  std::string coordinator_error;
  std::vector<float> centroids;   // k-means
  std::vector<double> objectives;  // svm: each problem's dual objective
  std::int64_t support_vectors = 0;
  std::vector<SparseDelivery> sums;  // sparse: every sum every member received, in virtual time's order
  std::map<std::string, std::string> member_errors;  // sparse: why a member stopped, by member
  std::map<std::string, std::string> logs;  // by process: its JSON lines
  bool ended = false;                       // every process ended before the limit
  double seconds = 0;                       // virtual
  std::map<int, double> round_at;           // iteration -> the coordinator's virtual time
  World::Stats stats;
};

// One job of o.workload (k-means: o.shape, o.iterations rounds; svm: the
// swarm's two-class set; o.timeout_ms, o.link) in a world of its own, from
// `seed`: a coordinator and `workers` workers, the
// faults applied at the virtual times `when` gives their rounds (a
// failure-free run's round_at). Outputs and logs go to `dir`.
JobRun run_job(std::uint64_t seed, int workers, const std::vector<FaultAt>& faults,
               const std::map<int, double>& when, const SwarmOptions& o, const std::string& dir);

struct SeedResult {
  std::uint64_t seed = 0;
  bool ok = true;
  std::string violation;               // the first invariant violated
  std::vector<std::string> schedule;   // the job and the faults, one line each
  double virtual_seconds = 0;
  std::uint64_t messages = 0;
  double longest_wait = 0;  // virtual seconds, World::Stats
  std::size_t peak_held = 0;
};

SeedResult run_seed(std::uint64_t seed, const SwarmOptions& o);

// One failure-free k-means job of `workers` workers (o.shape, o.iterations
// rounds), then the same with a tenth of the workers (at least one)
// killed at once in the middle: what the scale report (docs/cluster.md)
// tabulates.
struct ScaleResult {
  int workers = 0;
  double member_messages = 0, member_bytes = 0;            // received per worker per round (mean)
  double coordinator_messages = 0, coordinator_bytes = 0;  // received by the coordinator per round
  // The same by message kind (protocol.hpp's type_name; "bulk": row transfers).
  std::map<std::string, std::pair<double, double>> coordinator_by_kind;
  double round_seconds = 0;    // median virtual round time
  int slowest_round = 0;       // the failure-free run's longest round, and its time
  double slowest_seconds = 0;
  double recover_seconds = -1; // from the kill to the next round counted (-1: none)
  int killed = 0;
  double worst = -1;  // the killed run's centroids against the failure-free run's (relative; -1: not compared)
  bool ok = false;    // both ran to the end, the killed one within 1e-6 of the failure-free one
  double wall_seconds = 0;
};
ScaleResult run_scale(int workers, const SwarmOptions& o);

}  // namespace accel::cluster::sim
