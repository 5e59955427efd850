// The sparse allreduce as a workload of the cluster engine, and the
// SparseGroup that drives it from the user's thread (accel/sparse_allreduce.hpp).
//
// There is no engine thread: allreduce() leaves the step's pairs in the
// group's Steps and runs the engine's rounds (CoordinatorRun on rank 0,
// WorkerRun on the others) until one delivers the step's sum there.
// contribute() takes the pairs, absorb() merges every member's and hands
// the sum back.
#include "accel/sparse_allreduce.hpp"

#include <algorithm>
#include <array>
#include <cstdlib>
#include <exception>
#include <iostream>
#include <limits>
#include <optional>
#include <utility>

#include "accel/error.hpp"
#include "engine.hpp"
#include "errors.hpp"
#include "reduce_scatter.hpp"
#include "sparse_wire.hpp"

namespace accel {
namespace cluster::sparse {
namespace {

// A group's steps, between its caller (allreduce) and its partition.
struct Steps {
  std::uint32_t rank = 0;
  std::string exchange = "auto";           // rank 0's: auto, allgather or reduce-scatter
  std::uint64_t submitted = 0, taken = 0;  // steps handed over / taken into a round
  Bytes pending;                           // the last step handed over
  bool closing = false;
  std::uint64_t answered = 0;  // steps whose sum is in `sum`
  SparseSum sum;
  std::string step_error;  // for step `answered`: members' lengths differed
};

// A member's steps. It holds the user's step until the step's sum is
// delivered: one round for an allgather, two for a reduce-scatter, and a
// redo (as an allgather) when a reduce-scatter's owners were not the
// rounds' members. Which exchange a new step takes is rank 0's word (every
// contribution's route.next; only rank 0's is heeded), so every member
// splits alike.
class SparsePartition final : public AllToAllPartition {
 public:
  explicit SparsePartition(Steps& steps) : steps_(steps), self_(steps.rank) {
    const std::string& e = steps.exchange;
    if (e != "auto") forced_ = e == "reduce-scatter" ? Mode::ReduceScatter : Mode::AllGather;
  }

  void members(const std::vector<std::uint32_t>& active) override { believed_ = active; }

  // The user's step (held until its sum comes), or the group closing.
  Bytes contribute(std::int64_t) override {
    out_.clear();
    if (!reduced_.empty()) {  // reduce-scatter's second round
      ++rounds_;
      sent_ += reduced_.size() * peers();
      return std::exchange(reduced_, {});
    }
    if (mine_ == 0 && !take_step()) {
      left_ = true;
      Route closing;
      closing.next = announce();
      return encode(Kind::Closing, 0, {}, {}, 0, closing);
    }
    ++rounds_;
    set_next(held_, announce());
    const bool split = !redo_ && mode_ == Mode::ReduceScatter && believes_active() && peers() > 0;
    if (!split) {
      sent_ += held_.size() * peers();
      return held_;  // a copy: the step stays held until its sum comes
    }
    auto sh = shards(view(held_), believed_, announce());
    Bytes own;
    for (std::size_t j = 0; j < believed_.size(); ++j) {
      if (believed_[j] == self_) {
        own = std::move(sh[j]);
        continue;
      }
      sent_ += sh[j].size();
      out_[believed_[j]] = std::move(sh[j]);
    }
    return own;
  }
  const Bytes* addressed(std::uint32_t peer) const override {
    const auto it = out_.find(peer);
    return it == out_.end() ? nullptr : &it->second;
  }
  Bytes idle() const override { return encode(Kind::Idle, 0, {}, {}); }
  // A reduce-scatter's shards differ from receiver to receiver: each
  // counts as its kind and step alone, which every receiver sees alike.
  std::uint64_t counted(const std::map<std::uint32_t, Bytes>& contributions) const override {
    std::map<std::uint32_t, std::span<const std::byte>> alike;
    std::map<std::uint32_t, std::array<std::uint64_t, 3>> marks;
    for (const auto& [id, b] : contributions) {
      if (b.empty()) continue;
      const StepView s = view(b);
      if (s.kind != Kind::Shard) {
        alike.emplace(id, b);
        continue;
      }
      const auto& m = marks[id] = {static_cast<std::uint64_t>(s.kind), s.n, s.tag};
      alike.emplace(id, std::as_bytes(std::span(m)));
    }
    return counted_digest(alike);
  }
  // Every peer's bytes pass this before the engine counts them; this
  // member's own were checked before they were sent.
  void validate(std::span<const std::byte> b) const override { (void)sparse::validate(b); }

