// Parallel SMO (accel/svm_parallel.hpp) with its members in this process:
// real Member objects on the cpu device, their decisions and reports passed
// by LocalMembers, which stands where the cluster engine's transport does. The
// model must be single-node svm_train's (objective within 1e-6 relative,
// the same support vectors) on 1, 2 and 3 members, for every problem type,
// with shrinking on, and when a member is lost mid-solve and its rows move
// to another member.
#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <memory>
#include <random>
#include <set>

#include "accel/error.hpp"
#include "accel/registry.hpp"
#include "accel/svm.hpp"
#include "accel/svm_parallel.hpp"

namespace accel {
namespace {

using svm_parallel::Members;
using svm_parallel::Member;
using svm_parallel::Op;
using svm_parallel::Range;
using svm_parallel::Report;

// Three overlapping Gaussian classes in 10 dimensions, some entries absent.
LabeledCsr make_data(int n, unsigned seed, bool regression = false) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> noise(0.0f, 1.0f);
  std::uniform_real_distribution<float> coin(0.0f, 1.0f);
  LabeledCsr d;
  for (int i = 0; i < n; ++i) {
    const int cls = i % 3;
    std::vector<std::pair<std::int32_t, float>> row;
    double target = 0;
    for (int j = 0; j < 10; ++j)
      if (coin(rng) < 0.8f) {
        const float v = noise(rng) + 0.7f * static_cast<float>((cls + j) % 3 - 1);
        row.emplace_back(j, v);
        target += (j % 2 ? 0.3 : -0.2) * v;
      }
    d.x.add_row(row);
    d.labels.push_back(regression ? target : cls + 1);
  }
  d.x.cols = 10;
  return d;
}

const std::vector<Device*>& cpu() {
  static const Registry reg = Registry::discover_all();
  static const auto devs = reg.select("cpu", KernelId::CsrKernelRows);
  return devs;
}

// A member's storage when members hold only their own rows: it serves any
// range, as a shared file does, and counts the rows it was asked for.
class ShardRows final : public svm_parallel::RowSource {
 public:
  explicit ShardRows(const CsrMatrix& x) : x_(x) {}
  std::int64_t rows() const override { return x_.rows; }
  std::int64_t cols() const override { return x_.cols; }
  void read(std::int64_t begin, std::int64_t end, CsrMatrix& out) override {
    for (std::int64_t r = begin; r < end; ++r) out.add_row_from(x_, r);
    read_ += end - begin;
  }
  std::int64_t rows_read() const { return read_; }

 private:
  const CsrMatrix& x_;
  std::int64_t read_ = 0;
};

// Members 0..k-1 in this process, whose rounds never wait; `lose` (member
// id, after how many rounds) drops one after it applied a decision and
// before it reports, and hands its rows to member 0 as the engine's SVM job
// does. Sharded, each member reads only its own rows (ShardRows), and
// rounds end with the rows members wait for supplied (settle), as the
// engine's SVM job does.
class LocalMembers final : public Members {
 public:
  LocalMembers(const LabeledCsr& data, const SvmParams& params, int members, std::pair<int, int> lose = {-1, 0},
               bool sharded = false)
      : lose_(lose), sharded_(sharded) {
    const std::int64_t n = data.x.rows;
    for (int m = 0; m < members; ++m) {
      if (sharded) {
        storage_[m] = std::make_unique<ShardRows>(data.x);
        members_[m] = std::make_unique<Member>(*storage_[m], params, cpu(), m);
      } else {
        members_[m] = std::make_unique<Member>(data, params, cpu(), m);
      }
      owners_.push_back({static_cast<std::uint32_t>(m), n * m / members, n * (m + 1) / members});
    }
  }
  std::vector<Range> owners() const override { return owners_; }
  bool sharded() const override { return sharded_; }
  Task<std::map<std::uint32_t, Report>> round(Op op) override {
    auto reports = apply(op);
    if (sharded_)
      reports = co_await svm_parallel::settle(std::move(reports), [this](Op next) -> Task<std::map<std::uint32_t, Report>> {
        co_return apply(next);
      });
    co_return reports;
  }
  std::int64_t rows_read(int member) const { return storage_.at(member)->rows_read(); }
  std::map<std::uint32_t, Report> apply(const Op& op) {
    const std::vector<Op> ops{op};
    ++rounds_;
    for (auto& [id, m] : members_) {
      m->check(ops);
      m->apply(ops);
    }
    // lose_.second < 0: lost in the first round that collects every gradient.
    const bool due = lose_.second < 0 ? ops.front().kind == Op::Report : rounds_ == lose_.second;
    if (lose_.first >= 0 && due && members_.count(lose_.first)) {
      members_.erase(lose_.first);
      for (Range& r : owners_)
        if (r.member == static_cast<std::uint32_t>(lose_.first)) r.member = 0;
      Op assign;
      assign.kind = Op::Assign;
      assign.owners = owners_;
      for (auto& [id, m] : members_) m->apply({assign});
      ++moves_;
    }
    std::map<std::uint32_t, Report> out;
    for (auto& [id, m] : members_) out[id] = m->report();
    return out;
  }
  int moves() const { return moves_; }
  int rounds() const { return rounds_; }

