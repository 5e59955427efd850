// Sparse allreduce across processes: each member contributes the (index,
// value) pairs of its sparsified gradient, and every member gets their sum:
// the exchange of residual gradient compression in data-parallel training
// ([Chen21] in docs/references.md, whose top-k threshold selection is
// accel::TopKSelector).
//
// It is a workload of the cluster engine: every step is one round of the
// engine's fault-tolerant all-to-all barrier, so membership, incarnations,
// the job token and eviction are the engine's. Two exchanges:
//  - allgather: each member sends its pairs to every other member and each
//    merges them in member order (one round);
//  - reduce-scatter: the index range is split among the members; each owner
//    gets the pairs in its range, sums them in member order and sends its
//    sum to all (two rounds). Each member receives its share plus the sum
//    once instead of every other member's pairs: less when the members'
//    indices overlap (dense unions).
// Either way every member holds the bitwise same sum. Rank 0 picks the
// exchange step by step from the last step's sizes (or as `exchange`
// asks). A reduce-scatter whose owners were not the rounds' members (one
// lost between its rounds, one back), or whose sum of a range would exceed
// kMaxSparsePairs, is redone as an allgather. Rank 0 closing the group in
// a reduce-scatter's first round ends the step in flight with the group
// (its allreduce throws), where an allgather would still deliver it.
//
// A rank other than 0 that closes its group leaves it at a step boundary
// (the engine's graceful leave): the others go on without waiting for it.
// A member that dies mid-step is evicted after the timeout (at once when
// the transport reports it) and the step completes with the others'
// contributions: the dead member's residual gradient dies with it. A
// member restarted with the same snapshot directory rejoins at a later
// step. A member started with rank -1 joins a running group (rank 0's
// max_size makes room): it gets the next free rank and counts from the
// step it first reaches, as a restarted member does.
//
// Rank 0 runs the job's coordinator in its process (it is a member too);
// ranks 1..size-1 connect to it. The engine has no thread of its own: it
// runs inside allreduce() and close(), on the caller's thread.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

namespace accel {

struct SparseGroupOptions {
  // -1 (SparseGroup::kJoin): join a running group (elastic membership);
  // the coordinator gives the next free rank, up to max_size - 1.
  int rank = 0;
  int size = 1;  // members rank 0 waits for before the first step
  int max_size = 0;  // rank 0's: members the group may grow to by joiners (0: size)
  std::string coordinator = "127.0.0.1:13340";  // rank 0 listens here; the others connect
  std::uint64_t job = 0;                        // job token (0: drawn by rank 0, found by the others; docs/cluster.md)
  int timeout_ms = 30000;  // a step waits this long for a silent member before evicting it
  // UCX keepalive; above the longest compute between two steps (a member
  // answers keepalives only while it is inside allreduce()).
  int keepalive_ms = 60000;
  int join_timeout_ms = 60000;  // how long rank 0 waits for the others to join
  std::string tls;              // UCX_TLS, e.g. "tcp"
  std::string log_json;         // one JSON line per step
  std::string snapshot_dir;     // ranks >= 1: resume from here after a restart
  // Rank 0's choice of exchange: auto (by the last step's sizes: the bytes
  // a member receives either way, the second round priced as 64 KiB),
  // allgather or reduce-scatter. Other ranks' value is not used.
  std::string exchange = "auto";
};

// Ranks and the coordinator address from a launcher's environment
// (OMPI_COMM_WORLD_RANK/SIZE, SLURM_PROCID/NTASKS, PMI_RANK/SIZE) and
// ACCEL_COORDINATOR, over `base`'s values where absent.
SparseGroupOptions sparse_group_options_from_env(SparseGroupOptions base = {});

struct SparseSum {
  std::int64_t step = 0;  // the engine round that delivered it: the same on every member
  std::vector<std::uint32_t> indices;  // ascending, unique
  std::vector<float> values;           // the sum of every counted member's value there
  std::vector<std::uint32_t> members;  // ranks whose contributions are in the sum
  std::vector<std::uint64_t> tags;     // their tags (allreduce's `tag`), in the same order
  std::uint64_t bytes_sent = 0;        // this member's payload bytes sent for the step
  std::string exchange;                // allgather or reduce-scatter (the one that delivered)
  int rounds = 1;                      // engine rounds the step took (a redone reduce-scatter: 3)
};

// At most this many pairs per member and step (a contribution is one
// control message of the transport).
inline constexpr std::uint64_t kMaxSparsePairs = (std::uint64_t{16} << 20) / 8 - 1024;

class SparseGroup {
 public:
  // Throws InputError for bad options. The first allreduce() joins the
  // group: rank 0 listens and waits for the others, which connect
  // (retrying until rank 0 listens).
  explicit SparseGroup(const SparseGroupOptions& o);
  // close(): rank 0 ends the job for every member (their next allreduce
  // throws); another rank leaves it, and the others go on without it.
  // Destroyed while an exception unwinds, a member does not close: it
  // leaves as a crashed member does.
  ~SparseGroup();
  SparseGroup(const SparseGroup&) = delete;
  SparseGroup& operator=(const SparseGroup&) = delete;

  // One step: this member's pairs of a length-n vector (indices ascending
  // and unique, below n; values finite) in, the members' sum out. Throws
  // InputError for bad pairs (naming the first bad one) once the step is
  // over: the member took part with no pairs (it is among the step's
  // members, contributing nothing), so every member's next call is the same
  // step. Throws InputError for members whose
  // n differ (naming them; every member of the step gets that error), and
  // when the group has ended (the coordinator gone, the job closed). `tag`
  // travels with the pairs (e.g. the caller's training step: a member that
  // rejoined may be at another step than the others).
  SparseSum allreduce(std::uint64_t n, std::span<const std::uint32_t> indices, std::span<const float> values,
                      std::uint64_t tag = 0);
  // The same into `sum`, whose vectors are reused: a caller that passes
  // the same SparseSum every step allocates nothing for the sums (nor does
  // the group, which merges into the vectors the last call gave back).
  void allreduce(std::uint64_t n, std::span<const std::uint32_t> indices, std::span<const float> values,
                 std::uint64_t tag, SparseSum& sum);

  static constexpr int kJoin = -1;
  // This member's rank; a joiner's is -1 until join() or its first
  // allreduce() gets it from the coordinator.
  int rank() const { return rank_; }
  // A joiner asks the coordinator for its rank (waiting for the group's
  // token and door as the first allreduce does; InputError when the group
  // is full); returns the rank. Anyone else's rank at once.
  int join();
  int size() const { return size_; }
  void close();

 private:
  struct Engine;
  int rank_, size_;
  std::string coordinator_;
  bool closed_ = false;
  std::unique_ptr<Engine> engine_;
};

}  // namespace accel
