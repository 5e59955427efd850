// Parallel SMO across processes ([Narasimhan14], Algorithms 3-6) with the
// batched working set of [ThunderSVM18]: the algorithm, without the
// transport. Keys: docs/references.md.
//
// Every member holds the training set and owns a range of its rows: it keeps
// the gradient of the variables on those rows, shrinks them, reconstructs
// them, and computes their share of every kernel row. The coordinator keeps
// the multipliers and runs solve_batch's loop on what members report: each
// round it merges the members' best violators into the working set, solves
// the q-sized subproblem from the q x q kernel block, and sends the
// multiplier changes back; shrinking (eq. 10) and reconstruction (Alg. 6)
// are decided there and applied by every member to its own rows. The
// working set's q x q block comes from the members too: they compute the
// set's kernel rows over their rows (which the gradient update then uses
// from their caches) and send their columns of the block, so the
// coordinator computes no kernel values and the block is the very values
// the gradients are updated with, as in single-node solve_batch.
//
// Where the rows live, two ways (RowSource):
//  - every member holds the whole set (pushed: one bulk copy at the start),
//    so a round carries q indices and q multipliers instead of q rows, and
//    moving rows to another member (a lost or returning member, a
//    rebalance) costs a reconstruction and no data;
//  - sharded (shared storage): each member reads only the rows it owns,
//    and the rows of other members' variables travel as [Narasimhan14]
//    has them travel. The working set's rows are fetched from their owners
//    (Op::want, Report::rows) and sent with the Rows op; a reconstruction
//    (Alg. 6) or a gradient rebuilt from the multipliers streams the
//    support vectors' rows the same way, a chunk a round (Op::Supply),
//    until no member waits for one (Report::need). A member holds its own
//    rows and these guests, never the set; lost rows are read from storage
//    by their new owner.
// Either way the coordinator needs no rows at all: the block's diagonal
// comes with its columns (Report::block_diag), and rows it forwards are a
// round's, not kept.
#pragma once

#include <array>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <vector>

#include "accel/svm.hpp"
#include "accel/task.hpp"

namespace accel::svm_parallel {

// Training-set rows [begin, end) owned by a member.
struct Range {
  std::uint32_t member = 0;
  std::int64_t begin = 0, end = 0;
  bool operator==(const Range&) const = default;
};

// Rows of the training set for variables of the problem (guests on the
// member that gets them): vars[i]'s row is x's row i.
struct RowBlock {
  std::vector<std::int32_t> vars;
  CsrMatrix x;
  bool empty() const { return vars.empty(); }
};

// Where a member's rows come from.
class RowSource {
 public:
  virtual ~RowSource() = default;
  virtual std::int64_t rows() const = 0;  // of the whole set
  virtual std::int64_t cols() const = 0;
  // Every row in memory (pushed): the member computes over the whole set
  // and never waits for rows. Otherwise it reads the ranges it owns.
  virtual const CsrMatrix* all() const { return nullptr; }
  // Rows [begin, end) appended to out (sharded: read from storage).
  virtual void read(std::int64_t begin, std::int64_t end, CsrMatrix& out) = 0;
};

// The whole set in memory.
class HeldRows final : public RowSource {
 public:
  explicit HeldRows(const CsrMatrix& x) : x_(x) {}
  std::int64_t rows() const override { return x_.rows; }
  std::int64_t cols() const override { return x_.cols; }
  const CsrMatrix* all() const override { return &x_; }
  void read(std::int64_t begin, std::int64_t end, CsrMatrix& out) override {
    for (std::int64_t r = begin; r < end; ++r) out.add_row_from(x_, r);
  }