  RoundOutcome absorb(std::int64_t round, const std::map<std::uint32_t, Bytes>& contributions) override {
    std::map<std::uint32_t, StepView> steps;
    // In place: validated already. Empty: a member the coordinator counted
    // nothing for (lost before its contribution reached anyone).
    for (const auto& [id, b] : contributions)
      if (!b.empty()) steps.emplace(id, view(b));
    if (const auto z = steps.find(0); z != steps.end()) mode_ = z->second.route.next;
    bool closing = left_, pairs = false, shard = false, reduced = false;
    for (const auto& [id, s] : steps) {
      closing = closing || (s.kind == Kind::Closing && id == 0);  // another member closing only leaves
      pairs = pairs || s.kind == Kind::Pairs;
      shard = shard || s.kind == Kind::Shard;
      reduced = reduced || s.kind == Kind::Reduced;
    }
    RoundOutcome out;
    out.stop = closing;
    if (reduced) second_round(round, steps, out);
    else if (shard && !pairs) first_round(steps, out);
    else if (!shard) all_gather(round, steps, out);
    else redo(out);  // some split the step, some did not (a member back mid-step)
    return out;
  }
  Bytes shared_state() const override { return {}; }
  void adopt(std::span<const std::byte>) override {}

 private:
  // The group steps the engine only with a step handed over or to close.
  bool take_step() {
    Steps& ch = steps_;
    if (ch.submitted <= ch.taken) {
      if (!ch.closing) throw std::logic_error("sparse allreduce: a round with no step to take");
      return false;
    }
    ch.taken = ch.submitted;
    mine_ = ch.taken;
    held_ = std::move(ch.pending);
    sent_ = 0;
    rounds_ = 0;
    redo_ = false;
    return true;
  }
  bool believes_active() const { return std::find(believed_.begin(), believed_.end(), self_) != believed_.end(); }
  std::size_t peers() const { return believed_.size() - (believes_active() ? 1 : 0); }
  // Rank 0's word on the next new step: as asked, or by the last step's sizes.
  Mode announce() const {
    if (forced_) return *forced_;
    return last_members_ ? choose(last_members_, last_inputs_, last_sum_) : Mode::AllGather;
  }

  void all_gather(std::int64_t round, const std::map<std::uint32_t, StepView>& steps, RoundOutcome& out) {
    Merged& m = merged_;
    merge_into(steps, Kind::Pairs, m, scratch_);
    std::uint64_t inputs = 0;
    for (const auto& [id, s] : steps) inputs += s.kind == Kind::Pairs ? s.indices.size() : 0;
    out.log["exchange"] = "allgather";
    if (!m.members.empty()) note(m.members.size(), inputs, m.indices.size());
    // A member the round did not count (a joiner's or a returning member's
    // first rounds, before the coordinator counts it) keeps its step for
    // the next round: delivered a sum without its pairs, it would drop
    // them (a gradient its residual no longer holds).
    if (mine_ != 0 && m.error.empty() && std::find(m.members.begin(), m.members.end(), self_) == m.members.end()) {
      out.log["pairs"] = m.indices.size();
      out.log["members_counted"] = m.members.size();
      out.log["held"] = true;
      return;
    }
    deliver(round, m, out, "allgather");
  }
  void first_round(const std::map<std::uint32_t, StepView>& steps, RoundOutcome& out) {
    out.log["exchange"] = "reduce-scatter 1/2";
    const auto mine = steps.find(self_);
    if (mine == steps.end() || mine->second.kind != Kind::Shard) return;  // not counted: its step waits
    reduced_ = reduce(self_, steps, mine->second.route.owners, announce());
  }
  void second_round(std::int64_t round, const std::map<std::uint32_t, StepView>& steps, RoundOutcome& out) {
    std::optional<Merged> m = assemble(steps);
    if (!m) return redo(out);
    out.log["exchange"] = "reduce-scatter 2/2";
    std::uint64_t inputs = 0;
    for (auto o : m->members) inputs += steps.at(o).route.inputs;
    note(m->members.size(), inputs, m->indices.size());
    // A member back mid-step, not among the owners, keeps its step for the next round.
    if (std::find(m->members.begin(), m->members.end(), self_) != m->members.end())
      deliver(round, *m, out, "reduce-scatter");
  }
  // The owners were not the round's members: every member holding a step
  // sends it again, as an allgather (one round, whoever is there).
  void redo(RoundOutcome& out) {
    out.log["exchange"] = "redo";
    redo_ = mine_ != 0;
    reduced_.clear();
  }
  void note(std::size_t members, std::uint64_t inputs, std::uint64_t sum) {
    last_members_ = members;
    last_inputs_ = inputs;
    last_sum_ = sum;
  }
  // The sum's vectors go to the user's SparseSum by swapping: the ones it
  // had come back to be merged into next.
  void deliver(std::int64_t round, Merged& m, RoundOutcome& out, const char* exchange) {
    out.log["pairs"] = m.indices.size();
    out.log["members_counted"] = m.members.size();
    if (mine_ == 0) return;  // a returning member's first round, or closing: nobody waits for this sum
    Steps& ch = steps_;
    ch.answered = mine_;
    ch.step_error = m.error;
    ch.sum.step = round;
    ch.sum.indices.swap(m.indices);
    ch.sum.values.swap(m.values);
    ch.sum.members.swap(m.members);
    ch.sum.tags.swap(m.tags);
    ch.sum.bytes_sent = sent_;
    ch.sum.rounds = rounds_;
    ch.sum.exchange = exchange;
    mine_ = 0;
    held_.clear();
    redo_ = false;
  }

