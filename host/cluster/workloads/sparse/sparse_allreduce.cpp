// The sparse allreduce as a workload of the cluster engine, and the
// SparseGroup that drives it from the user's thread (accel/sparse_allreduce.hpp).
//
// The engine's thread runs the rounds; the user's thread hands each step's
// pairs over through the process's Channel: contribute() waits for them,
// absorb() merges every member's pairs and hands the sum back.
#include "accel/sparse_allreduce.hpp"

#include <condition_variable>
#include <cstdlib>
#include <iostream>
#include <limits>
#include <mutex>
#include <optional>
#include <thread>

#include "accel/error.hpp"
#include "engine.hpp"
#include "sparse_wire.hpp"

namespace accel {
namespace cluster::sparse {
namespace {

// The user's thread and the engine's thread of one process.
struct Channel {
  std::mutex mu;
  std::condition_variable cv;
  std::uint64_t submitted = 0, taken = 0;  // steps handed over / taken into a round
  Bytes pending;                           // the last step handed over
  bool closing = false;
  std::uint64_t answered = 0;  // steps whose sum is in `sum`
  SparseSum sum;
  std::string step_error;  // for step `answered`: members' lengths differed
  bool ended = false;      // the engine's thread is done
  std::string end_reason;
  bool in_use = false;  // a group is open in this process
};

Channel& channel() {
  static Channel c;
  return c;
}

class SparsePartition final : public Partition {
 public:
  // Waits for the user's next step, or for the group to close.
  Bytes contribute(std::int64_t) override {
    Channel& ch = channel();
    std::unique_lock lock(ch.mu);
    ch.cv.wait(lock, [&] { return ch.submitted > ch.taken || ch.closing; });
    if (ch.submitted > ch.taken) {
      ch.taken = ch.submitted;
      mine_ = ch.taken;
      bytes_ = ch.pending.size();
      return std::move(ch.pending);
    }
    mine_ = 0;
    left_ = true;
    return encode(Kind::Closing, 0, {}, {});
  }
  Bytes idle() const override { return encode(Kind::Idle, 0, {}, {}); }
  // Every peer's bytes pass this before the engine counts them; this
  // member's own were checked before they were sent.
  void validate(std::span<const std::byte> b) const override { (void)sparse::validate(b); }

  RoundOutcome absorb(std::int64_t round, const std::map<std::uint32_t, Bytes>& contributions) override {
    std::map<std::uint32_t, StepView> steps;
    for (const auto& [id, b] : contributions) steps.emplace(id, view(b));  // in place: validated already
    Merged m = merge(steps);
    RoundOutcome out;
    out.stop = m.closing || left_;
    out.log["pairs"] = m.indices.size();
    out.log["members_counted"] = m.members.size();
    if (mine_ == 0) return out;  // a returning member's first round, or closing: nobody waits for this sum
    Channel& ch = channel();
    {
      std::lock_guard lock(ch.mu);
      ch.answered = mine_;
      ch.step_error = m.error;
      ch.sum.step = round;
      ch.sum.indices = std::move(m.indices);
      ch.sum.values = std::move(m.values);
      ch.sum.members = std::move(m.members);
      ch.sum.tags = std::move(m.tags);
      ch.sum.bytes_sent = bytes_ * (contributions.size() - 1);
    }
    ch.cv.notify_all();
    mine_ = 0;
    return out;
  }
  Bytes shared_state() const override { return {}; }
  void adopt(std::span<const std::byte>) override {}

