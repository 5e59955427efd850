// What a workload tells the engine. The engine (this folder) owns
// membership, incarnations and fencing, the barrier of [Antimatroid], pushing and
// moving partitions, snapshots and coordinator loss; it knows no workload by
// name. A workload is two halves:
//
//  - Job, on the coordinator: the whole input, the parameters every member
//    gets, the data of any row range, and (Central exchange) the decision a
//    round's contributions lead to;
//  - Workload, registered by name on every process: it measures a node's
//    speed for a job and opens a Partition, a member's share of the rows
//    with what it computes each round.
//
// A round: every member's Partition contributes bytes; they travel by the
// workload's Exchange; AllToAll: every participant absorbs the members'
// contributions into the same next state (k-means: centroids), Central: the
// coordinator's Job decides and every member applies the decision (SVM:
// working set and multiplier changes). To add a workload: a folder under
// host/cluster/workloads with a Job, a Workload registered with
// ACCEL_REGISTER_WORKLOAD, and a CLI entry that builds the Job.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <span>
#include <string>

#include "accel/perf_model.hpp"
#include "accel/registry.hpp"
#include "protocol.hpp"

namespace accel::cluster {

enum class Exchange : std::uint8_t {
  AllToAll,  // [Antimatroid]: every member's contribution reaches every participant
  Central,   // contributions to the coordinator; its decision to every member
};

struct RoundOutcome {
  bool stop = false;                                // the job ends after this round: it converged
  nlohmann::json log = nlohmann::json::object();    // fields added to this round's log line
  bool last = false;  // the job ends after this round: its rule's limit (rounds the workload counts itself)
};

// The gathered exchange's decision (Task::gathered): the outcome of the
// round the coordinator counted, and the shared_state() it leads to, which
// every member adopts. decode throws InputError for bytes of another kind.
struct Gathered {
  RoundOutcome outcome;
  Bytes state;
};
Bytes encode_gathered(const RoundOutcome& out, std::span<const std::byte> state);
Gathered decode_gathered(std::span<const std::byte> data, std::uint64_t max_bytes);

// A node's devices for a job: the spec (--device), the process's registry, and the per-device rates
// measured so far (the processor of [SysInfo] of
// measured speed), shared between the probe and the partition it sizes.
struct Local {
  const Registry& registry;
  std::string devices;
  PerfModel model;
};

// A member's share of the rows and its computation, what either exchange
// asks of it. `data` (the partition's bytes in the workload's layout)
// outlives it. A workload's partitions are of the kind its exchange()
// names: AllToAllPartition or StarPartition.
class Partition {
 public:
  virtual ~Partition() = default;
  // This round's contribution from the current state.
  virtual Bytes contribute(std::int64_t round) = 0;
  // What a returning member sends in its first round (nobody counts it).
  virtual Bytes idle() const = 0;
  // Throws InputError when another member's contribution is malformed.
  virtual void validate(std::span<const std::byte> contribution) const = 0;
  // The state shared by all members (k-means: the centroids), for a
  // returning member, which takes it with adopt() (and rebuilds what it
  // derives from it).
  virtual Bytes shared_state() const = 0;
  virtual void adopt(std::span<const std::byte> state) = 0;
};

// Exchange::AllToAll: every participant absorbs the members'
// contributions into the same next state. Where the coordinator holds the
// rows, it can stand in for a lost member and re-split rows by speed.
class AllToAllPartition : public Partition {
 public:
  // The members this node believes active in the coming round (the last
  // round's view; the coordinator's own for the coordinator), told before
  // contribute(): a workload that sends each member its own share splits by
  // it. The round's real view may differ (a member lost or back), which
  // absorb() sees.
  virtual void members(const std::vector<std::uint32_t>& active) { (void)active; }
  // The bytes `peer` gets this round instead of contribute()'s (valid
  // until the next contribute()), or null: every peer gets the same. The
  // sparse allreduce's reduce-scatter sends each owner its index range.
  // What the coordinator says it counted for a member lost mid-round is its
  // own copy, so a workload that addresses must tell, in absorb(), a share
  // meant for another from its own.
  virtual const Bytes* addressed(std::uint32_t peer) const {
    (void)peer;
    return nullptr;
  }
  // What a participant counted in a round (node.cpp checks every member's
  // against the coordinator's), the same on every participant that counted
  // alike: by default a digest of the bytes themselves. A workload that
  // addresses hashes what every receiver of a member's bytes has alike.
  virtual std::uint64_t counted(const std::map<std::uint32_t, Bytes>& contributions) const {
    return counted_digest(contributions);
  }
  // The tree's sum of two contributions of a round (tree.hpp): one whose
  // absorb() is that of both, or nullopt where they do not add up (the
  // default: each stays a sum of its own).
  virtual std::optional<Bytes> combine(std::span<const std::byte> a, std::span<const std::byte> b) const {
    (void)a;
    (void)b;
    return std::nullopt;
  }
  // The round's members' contributions, this one's included, into the next
  // state; the same on every participant.
  virtual RoundOutcome absorb(std::int64_t round, const std::map<std::uint32_t, Bytes>& contributions) = 0;
  // The coordinator stands in for a lost member, computing its
  // contribution from its rows [begin, begin + rows) (data: their bytes;
  // a member that computed other members' rows too gets a take_over for
  // each range) with stand_in() every round, the round it was lost
  // included, until hand_back(member): it counts again, or its rows moved
  // to other workers. Every participant counts the stand-in in the
  // member's place, so the result is the failure-free one. The stand-in
  // reads the rows a block at a time and calls release on each block once
  // computed, so that the coordinator holds a block of them, not the
  // member's share (Job::release). take_over returns false where the
  // workload cannot (the rows are then left out, as [Antimatroid] does).
  using Release = std::function<void(std::int64_t begin, std::int64_t end)>;
  virtual bool take_over(std::uint32_t member, std::int64_t begin, std::int64_t rows, std::span<const std::byte> data,
                         const Release& release) {
    (void)member, (void)begin, (void)rows, (void)data, (void)release;
    return false;
  }
  virtual Bytes stand_in(std::uint32_t member) {
    (void)member;
    return {};
  }
  virtual void hand_back(std::uint32_t member) { (void)member; }
  // Rows re-split by measured speed. A member keeps the first `rows` of its
  // partition (keep); the coordinator computes rows [begin, begin + rows)
  // of another member's partition in its own contribution (add_extra, data:
  // their bytes), replacing what it computed for that member before, or
  // nothing (drop_extra). A worker adds the rows of a lost member that
  // moved to it (--pull) the same way. Return false where the workload
  // cannot.
  virtual bool keep(std::int64_t rows) {
    (void)rows;
    return false;
  }
  virtual bool add_extra(std::uint32_t member, std::int64_t begin, std::int64_t rows, std::span<const std::byte> data) {
    (void)member, (void)begin, (void)rows, (void)data;
    return false;
  }
  virtual void drop_extra(std::uint32_t member) { (void)member; }
  // Rows this partition computes now (its own; extras included).
  virtual std::int64_t rows() const { return 0; }
  // Whether the round about to be computed measures this partition's rate
  // (rows per second): false for rounds of other work (k-means||'s
  // seeding), which then sizes no partition.
  virtual bool timed() const { return true; }
};

// Exchange::Central: contributions go to the coordinator, whose Job
// decides; every member applies the decision (SVM: working set and
// multiplier changes).
class StarPartition : public Partition {
 public:
  virtual RoundOutcome apply(std::int64_t round, std::span<const std::byte> decision) = 0;
  // Throws InputError for a decision this partition cannot apply.
  virtual void validate_decision(std::span<const std::byte> decision) const = 0;
};

// The partition as its exchange's kind; logic_error when the workload's
// open() returned the other kind.
AllToAllPartition& all_to_all(Partition& p);
StarPartition& star(Partition& p);

// The member half, one per process, registered by name.
class Workload {
 public:
  virtual ~Workload() = default;
  virtual Exchange exchange() const = 0;
  // An all-to-all workload whose round can go through the coordinator
  // (the gathered exchange): a member that adopt()s the shared_state() the
  // coordinator reaches by absorbing every contribution is where its own
  // absorb() would have left it.
  virtual bool gathers() const { return false; }
  // Units (rows) per second of the local devices for a job's probe.
  virtual double measure(std::span<const std::byte> probe, Local& local) const = 0;
  // The partition of `task` over `data` (task.data_bytes of it).
  virtual std::unique_ptr<Partition> open(const Task& task, std::span<const std::byte> data, Local& local) const = 0;
  // --pull: the partition's data read from task.input by the member itself.
  virtual void read(const Task& task, std::span<std::byte> out) const = 0;
  // A job whose members count its input before it is partitioned
  // (Job::survey): this member's answer to the request.
  virtual Bytes survey(std::span<const std::byte> request) const {
    (void)request;
    return {};
  }
};

// The coordinator half: the whole job.
class Job {
 public:
  virtual ~Job() = default;
  virtual std::string workload() const = 0;  // its registered name
  virtual std::int64_t units() const = 0;    // rows to partition
  virtual std::int64_t max_rounds() const = 0;
  // Members count an all-to-all round only once the coordinator confirms
  // what it counted (Task::confirmed; one more message a round). For a
  // workload whose members hand each round's result to their users (the
  // sparse allreduce): one that counted a round otherwise (a member's
  // contribution reached it and not the coordinator) could not take its
  // result back, where k-means' member rejoins from the coordinator's state.
  virtual bool confirmed() const { return false; }
  virtual Bytes probe() const = 0;
  virtual Bytes params() const = 0;  // in every task
  // An input the members count before it is partitioned (a text file in
  // byte splits, each counted by the worker that reads it): the request
  // sent with launch worker `member`'s probe, of `members` (empty: none).
  // surveyed() gets their answers (Workload::survey) before the engine asks
  // for units() or params(); an answer missing (a resume has none) is
  // counted by the job itself, the same way.
  virtual Bytes survey(std::uint32_t member, int members) const {
    (void)member, (void)members;
    return {};
  }
  virtual void surveyed(int members, const std::map<std::uint32_t, Bytes>& answers) { (void)members, (void)answers; }
  // rows_digest of rows [begin, end), which a --pull member compares with
  // what it read (0: no check; a job whose rows carry their own, as a text
  // split's sample). The default reads them through data().
  virtual std::uint64_t digest(std::int64_t begin, std::int64_t end);
  // checkpoint_fingerprint of the input, which a resume compares.
  virtual std::uint64_t fingerprint();
  // The options that change the result, as (command-line name, value): a
  // checkpoint records them, and a resume that asks for other ones is
  // refused naming the option. input_name(): what the input is called in
  // that refusal (a path).
  using Options = std::vector<std::pair<std::string, std::string>>;
  virtual Options result_options() const { return {}; }
  // An option's value as that text: every digit a double needs to read
  // back equal (a resume compares the texts).
  static std::string option_text(double v);
  virtual std::string input_name() const { return "the input"; }
  // Bytes of rows [begin, end) in the workload's layout; the span lives as
  // long as the job.
  virtual std::uint64_t data_bytes(std::int64_t begin, std::int64_t end) const = 0;
  virtual std::span<const std::byte> data(std::int64_t begin, std::int64_t end) = 0;
  // Rows [begin, end) the engine is done with for now (pushed to their
  // owner, fingerprinted): a job that streams its input (k-means on a
  // mapped .npy) gives their pages back, so the coordinator holds its own
  // share and the rows it stands in for, not the file. data() reads them
  // again from storage if they are needed later (a lost member's).
  virtual void release(std::int64_t begin, std::int64_t end) { (void)begin, (void)end; }
  // Bytes of data() a push has delivered, a block at a time, and how many
  // bytes a push keeps in flight (0: the transport's). A job whose data()
  // is a read-only file mapping (the SVM's training file) gives each
  // block's pages back and keeps few in flight, so the coordinator holds a
  // few blocks of what it pushes, not all of it.
  virtual void pushed(std::span<const std::byte> bytes) { (void)bytes; }
  virtual std::size_t push_window() const { return 0; }
  // Whether the coordinator computes a share of the rows when there are
  // workers (false: the SVM's coordinator only decides, and holds no rows,
  // unless every worker is lost).
  virtual bool coordinator_shares() const { return true; }
  // The engine's partition of the rows by measured speed: member i owns
  // rows [begin[i], begin[i] + rows[i]).
  virtual void partitioned(const std::vector<std::int64_t>& begin, const std::vector<std::int64_t>& rows) {
    (void)begin;
    (void)rows;
  }
  // The coordinator's own partition, where the job opens it from what it
  // holds (SVM: its decoded training set) instead of the workload decoding
  // the bytes it pushes to members; null: the workload's open().
  virtual std::unique_ptr<Partition> open_own(const Task& task, Local& local) {
    (void)task, (void)local;
    return nullptr;
  }
  // Central: the round's decision from the members' contributions.
  virtual Bytes decide(std::int64_t round, const std::map<std::uint32_t, Bytes>& contributions);
  // Coordinator restart (checkpoint.hpp): the job's own state after a
  // round, beyond the coordinator partition's shared_state() (SVM: the dual
  // problems solved so far), taken between rounds; restore() gets both
  // back before the first round of a resume. Throws InputError for bytes
  // that are not this job's.
  virtual Bytes saved() const { return {}; }
  virtual void restore(std::span<const std::byte> saved, std::span<const std::byte> shared_state) {
    (void)saved, (void)shared_state;
  }
  // After the last round: outputs written, fields added to the summary, and
  // the one-line text summary returned. `state` is the coordinator
  // partition's shared_state().
  virtual std::string finish(std::span<const std::byte> state, nlohmann::json& summary) = 0;
};

// Registry of workloads by name.
bool register_workload(const std::string& name, std::unique_ptr<Workload> w);
// Throws InputError for a name nobody registered.
const Workload& find_workload(const std::string& name);

// One name per registration (__COUNTER__), so that files built as one
// (CMAKE_UNITY_BUILD) may each register theirs.
#define ACCEL_WORKLOAD_CAT2(a, b) a##b
#define ACCEL_WORKLOAD_CAT(a, b) ACCEL_WORKLOAD_CAT2(a, b)
#define ACCEL_REGISTER_WORKLOAD(name, type)                                                   \
  [[maybe_unused]] static const bool ACCEL_WORKLOAD_CAT(accel_workload_registered_, __COUNTER__) = \
      ::accel::cluster::register_workload(name, std::make_unique<type>())

}  // namespace accel::cluster
