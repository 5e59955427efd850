// The cluster engine's entry points: one coordinator, N workers, any
// workload (workload.hpp). `accel coordinator ...` builds a Job and calls
// run_coordinator; `accel worker` calls run_worker and learns the workload
// from its task. Both are a loop of steps, one round each: a library that
// drives the rounds from its own thread (the sparse allreduce, a
// simulator) uses CoordinatorRun and WorkerRun instead.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "errors.hpp"
#include "workload.hpp"

namespace accel::cluster {

struct Common {
  std::uint64_t job = 0;          // job token (0: found or drawn, job_token.hpp)
  std::string device = "all";     // local devices of each node
  int timeout_ms = 2000;          // barrier wait before a silent member is evicted
  std::string tls;                // UCX_TLS for this process (empty: UCX's choice)
  int keepalive_ms = 5000;  // above a long compute phase: peers only answer keepalives from progress()
  std::string log_json;           // one JSON line per round (and per transfer)
  std::string job_file;           // where the token is written (coordinator) or read (worker)
};

// CoordinatorOptions::gather_from's default: with 8 participants or more
// (7 workers), k-means rounds go through the coordinator.
inline constexpr int kGatherFrom = 8;
// CoordinatorOptions::tree_from's default: with 16 participants or more,
// gathered rounds go up a tree (measured, docs/cluster.md: from 16 the tree's
// rounds were faster, with real processes and in the simulator).
inline constexpr int kTreeFrom = 16;

struct CoordinatorOptions : Common {
  int workers = 1;      // waited for before round 1
  int max_workers = 0;  // more may join a running job without --id, up to this many (0: workers)
  std::string listen = "127.0.0.1:0";
  // Written once listening: the address and the job token, for the other
  // ranks of a launcher (accel kmeans|svm-train --distributed).
  std::string rendezvous_file;
  std::size_t block_size = 64u << 20;
  std::string protocol = "auto";  // bulk: auto | put | am
  bool pull = false;              // workers read their rows from the input file themselves
  std::string input;              // the input file, for --pull
  int join_timeout_ms = 60000;
  bool json = false;
  bool print_summary = true;  // the summary (or its JSON) on stdout at the end; off for a library's job
  // All-to-all workloads: a lost member's rows are computed by the
  // coordinator from the next round (move) or left out until it returns
  // (drop: the behaviour of [Antimatroid]).
  bool move_lost_rows = true;
  // All-to-all workloads: from this many participants (the coordinator
  // and --max-workers) on, each round's contributions go to the
  // coordinator alone, which sends every member the state they lead to
  // (the gathered exchange, docs/design.md); 0: never. The default is
  // measured (docs/cluster.md): from 8, gathered rounds were faster.
  int gather_from = kGatherFrom;
  // Gathered rounds: from this many participants on, the contributions go
  // up a binary tree of members, each adding its children's partial sums
  // to its own (tree.hpp); 0: never.
  int tree_from = kTreeFrom;
  // Coordinator checkpoints (checkpoint.hpp): written to checkpoint_dir at
  // Young's interval for mtbf_s; resume_dir continues the job from the
  // checkpoint there (its token, address, partition and round) and goes on
  // checkpointing there.
  std::string checkpoint_dir, resume_dir;
  double mtbf_s = 3600;
};

struct WorkerOptions : Common {
  std::string coordinator;  // ADDR:PORT
  std::uint32_t id = 0;     // 1..N
  std::string snapshot_dir;
  bool snapshot_rows = false;  // the rows in the snapshot too (else a resume asks the coordinator for them)
  // How long a worker that lost its coordinator keeps trying to reach it
  // again (a coordinator restarted with --resume); 0: one try, then exit.
  int coordinator_timeout_ms = 0;
  // A library's own instance of the task's workload (its partitions reach
  // the library's state), used instead of the registry's; the task must
  // name a workload of the same type.
  const Workload* workload = nullptr;
  // Bytes of memory this worker can still take for rows, told to the
  // coordinator each round (no plan of moves gives it more), or -1 to say
  // nothing. Unset: memory_room(), its cgroup's limit or the machine's
  // available memory less its resident set (a simulator sets its own).
  std::function<std::int64_t()> memory_room;
};

// Rank and size from a launcher's environment (mpirun: OMPI_COMM_WORLD_*,
// srun: SLURM_PROCID/NTASKS, PMI_RANK/SIZE), or `fallback` outside one.
int launcher_rank(int fallback);
int launcher_size(int fallback);

// The coordinator's run: start() listens and joins the workers (or resumes
// from a checkpoint), each step() runs a round until it returns false (the
// job is over), and finish() ends the job and returns the exit code.
// Throws InputError for bad options and for a job that cannot go on.
class CoordinatorRun {
 public:
  CoordinatorRun(const CoordinatorOptions& o, Job& job);
  ~CoordinatorRun();
  void start();
  bool step();
  int finish();

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// A worker's run: each step() takes part in one round (joining first, and
// rejoining after an eviction or a lost coordinator, as its options allow);
// false once this worker is done, with exit_code() what run_worker
// returns. Throws InputError as run_worker does.
class WorkerRun {
 public:
  explicit WorkerRun(const WorkerOptions& o);
  ~WorkerRun();
  bool step();
  int exit_code() const;
  // This worker's id. One started without (elastic membership) asks the
  // coordinator's door for one first, waiting for the job token as step()
  // does; throws TokenRefused when the door refuses it (another token, or
  // the job full).
  std::uint32_t id();
  // A graceful leave (SIGTERM): from the next step the worker asks the
  // coordinator to let it go at a round boundary, computes until its rows
  // are handed on, and is done (exit 0) without anyone waiting out a
  // timeout. Call between steps.
  void leave();

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

int run_coordinator(const CoordinatorOptions& o, Job& job);
int run_worker(const WorkerOptions& o);

}  // namespace accel::cluster