 private:
  std::uint64_t mine_ = 0;  // the user's step in this round
  std::size_t bytes_ = 0;
  bool left_ = false;  // this member closed the group
};

class SparseWorkload final : public Workload {
 public:
  Exchange exchange() const override { return Exchange::AllToAll; }
  double measure(std::span<const std::byte>, Local&) const override { return 1.0; }  // no rows to split
  std::unique_ptr<Partition> open(const Task&, std::span<const std::byte>, Local&) const override {
    return std::make_unique<SparsePartition>();
  }
  void read(const Task&, std::span<std::byte>) const override {}
};

ACCEL_REGISTER_WORKLOAD("sparse_allreduce", SparseWorkload);

// The coordinator's half: no input and no rows; steps until a member closes.
class SparseJob final : public Job {
 public:
  std::string workload() const override { return "sparse_allreduce"; }
  std::int64_t units() const override { return 0; }
  std::int64_t max_rounds() const override { return std::numeric_limits<std::int64_t>::max() / 2; }
  Bytes probe() const override { return {}; }
  Bytes params() const override { return {}; }
  std::uint64_t data_bytes(std::int64_t, std::int64_t) const override { return 0; }
  std::span<const std::byte> data(std::int64_t, std::int64_t) override { return {}; }
  std::string finish(std::span<const std::byte>, nlohmann::json&) override { return "sparse allreduce closed"; }
};

}  // namespace
}  // namespace cluster::sparse

SparseGroupOptions sparse_group_options_from_env(SparseGroupOptions o) {
  o.rank = cluster::launcher_rank(o.rank);
  o.size = cluster::launcher_size(o.size);
  if (const char* a = std::getenv("ACCEL_COORDINATOR")) o.coordinator = a;
  return o;
}

struct SparseGroup::Engine {
  std::thread thread;
};

SparseGroup::SparseGroup(const SparseGroupOptions& o) : rank_(o.rank), size_(o.size) {
  if (o.size < 1) throw InputError("sparse group: size " + std::to_string(o.size) + " is not positive");
  if (o.rank < 0 || o.rank >= o.size)
    throw InputError("sparse group: rank " + std::to_string(o.rank) + " is not in 0.." + std::to_string(o.size - 1));
  if (o.timeout_ms < 1) throw InputError("sparse group: timeout " + std::to_string(o.timeout_ms) + " ms");
  auto& ch = cluster::sparse::channel();
  {
    std::lock_guard lock(ch.mu);
    if (ch.in_use) throw InputError("sparse group: one open group per process, and this process has one");
    ch.submitted = ch.taken = ch.answered = 0;
    ch.pending.clear();
    ch.closing = ch.ended = false;
    ch.step_error.clear();
    ch.end_reason.clear();
    ch.in_use = true;
  }
  if (o.size == 1) return;  // the sum of one member is its own pairs
  engine_ = std::make_unique<Engine>();
  engine_->thread = std::thread([o] {
    int rc = cluster::kExitOk;
    std::string reason;
    try {
      if (o.rank == 0) {
        cluster::CoordinatorOptions c;
        static_cast<cluster::Common&>(c) = {o.job, "cpu", o.timeout_ms, o.tls, o.keepalive_ms, o.log_json, {}};
        c.workers = o.size - 1;
        c.listen = o.coordinator;
        c.join_timeout_ms = o.join_timeout_ms;
        c.move_lost_rows = false;  // a lost member's gradient is lost with it
        c.print_summary = false;
        cluster::sparse::SparseJob job;
        rc = cluster::run_coordinator(c, job);
      } else {
        cluster::WorkerOptions w;
        static_cast<cluster::Common&>(w) = {o.job, "cpu", o.timeout_ms, o.tls, o.keepalive_ms, o.log_json, {}};
        w.coordinator = o.coordinator;
        w.id = static_cast<std::uint32_t>(o.rank);
        w.snapshot_dir = o.snapshot_dir;
        rc = cluster::run_worker(w);
      }
      if (rc != cluster::kExitOk) reason = "the group's engine ended with code " + std::to_string(rc);
    } catch (const std::exception& e) {
      reason = e.what();
    }
    auto& ch = cluster::sparse::channel();
    {
      std::lock_guard lock(ch.mu);
      ch.ended = true;
      ch.end_reason = reason.empty() ? "the group is closed" : reason;
    }
    ch.cv.notify_all();
  });
}

SparseGroup::~SparseGroup() { close(); }

void SparseGroup::close() {
  auto& ch = cluster::sparse::channel();
  {
    std::lock_guard lock(ch.mu);
    if (closed_) return;
    ch.closing = true;
  }
  ch.cv.notify_all();
  if (engine_ && engine_->thread.joinable()) engine_->thread.join();
  std::lock_guard lock(ch.mu);
  ch.in_use = false;
  closed_ = true;
}

SparseSum SparseGroup::allreduce(std::uint64_t n, std::span<const std::uint32_t> indices,
                                 std::span<const float> values, std::uint64_t tag) {
  cluster::sparse::check_pairs(n, indices, values);
  if (!engine_) {
    if (closed_) throw InputError("sparse allreduce: the group is closed");
    SparseSum s;
    s.indices.assign(indices.begin(), indices.end());
    s.values.assign(values.begin(), values.end());
    s.members = {0};
    s.tags = {tag};
    return s;
  }
  auto& ch = cluster::sparse::channel();
  std::unique_lock lock(ch.mu);
  if (closed_ || ch.closing) throw InputError("sparse allreduce: the group is closed");
  if (ch.ended) throw InputError("sparse allreduce: " + ch.end_reason);
  ch.pending = cluster::sparse::encode(cluster::sparse::Kind::Pairs, n, indices, values, tag);
  const std::uint64_t mine = ++ch.submitted;
  ch.cv.notify_all();
  ch.cv.wait(lock, [&] { return ch.answered >= mine || ch.ended; });
  if (ch.answered < mine) throw InputError("sparse allreduce: " + ch.end_reason);
  if (!ch.step_error.empty()) throw InputError(ch.step_error);
  return std::move(ch.sum);
}

}  // namespace accel
