// The cluster engine's entry points: one coordinator, N workers, any
// workload (workload.hpp). `accel coordinator ...` builds a Job and calls
// run_coordinator; `accel worker` calls run_worker and learns the workload
// from its task.
#pragma once

#include <cstdint>
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

struct CoordinatorOptions : Common {
  int workers = 1;
  std::string listen = "127.0.0.1:0";
  std::size_t block_size = 64u << 20;
  std::string protocol = "auto";  // bulk: auto | put | am
  bool pull = false;              // workers read their rows from the input file themselves
  std::string input;              // the input file, for --pull
  int join_timeout_ms = 60000;
  bool json = false;
  bool print_summary = true;  // the summary (or its JSON) on stdout at the end; off for a library's job
  // All-to-all workloads: a lost member's rows are computed by the
  // coordinator from the next round (move) or left out until it returns
  // (drop: the behaviour of the "Distributed k-Means Clustering" study (The Antimatroid)).
  bool move_lost_rows = true;
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
};

// Rank and size from a launcher's environment (mpirun: OMPI_COMM_WORLD_*,
// srun: SLURM_PROCID/NTASKS, PMI_RANK/SIZE), or `fallback` outside one.
int launcher_rank(int fallback);
int launcher_size(int fallback);

int run_coordinator(const CoordinatorOptions& o, Job& job);
int run_worker(const WorkerOptions& o);

}  // namespace accel::cluster