  Steps& steps_;
  const std::uint32_t self_;
  std::optional<Mode> forced_;  // rank 0's --exchange, unless auto
  std::vector<std::uint32_t> believed_;
  std::uint64_t mine_ = 0;  // the user's step this member holds (0: none)
  Bytes held_;              // its pairs
  std::size_t sent_ = 0;    // payload bytes sent for it so far
  int rounds_ = 0;          // rounds it took so far
  bool redo_ = false;       // its reduce-scatter failed: it goes again as an allgather
  Mode mode_ = Mode::AllGather;       // rank 0's word for new steps
  Merged merged_;                     // the allgather's sum, merged into the same vectors each step
  MergeScratch scratch_;
  Bytes reduced_;                     // reduce-scatter: this owner's sum, sent in the second round
  std::map<std::uint32_t, Bytes> out_;  // reduce-scatter's first round: each other owner's shard
  std::size_t last_members_ = 0;        // the last delivered step, for announce()
  std::uint64_t last_inputs_ = 0, last_sum_ = 0;
  bool left_ = false;  // this member closed the group
};

// Registered for the engine's checks; a group's workers run their own
// instance, whose partitions reach the group's steps.
class SparseWorkload final : public Workload {
 public:
  explicit SparseWorkload(Steps* steps = nullptr) : steps_(steps) {}
  Exchange exchange() const override { return Exchange::AllToAll; }
  double measure(std::span<const std::byte>, Local&) const override { return 1.0; }  // no rows to split
  std::unique_ptr<Partition> open(const Task&, std::span<const std::byte>, Local&) const override {
    if (!steps_) throw InputError("the sparse allreduce runs inside a SparseGroup, not a plain worker");
    return std::make_unique<SparsePartition>(*steps_);
  }
  void read(const Task&, std::span<std::byte>) const override {}

 private:
  Steps* steps_;
};

ACCEL_REGISTER_WORKLOAD("sparse_allreduce", SparseWorkload);

// The coordinator's half: no input and no rows; steps until a member closes.
class SparseJob final : public Job {
 public:
  explicit SparseJob(Steps& steps) : steps_(steps) {}
  std::string workload() const override { return "sparse_allreduce"; }
  std::int64_t units() const override { return 0; }
  std::int64_t max_rounds() const override { return std::numeric_limits<std::int64_t>::max() / 2; }
  bool confirmed() const override { return true; }  // each round's sum goes to the user
  Bytes probe() const override { return {}; }
  Bytes params() const override { return {}; }
  std::uint64_t data_bytes(std::int64_t, std::int64_t) const override { return 0; }
  std::span<const std::byte> data(std::int64_t, std::int64_t) override { return {}; }
  std::string finish(std::span<const std::byte>, nlohmann::json&) override { return "sparse allreduce closed"; }
  std::unique_ptr<Partition> open_own(const Task&, Local&) override { return std::make_unique<SparsePartition>(steps_); }