 private:
  std::map<int, std::unique_ptr<ShardRows>> storage_;  // before the members, which read from it
  std::map<std::uint32_t, std::unique_ptr<Member>> members_;
  std::vector<Range> owners_;
  std::pair<int, int> lose_;
  bool sharded_ = false;
  int rounds_ = 0, moves_ = 0;
};

SvmParams base(SvmType type, const std::string& shrink = "none") {
  SvmParams p;
  p.type = type;
  p.C = 4;
  p.gamma = 0.2;
  p.eps = 1e-4;
  p.nu = 0.3;
  p.p = 0.1;
  p.shrink = parse_shrink(shrink);
  p.ws_size = 64;
  return p;
}

struct Trained {
  SvmModel model;
  SvmTrainReport report;
};

Trained train_single(const LabeledCsr& data, const SvmParams& p) {
  Trained t;
  t.model = svm_train(data, p, cpu(), &t.report);
  return t;
}

Trained train_parallel(const LabeledCsr& data, SvmParams p, int members, std::pair<int, int> lose = {-1, 0},
                       int* moves = nullptr, bool sharded = false, std::vector<std::int64_t>* rows_read = nullptr) {
  LocalMembers group(data, p, members, lose, sharded);
  svm_parallel::Trainer across(group);
  Trained t;
  t.model = svm_train(data, p, cpu(), &t.report, &across);
  if (moves) *moves = group.moves();
  if (rows_read)
    for (int m = 0; m < members; ++m) rows_read->push_back(group.rows_read(m));
  return t;
}

std::set<std::pair<std::vector<std::int32_t>, std::vector<float>>> sv_set(const SvmModel& m) {
  std::set<std::pair<std::vector<std::int32_t>, std::vector<float>>> out;
  for (std::int64_t i = 0; i < m.sv.rows; ++i) {
    const auto lo = m.sv.row_ptr[i], hi = m.sv.row_ptr[i + 1];
    out.insert({std::vector<std::int32_t>(m.sv.col_idx.begin() + lo, m.sv.col_idx.begin() + hi),
                std::vector<float>(m.sv.values.begin() + lo, m.sv.values.begin() + hi)});
  }
  return out;
}

void expect_same_model(const Trained& ta, const Trained& tb) {
  const SvmModel &a = ta.model, &b = tb.model;
  ASSERT_EQ(ta.report.problems.size(), tb.report.problems.size());
  for (std::size_t i = 0; i < ta.report.problems.size(); ++i) {
    // nu-SVC's objective is compared before LIBSVM's 1/r^2 scaling, which
    // magnifies r's eps-sized uncertainty (as tests/python does).
    const auto& pa = ta.report.problems[i];
    const auto& pb = tb.report.problems[i];
    const bool nu_svc = a.params.type == SvmType::NuSvc;
    const double oa = nu_svc ? pa.obj * pa.r * pa.r : pa.obj, ob = nu_svc ? pb.obj * pb.r * pb.r : pb.obj;
    EXPECT_LE(std::abs(oa - ob), 1e-6 * std::abs(ob)) << "problem " << i << ": " << oa << " vs " << ob;
  }
  EXPECT_EQ(sv_set(a), sv_set(b));
  ASSERT_EQ(a.rho.size(), b.rho.size());
  for (std::size_t i = 0; i < a.rho.size(); ++i) EXPECT_NEAR(a.rho[i], b.rho[i], 1e-3 * (1 + std::abs(b.rho[i])));
}

class SvmParallel : public ::testing::TestWithParam<int> {};

TEST_P(SvmParallel, CSvcMulticlassEqualsSingleNode) {
  const LabeledCsr data = make_data(900, 5);
  const SvmParams p = base(SvmType::CSvc);
  expect_same_model(train_parallel(data, p, GetParam()), train_single(data, p));
}

TEST_P(SvmParallel, ShrinkingAndReconstructionAcrossMembers) {
  const LabeledCsr data = make_data(900, 6);
  const SvmParams p = base(SvmType::CSvc, "multi2");
  const Trained m = train_parallel(data, p, GetParam());
  expect_same_model(m, train_single(data, p));
  int reconstructions = 0;
  for (const auto& b : m.report.problems) reconstructions += b.reconstructions;
  EXPECT_GT(reconstructions, 0) << "the test should exercise Algorithm 6";
}

TEST_P(SvmParallel, OtherTypesEqualSingleNode) {
  const LabeledCsr cls = make_data(600, 7), reg = make_data(600, 8, true);
  for (const SvmType t : {SvmType::NuSvc, SvmType::OneClass})
    expect_same_model(train_parallel(cls, base(t), GetParam()), train_single(cls, base(t)));
  for (const SvmType t : {SvmType::EpsilonSvr, SvmType::NuSvr})
    expect_same_model(train_parallel(reg, base(t), GetParam()), train_single(reg, base(t)));
}

INSTANTIATE_TEST_SUITE_P(Members, SvmParallel, ::testing::Values(1, 2, 3));

TEST(SvmParallelLoss, AMemberLostMidSolveMovesItsRowsAndTheModelIsUnchanged) {
  const LabeledCsr data = make_data(900, 9);
  const SvmParams p = base(SvmType::CSvc, "multi2");
  int moves = 0;
  const Trained m = train_parallel(data, p, 3, {2, 7}, &moves);
  EXPECT_EQ(moves, 1);
  expect_same_model(m, train_single(data, p));
}

// The engine's case from CI: a member lost while the coordinator collects
// every gradient (the last round of a problem); the Assign that follows
// must still bring every gradient, from the new owners.
TEST(SvmParallelLoss, AMemberLostWhileTheGradientsAreCollected) {
  const LabeledCsr data = make_data(600, 4);
  const SvmParams p = base(SvmType::CSvc, "multi2");
  int moves = 0;
  const Trained m = train_parallel(data, p, 3, {1, -1}, &moves);
  EXPECT_EQ(moves, 1);
  expect_same_model(m, train_single(data, p));
}

// The engine's way of driving it: the training pauses at every round, and
// its caller applies the decision to the members and delivers their
// reports (svm_job.cpp's decide()). The model is the one trained without
// pauses, on the same members.
TEST(SvmParallelSteps, DrivenRoundByRoundEqualsRunThrough) {
  const LabeledCsr data = make_data(600, 11);
  const SvmParams p = base(SvmType::CSvc, "multi2");
  LocalMembers group(data, p, 2);
  Mailbox<Op, std::map<std::uint32_t, Report>> box;
  struct Paused final : Members {
    LocalMembers& group;
    Mailbox<Op, std::map<std::uint32_t, Report>>& box;
    Paused(LocalMembers& g, Mailbox<Op, std::map<std::uint32_t, Report>>& b) : group(g), box(b) {}
    Task<std::map<std::uint32_t, Report>> round(Op op) override { co_return co_await box.exchange(std::move(op)); }
    std::vector<Range> owners() const override { return group.owners(); }
  } paused(group, box);
  svm_parallel::Trainer trainer(paused);
  Trained stepped;
  Task<SvmModel> training = svm_train_steps(data, p, cpu(), trainer, &stepped.report);
  training.resume();
  int rounds = 0;
  while (box.waiting()) {
    ASSERT_FALSE(training.done());
    box.deliver(group.apply(box.take_outgoing()));
    ++rounds;
  }
  ASSERT_TRUE(training.done());
  stepped.model = training.result();
  EXPECT_EQ(rounds, group.rounds());
  EXPECT_GT(rounds, 20);
  EXPECT_EQ(trainer.solved().size(), 3u);  // three classes, one against one
  expect_same_model(stepped, train_parallel(data, p, 2));
}

// A re-split's move (svm_job.cpp move_rows): every gradient reported, then
// an Assign that carries the moved variables' gradients; the gainers take
// them instead of rebuilding, and the model is single-node's.
TEST(SvmParallelMove, AssignWithGradientsMatchesRebuilding) {
  const LabeledCsr data = make_data(400, 6);
  SvmParams p = base(SvmType::CSvc, "multi2");
  Member a(data, p, cpu(), 0), b(data, p, cpu(), 1);
  const auto problem = DualProblem::c_svc([&] {
    std::vector<std::int8_t> y;
    for (std::int64_t i = 0; i < data.x.rows; ++i) y.push_back(data.labels[i] == 1 ? 1 : -1);
    return y;
  }(), 1.0);
  Op start;
  start.kind = Op::Start;
  start.problem = problem;
  start.q = 16;
  start.owners = {{0, 0, 200}, {1, 200, 400}};
  Op step;
  step.kind = Op::Step;
  for (int k = 0; k < 40; ++k) {
    step.ws.push_back(k * 10);
    step.alpha.push_back(0.5);
  }
  Op report;
  report.kind = Op::Report;
  for (Member* m : {&a, &b}) m->apply({start, step, report});
  std::map<std::int32_t, double> exact;
  for (Member* m : {&a, &b})
    for (const auto& [k, g] : m->report().all_g) exact[k] = g;
  ASSERT_EQ(exact.size(), 400u);
  Op assign;
  assign.kind = Op::Assign;
  assign.owners = {{0, 0, 120}, {1, 120, 400}};
  for (std::int32_t k = 120; k < 200; ++k) assign.gradients.emplace_back(k, exact[k]);
  Member c(data, p, cpu(), 1);  // the same state, gaining by rebuilding from the multipliers
  c.apply({start, step});
  Op rebuild = assign;
  rebuild.gradients.clear();
  b.apply({assign, report});
  c.apply({rebuild, report});
  std::map<std::int32_t, double> sent, rebuilt;
  for (const auto& [k, g] : b.report().all_g) sent[k] = g;
  for (const auto& [k, g] : c.report().all_g) rebuilt[k] = g;
  ASSERT_EQ(sent.size(), 280u);
  // Training's kernel values are float, and the rebuild computes K(moved,
  // working set) where the old owner computed K(working set, its rows): the
  // two products may be summed in different orders (OpenBLAS's sgemm does on
  // Zen 4, where 1e-9 failed by 4e-8), so they agree to float rounding. The
  // moved gradients being taken, not rebuilt, is the bitwise check below.
  for (const auto& [k, g] : sent) EXPECT_NEAR(g, rebuilt.at(k), 1e-6 * (1 + std::abs(g))) << "variable " << k;
  for (std::int32_t k = 120; k < 200; ++k) EXPECT_EQ(sent.at(k), exact.at(k));
}

// Sharded: each member reads only its own rows; the working set's rows
// and the support vectors' for a reconstruction travel with the ops. The
// model is single-node's for every type (epsilon-SVR: two variables a
// row), with shrinking and reconstruction, and when a member is lost and
// its rows are read again by their new owner.
class SvmSharded : public ::testing::TestWithParam<int> {};

TEST_P(SvmSharded, EveryTypeEqualsSingleNodeAndEachMemberReadsItsOwnRows) {
  const int members = GetParam();
  const LabeledCsr cls = make_data(600, 7), reg = make_data(600, 8, true);
  for (const SvmType t : {SvmType::CSvc, SvmType::NuSvc, SvmType::OneClass, SvmType::EpsilonSvr, SvmType::NuSvr}) {
    const LabeledCsr& data = (t == SvmType::EpsilonSvr || t == SvmType::NuSvr) ? reg : cls;
    std::vector<std::int64_t> read;
    expect_same_model(train_parallel(data, base(t, "multi2"), members, {-1, 0}, nullptr, true, &read),
                      train_single(data, base(t, "multi2")));
    for (int m = 0; m < members; ++m)
      EXPECT_EQ(read[m], data.x.rows * (m + 1) / members - data.x.rows * m / members)
          << "member " << m << " reads its own rows once, and no other";
  }
}

TEST_P(SvmSharded, ShrinkingAndReconstructionStreamTheSupportVectors) {
  const LabeledCsr data = make_data(900, 6);
  const SvmParams p = base(SvmType::CSvc, "multi2");
  const Trained m = train_parallel(data, p, GetParam(), {-1, 0}, nullptr, true);
  expect_same_model(m, train_single(data, p));
  int reconstructions = 0;
  for (const auto& b : m.report.problems) reconstructions += b.reconstructions;
  EXPECT_GT(reconstructions, 0) << "the test should exercise Algorithm 6";
}

INSTANTIATE_TEST_SUITE_P(Members, SvmSharded, ::testing::Values(1, 2, 3));

TEST(SvmShardedLoss, ALostMembersRowsAreReadAgainByTheirNewOwner) {
  const LabeledCsr data = make_data(900, 9);
  const SvmParams p = base(SvmType::CSvc, "multi2");
  for (const int when : {7, -1}) {  // mid-solve; while every gradient is collected
    int moves = 0;
    std::vector<std::int64_t> read;
    const Trained m = train_parallel(data, p, 3, {2, when}, &moves, true, &read);
    EXPECT_EQ(moves, 1);
    expect_same_model(m, train_single(data, p));
    EXPECT_EQ(read[0], 600) << "member 0 reads its rows and member 2's";
  }
}

TEST(SvmParallelMember, RefusesDecisionsOutsideTheSet) {
  const LabeledCsr data = make_data(50, 1);
  Member m(data, base(SvmType::CSvc), cpu(), 0);
  Op step;
  step.kind = Op::Step;
  step.ws = {1};
  step.alpha = {0.5};
  EXPECT_THROW(m.check({step}), InputError) << "a step before any problem";
  Op start;
  start.kind = Op::Start;
  start.problem = DualProblem::c_svc(std::vector<std::int8_t>(50, 1), 1.0);
  start.problem.rows.assign(50, 0);
  start.problem.rows[3] = 77;
  start.q = 8;
  EXPECT_THROW(m.check({start}), InputError) << "a row outside the set";
  start.problem.rows[3] = 3;
  step.ws = {50};
  EXPECT_THROW(m.check({start, step}), InputError) << "a variable outside the problem";
}

}  // namespace
}  // namespace accel