 private:
  const CsrMatrix& x_;
};

// One step of the coordinator's decision; a decision is a list of them,
// applied in order.
struct Op {
  enum Kind : std::uint8_t {
    Start = 1,        // a new dual problem: problem, q, owners
    Step = 2,         // the working set ws moved to alpha (its new multipliers)
    Shrink = 3,       // apply eq. 10 with the global extremes gmax, gmin
    Reconstruct = 4,  // Alg. 6 for every shrunk own variable; all active again
    Assign = 5,       // new owners (a member lost, back, or rebalanced)
    Report = 6,       // the next report carries the gradient of every own variable
    Rows = 7,         // compute the kernel rows of ws (rows: theirs, sharded); report the block's own columns
    Supply = 8,       // sharded: rows a member waits for (Report::need); want: rows to report
  };
  Kind kind = Step;
  DualProblem problem;               // Start
  std::int64_t q = 0;                // Start: working-set size (candidates per side)
  std::vector<Range> owners;         // Start, Assign
  std::vector<std::int32_t> ws;      // Step, Rows
  std::vector<double> alpha;         // Step
  double gmax = 0, gmin = 0;         // Shrink
  // Assign: the exact gradients of variables that change owner, where the
  // coordinator has them (a re-split: their old owners reported them), so
  // that the new owner need not rebuild them from the multipliers.
  std::vector<std::pair<std::int32_t, double>> gradients;
  // Sharded: rows of other members' variables (Rows: the working set's;
  // Supply: what members wait for), and variables whose rows their owners
  // attach to the next report (Supply).
  RowBlock rows;
  std::vector<std::int32_t> want;
};

// Extremes of -gamma over a member's active variables, per sign of y.
struct Extreme {
  double gmax = -std::numeric_limits<double>::infinity();  // over I_up
  double gmin = std::numeric_limits<double>::infinity();   // over I_low
  std::int32_t i = -1, j = -1;
};

// A member's report after applying a decision.
struct Report {
  std::int64_t owned = 0, active = 0;  // own variables, of which active
  std::array<Extreme, 3> ext;          // y of any sign, +1, -1
  std::vector<std::pair<double, std::int32_t>> up, low;  // own best candidates (-gamma, variable), best first
  std::vector<std::pair<std::int32_t, double>> ws_g;     // gradient of own active variables of the last working set
  std::vector<std::pair<std::int32_t, double>> all_g;    // after a Report op: every own variable's gradient
  // After a Rows op: for each own active variable k of the working set,
  // K(x_ws[a], x_k) for every a: its column of the q x q block.
  std::vector<std::int32_t> block_vars;
  std::vector<float> block;  // block_vars.size() columns of q values
  std::vector<double> block_diag;  // K(x_k, x_k) of each block variable: the subproblem's diagonal
  double seconds = 0;        // after a Rows op: the time its kernel rows took (the member's measured speed)
  // Sharded: the own rows of the variables the last op wanted (and of the
  // likeliest candidates, where other members own rows), and the
  // other members' variables whose rows this member waits for (a
  // reconstruction or a rebuild in progress: the solver goes on once none
  // does).
  RowBlock rows;
  std::vector<std::int32_t> need;
  // Held rows with bound_settles(): the sources of a settle in progress not
  // summed yet (settle() goes on until no member has any).
  std::int64_t pending = 0;
};

// One member's share: its rows (the source outlives it), this member's
// devices.
class Member {
 public:
  Member(RowSource& rows, SvmParams params, std::vector<Device*> devices, std::uint32_t id);
  // Over the whole set in memory (HeldRows).
  Member(const LabeledCsr& data, SvmParams params, std::vector<Device*> devices, std::uint32_t id);
  ~Member();
  Member(const Member&) = delete;
  Member& operator=(const Member&) = delete;
  void apply(const std::vector<Op>& ops);
  Report report() const;
  // Sharded: reads its rows of `owners` now, before a problem starts
  // (members read theirs side by side while the job loads).
  void hold(const std::vector<Range>& owners);
  // Throws InputError when an op names variables or rows outside the set.
  void check(const std::vector<Op>& ops) const;
  // Held rows: gradients are made exact (a reconstruction, an assignment,
  // a start from multipliers) one batch of 64 MiB of kernel values per op
  // instead of at once, so that no op keeps this member from its barrier
  // for long (a member rebuilding a third of Fashion-MNIST's gradients
  // took 1.07 s, past a 1 s timeout). The caller sends Supply ops until no
  // report is pending (settle()). The arithmetic is unchanged.
  void bound_settles();

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// The members as the coordinator's solver sees them: a round sends them a
// decision of one op and returns every owner's report of the state after it (the
// transport and membership are the caller's; a caller that loses a member
// reassigns its rows with an Assign op of its own before returning). On the
// cluster engine a round is a task that waits for the engine's next round.
class Members {
 public:
  virtual ~Members() = default;
  virtual Task<std::map<std::uint32_t, Report>> round(Op op) = 0;
  // The current owners, for a Start.
  virtual std::vector<Range> owners() const = 0;
  // Whether members hold only their own rows (RowSource::all() is null):
  // then the working set's rows travel with the Rows op.
  virtual bool sharded() const { return false; }
};

// Rows a Supply sends at most: a few MB of a dense set's rows, so that
// neither the coordinator nor a member holds more than a chunk of them.
constexpr std::size_t kSupplyRows = 1024;

// Rounds of Supply until no member waits for rows: the variables members
// need, a chunk at a time, fetched from their owners (want) and sent to
// every member (rows). `round` sends one op and returns the reports of the
// state after it, following membership as Members::round does. Returns
// the last reports (those of `reports` when nobody waited).
Task<std::map<std::uint32_t, Report>> settle(std::map<std::uint32_t, Report> reports,
                                             std::function<Task<std::map<std::uint32_t, Report>>(Op)> round);

// svm_train's dual problems solved across the members: the observer the
// cluster's SVM job trains with (svm_train_steps). It keeps every
// solution, so that a coordinator restarted from a checkpoint can hand
// them back: the resumed training takes those instead of solving them, and
// starts the problem in progress from its multipliers (SMO converges from
// any feasible point, so the solution is the failure-free one within the
// stopping tolerance).
class Trainer final : public SvmObserver {
 public:
  explicit Trainer(Members& members) : members_(members) {}
  Task<BinarySolution> solve(const DualProblem& pb, const SvmParams& params, KernelRows& kr,
                             SvmTimes& times) override;
  // Every problem solved so far, in svm_train's order.
  const std::vector<BinarySolution>& solved() const { return solved_; }
  // Before the training: a checkpoint's solutions, and the multipliers of
  // the problem it was solving (none: it was between problems). A
  // solution of another size than its problem is an InputError then.
  void resume(std::vector<BinarySolution> solved, std::optional<std::vector<double>> alpha);

 private:
  Members& members_;
  std::vector<BinarySolution> solved_, restored_;
  std::optional<std::vector<double>> resume_alpha_;
};

// The batched solver (solve_batch's loop) with the members as its source
// of gradients and kernel rows: every kernel value comes from the members
// (the working set's diagonal with its block), so the coordinator needs no
// rows. pb, params, times and members outlive the task.
Task<BinarySolution> solve_distributed(const DualProblem& pb, const SvmParams& params, SvmTimes& times,
                                       Members& members);

}  // namespace accel::svm_parallel