 private:
  Steps& steps_;
};

}  // namespace
}  // namespace cluster::sparse

SparseGroupOptions sparse_group_options_from_env(SparseGroupOptions o) {
  o.rank = cluster::launcher_rank(o.rank);
  o.size = cluster::launcher_size(o.size);
  if (const char* a = std::getenv("ACCEL_COORDINATOR")) {
    o.coordinator = a;
  } else if (const char* host = std::getenv("MASTER_ADDR"), *port = std::getenv("MASTER_PORT"); host && port) {
    // torchrun: the c10d store listens on MASTER_PORT; the group's
    // coordinator on the port after it.
    char* end = nullptr;
    const long p = std::strtol(port, &end, 10);
    if (end == port || *end != '\0' || p < 1 || p > 65534)
      throw InputError(std::string("MASTER_PORT '") + port + "' is not a port below 65535");
    o.coordinator = std::string(host) + ":" + std::to_string(p + 1);
  }
  return o;
}

// Rank 0 runs the job's coordinator (with its own partition: it is a
// member too); the others, workers.
struct SparseGroup::Engine {
  cluster::sparse::Steps steps;
  cluster::sparse::SparseJob job{steps};
  cluster::sparse::SparseWorkload workload{&steps};
  std::unique_ptr<cluster::CoordinatorRun> coordinator;
  std::unique_ptr<cluster::WorkerRun> worker;
  bool started = false, ended = false;
  std::string end_reason;

  // One round (joining first); false once the engine is over.
  bool step() {
    if (coordinator) {
      if (!started) coordinator->start();
      started = true;
      return coordinator->step();
    }
    return worker->step();
  }
  // The engine's end, once: its exit code, or what it threw.
  void end(const std::string& reason) {
    if (ended) return;
    ended = true;
    end_reason = reason;
    try {
      const int rc = coordinator ? (started ? coordinator->finish() : cluster::kExitOk) : worker->exit_code();
      if (rc != cluster::kExitOk && end_reason.empty()) end_reason = "the group's engine ended with code " + std::to_string(rc);
    } catch (const std::exception& e) {
      if (end_reason.empty()) end_reason = e.what();
    }
    if (end_reason.empty()) end_reason = "the group is closed";
  }
  // Rounds until step `mine` is answered or the engine ends.
  void run_until(std::uint64_t mine) {
    try {
      while (steps.answered < mine)
        if (!step()) return end("");
    } catch (const std::exception& e) {
      end(e.what());
    }
  }
};

SparseGroup::SparseGroup(const SparseGroupOptions& o) : rank_(o.rank), size_(o.size), coordinator_(o.coordinator) {
  if (o.size < 1) throw InputError("sparse group: size " + std::to_string(o.size) + " is not positive");
  if (o.rank < kJoin || o.rank >= o.size)
    throw InputError("sparse group: rank " + std::to_string(o.rank) + " is not in 0.." + std::to_string(o.size - 1) +
                     " (or -1: join with a rank the coordinator gives)");
  if (o.max_size != 0 && (o.max_size < o.size || o.max_size > 65536))
    throw InputError("sparse group: max size " + std::to_string(o.max_size) + " is not in " + std::to_string(o.size) +
                     "..65536");
  if (o.timeout_ms < 1) throw InputError("sparse group: timeout " + std::to_string(o.timeout_ms) + " ms");
  if (o.exchange != "auto" && o.exchange != "allgather" && o.exchange != "reduce-scatter")
    throw InputError("sparse group: exchange '" + o.exchange + "' is not auto, allgather or reduce-scatter");
  if (o.size == 1 && o.max_size <= 1 && o.rank == 0) return;  // the sum of one member is its own pairs
  engine_ = std::make_unique<Engine>();
  engine_->steps.rank = static_cast<std::uint32_t>(o.rank);
  engine_->steps.exchange = o.exchange;
  if (o.rank == 0) {
    cluster::CoordinatorOptions c;
    static_cast<cluster::Common&>(c) = {o.job, "cpu", o.timeout_ms, o.tls, o.keepalive_ms, o.log_json, {}};
    c.workers = o.size - 1;
    c.max_workers = std::max(o.size, o.max_size) - 1;
    c.listen = o.coordinator;
    c.join_timeout_ms = o.join_timeout_ms;
    c.move_lost_rows = false;  // a lost member's gradient is lost with it
    c.print_summary = false;
    engine_->coordinator = std::make_unique<cluster::CoordinatorRun>(c, engine_->job);
  } else {
    cluster::WorkerOptions w;
    static_cast<cluster::Common&>(w) = {o.job, "cpu", o.timeout_ms, o.tls, o.keepalive_ms, o.log_json, {}};
    w.coordinator = o.coordinator;
    w.id = o.rank == kJoin ? 0 : static_cast<std::uint32_t>(o.rank);  // 0: the coordinator gives one
    w.snapshot_dir = o.snapshot_dir;
    w.workload = &engine_->workload;
    engine_->worker = std::make_unique<cluster::WorkerRun>(w);
  }
}

// A joiner's rank: the coordinator's door gives the next free one. Before
// any step, so that the partition the engine opens knows who it is.
int SparseGroup::join() {
  if (rank_ == kJoin) {
    try {
      rank_ = static_cast<int>(engine_->worker->id());
    } catch (const cluster::TokenRefused&) {
      // The door's own refusal names the engine's --max-workers; a
      // group's room is rank 0's max_size.
      throw InputError("sparse group: the coordinator at " + coordinator_ +
                       " refused this joiner: a different job token, or a group at its max size (rank 0's "
                       "--max-size / max_size)");
    }
    engine_->steps.rank = static_cast<std::uint32_t>(rank_);
  }
  return rank_;
}

// Destroyed while an exception unwinds the caller's stack, a member leaves
// as a crashed one does (the others evict it at once or at the timeout):
// a destructor that ran the engine's rounds then could wait out a timeout
// with the caller's error still in flight.
SparseGroup::~SparseGroup() {
  if (std::uncaught_exceptions() > 0) return;
  try {
    close();
  } catch (...) {
  }
}

// Rank 0 ends the job for everyone; another rank leaves it, gracefully
// (WorkerRun::leave): the coordinator lets it go at the next round
// boundary, and nobody waits out a timeout for it. Either way the engine
// runs until it is over.
void SparseGroup::close() {
  if (closed_) return;
  closed_ = true;
  if (!engine_ || engine_->ended) return;
  engine_->steps.closing = true;
  if (engine_->worker) engine_->worker->leave();
  if (engine_->coordinator && !engine_->started) return engine_->end("");  // nobody joined yet
  engine_->run_until(std::numeric_limits<std::uint64_t>::max());
}

SparseSum SparseGroup::allreduce(std::uint64_t n, std::span<const std::uint32_t> indices,
                                 std::span<const float> values, std::uint64_t tag) {
  SparseSum sum;
  allreduce(n, indices, values, tag, sum);
  return sum;
}

void SparseGroup::allreduce(std::uint64_t n, std::span<const std::uint32_t> indices, std::span<const float> values,
                            std::uint64_t tag, SparseSum& sum) {
  // Bad pairs of this member's own still make a step: it takes part with
  // no pairs, and throws once the step is over, so the next call is the
  // next step everywhere. (Skipping it would have the others sum this
  // member's next step into their current one, silently, from then on.)
  std::string local;
  try {
    cluster::sparse::check_pairs(n, indices, values);
  } catch (const InputError& e) {
    local = std::string(e.what()) + " (this member's step went on without its pairs)";
  }
  if (!engine_) {
    if (!local.empty()) throw InputError(local);
    if (closed_) throw InputError("sparse allreduce: the group is closed");
    sum.step = 0;
    sum.indices.assign(indices.begin(), indices.end());
    sum.values.assign(values.begin(), values.end());
    sum.members = {0};
    sum.tags = {tag};
    sum.bytes_sent = 0;
    sum.exchange = "allgather";
    sum.rounds = 1;
    return;
  }
  auto& ch = engine_->steps;
  if (closed_) throw InputError("sparse allreduce: the group is closed");
  if (engine_->ended) throw InputError("sparse allreduce: " + engine_->end_reason);
  // A length past 2^32 cannot be sent: 0 makes the step's failure agreed
  // (the members' lengths differ) unless every member sent 0.
  ch.pending = local.empty() ? cluster::sparse::encode(cluster::sparse::Kind::Pairs, n, indices, values, tag)
                             : cluster::sparse::encode(cluster::sparse::Kind::Pairs,
                                                       n <= (std::uint64_t{1} << 32) ? n : 0, {}, {}, tag);
  join();
  const std::uint64_t mine = ++ch.submitted;
  // The caller's vectors go in to be merged into at a next step; the
  // step's sum comes out in their place.
  {
    std::swap(ch.sum, sum);
    struct Back {
      SparseSum &a, &b;
      ~Back() { std::swap(a, b); }
    } back{ch.sum, sum};
    engine_->run_until(mine);
  }
  if (ch.answered < mine) throw InputError("sparse allreduce: " + engine_->end_reason);
  if (!local.empty()) throw InputError(local);
  if (!ch.step_error.empty()) throw InputError(ch.step_error);
}

}  // namespace accel
