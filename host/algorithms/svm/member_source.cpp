// Parallel SMO across processes: the coordinator's half. The batched
// solver's loop (batch_solver.cpp) runs on the coordinator with the
// members as its source: the O(n) work (gradients, candidates, shrinking,
// reconstruction) is done by the members on their own rows, and each of
// the source's operations is a round of decisions and reports.
#include <algorithm>
#include <limits>
#include <unordered_map>

#include "accel/error.hpp"
#include "accel/log.hpp"
#include "accel/svm_parallel.hpp"
#include "batch_solver.hpp"

namespace accel::svm_parallel {

using namespace svm_detail;

namespace {

std::int64_t total_active(const std::map<std::uint32_t, Report>& reports) {
  std::int64_t m = 0;
  for (const auto& [id, r] : reports) m += r.active;
  return m;
}

// The global extremes of one sign from the members' own (members own
// ascending ranges, reported in id order; ties go to the lower index as
// extremes() gives them over one ascending active list).
Extremes merged(const std::map<std::uint32_t, Report>& reports, int t) {
  Extremes e;
  for (const auto& [id, r] : reports) {
    const Extreme& x = r.ext[t];
    if (x.i >= 0 && (x.gmax > e.gmax || (x.gmax == e.gmax && x.i < e.i))) {
      e.gmax = x.gmax;
      e.i = x.i;
    }
    if (x.j >= 0 && (x.gmin < e.gmin || (x.gmin == e.gmin && x.j < e.j))) {
      e.gmin = x.gmin;
      e.j = x.j;
    }
  }
  return e;
}

// working_extremes over the members' reports.
Extremes working(const std::map<std::uint32_t, Report>& reports, bool nu) {
  if (!nu) return merged(reports, 0);
  const Extremes pos = merged(reports, 1), neg = merged(reports, 2);
  const bool pos_ok = pos.i >= 0 && pos.j >= 0, neg_ok = neg.i >= 0 && neg.j >= 0;
  if (!pos_ok) return neg;
  if (!neg_ok) return pos;
  return pos.gmax - pos.gmin >= neg.gmax - neg.gmin ? pos : neg;
}

using Reports = std::map<std::uint32_t, Report>;

// The batched solver's source on the members (batch_solver.hpp): each
// operation is a decision to every member and the reports of the state
// after it.
class MemberSource final : public BatchSource {
 public:
  MemberSource(const DualProblem& pb, Members& members) : pb_(pb), members_(members) {}

  Task<void> start(State& s, std::int64_t q) override {
    s_ = &s;
    Op op;
    op.kind = Op::Start;
    op.problem = pb_;
    op.q = q;
    op.owners = members_.owners();
    reports_ = co_await members_.round(op);
  }
  std::int64_t active() const override { return total_active(reports_); }
  Extremes extremes(int sign) const override { return merged(reports_, sign == 0 ? 0 : sign > 0 ? 1 : 2); }
  Extremes working() const override { return svm_parallel::working(reports_, pb_.nu); }

  Task<void> shrink(double gmax, double gmin) override {
    Op op;
    op.kind = Op::Shrink;
    op.gmax = gmax;
    op.gmin = gmin;
    reports_ = co_await members_.round(op);
  }

  Task<void> reconstruct() override {
    Op op;
    op.kind = Op::Reconstruct;
    reports_ = co_await members_.round(op);
    // Every variable is owned once and active after a reconstruction; a
    // caller that lost rows would otherwise reconstruct forever.
    if (active() != n())
      throw std::logic_error("svm: after reconstruction the members hold " + std::to_string(active()) + " of " +
                             std::to_string(n()) + " variables");
  }

  // The members' best candidates merged, and -gamma of every variable they
  // told of: candidates, extremes, and the last working set's still active
  // (those may be kept).
  void candidates(std::size_t q, Candidates& up, Candidates& low) override {
    v_of_.clear();
    kept_.clear();
    for (const auto& [id, r] : reports_) {
      for (const auto& c : r.up) v_of_[c.second] = c.first;
      for (const auto& c : r.low) v_of_[c.second] = c.first;
      up.insert(up.end(), r.up.begin(), r.up.end());
      low.insert(low.end(), r.low.begin(), r.low.end());
      for (const Extreme& x : r.ext) {
        if (x.i >= 0) v_of_[x.i] = x.gmax;
        if (x.j >= 0) v_of_[x.j] = x.gmin;
      }
      for (const auto& [k, g] : r.ws_g) {
        v_of_[k] = -s_->y[k] * g;
        kept_[k] = 1;
      }
    }
    best_up(up, q);
    best_low(low, q);
  }
  bool kept(std::int32_t k) const override { return kept_.count(k) > 0; }
  double gradient(std::int32_t k) const override {
    const auto it = v_of_.find(k);
    if (it == v_of_.end()) throw std::logic_error("svm: a working-set variable no member reported");
    return -s_->y[k] * it->second;
  }
  // From the owners, with the block: the coordinator holds no rows.
  double diag(std::int32_t k) const override {
    const auto it = diag_.find(k);
    if (it == diag_.end()) throw std::logic_error("svm: the diagonal of a variable outside the working set's block");
    return it->second;
  }

  // Column by column from the members that own the set's variables (asked
  // again if a member was lost on the way). Sharded, the set's rows go
  // with the op: those of the last set are here, the new ones are fetched
  // from their owners first.
  Task<void> block(const std::vector<std::int32_t>& ws, std::vector<float>& Kws) override {
    const std::size_t w = ws.size();
    Kws.assign(w * w, 0.0f);
    Op op;
    op.kind = Op::Rows;
    op.ws = ws;
    std::unordered_map<std::int32_t, std::size_t> col;
    for (std::size_t b = 0; b < w; ++b) col[ws[b]] = b;
    for (int attempt = 0; attempt < kAsks; ++attempt) {
      // Each attempt as the owners are now: a member that returned since
      // the last owns rows the others need.
      op.rows = RowBlock{};
      if (members_.sharded() && owning_members() > 1) op.rows = co_await set_rows(ws);
      const Reports reports = co_await members_.round(op);
      diag_.clear();
      if (columns(reports, col, w, Kws, diag_) == w) co_return;
    }
    throw std::runtime_error("svm: the members did not return the working set's kernel block");
  }

  Task<void> step(const std::vector<std::int32_t>& ws, const std::vector<double>& alpha) override {
    Op op;
    op.kind = Op::Step;
    op.ws = ws;
    op.alpha = alpha;
    for (std::size_t a = 0; a < ws.size(); ++a) s_->alpha[ws[a]] = alpha[a];
    reports_ = co_await members_.round(op);
  }

  // Members that own rows: where one owns all, nobody needs another's.
  std::size_t owning_members() const {
    std::vector<std::uint32_t> ids;
    for (const Range& r : members_.owners())
      if (r.end > r.begin) ids.push_back(r.member);
    std::sort(ids.begin(), ids.end());
    return static_cast<std::size_t>(std::unique(ids.begin(), ids.end()) - ids.begin());
  }

  // The working set's rows: those of the last set, those the owners sent
  // with their reports (the candidates likeliest to be taken), and the
  // others wanted from their owners (asked again if an owner was lost).
  Task<RowBlock> set_rows(const std::vector<std::int32_t>& ws) {
    std::unordered_map<std::int32_t, std::int64_t> at;
    for (std::size_t i = 0; i < last_rows_.vars.size(); ++i) at[last_rows_.vars[i]] = static_cast<std::int64_t>(i);
    RowBlock fetched;
    const auto take = [&](const Reports& reports) {
      for (const auto& [id, r] : reports)
        for (std::size_t i = 0; i < r.rows.vars.size(); ++i)
          if (!at.count(r.rows.vars[i])) {
            at[r.rows.vars[i]] = -1 - fetched.x.rows;  // negative: in `fetched`
            fetched.vars.push_back(r.rows.vars[i]);
            fetched.x.add_row_from(r.rows.x, static_cast<std::int64_t>(i));
          }
    };
    take(reports_);
    for (int attempt = 0; attempt < kAsks; ++attempt) {
      Op fetch;
      fetch.kind = Op::Supply;
      for (const std::int32_t v : ws)
        if (!at.count(v)) fetch.want.push_back(v);
      if (fetch.want.empty()) break;
      take(co_await members_.round(fetch));
    }
    RowBlock out;
    for (const std::int32_t v : ws) {
      const auto it = at.find(v);
      if (it == at.end()) throw std::runtime_error("svm: no member sent the row of variable " + std::to_string(v));
      out.vars.push_back(v);
      if (it->second >= 0) out.x.add_row_from(last_rows_.x, it->second);
      else out.x.add_row_from(fetched.x, -1 - it->second);
    }
    out.x.cols = std::max(last_rows_.x.cols, fetched.x.cols);
    last_rows_ = out;
    co_return out;
  }

  // Every member's exact gradients, asked again if a member was lost in
  // the round that asked (its rows move on, and their new owner rebuilds
  // their gradients before it reports them): swarm seed 934, a slow
  // worker evicted in this round.
  Task<void> finish() override {
    Op op;
    op.kind = Op::Report;
    std::int64_t got = 0;
    for (int attempt = 0; attempt < kAsks && got != n(); ++attempt) {
      reports_ = co_await members_.round(op);
      std::vector<char> seen(static_cast<std::size_t>(n()), 0);  // each variable once, whoever reported it
      got = 0;
      for (const auto& [id, r] : reports_)
        for (const auto& [k, g] : r.all_g) {
          if (k < 0 || k >= n()) throw InputError("svm: a member reported the gradient of variable " + std::to_string(k));
          s_->G[k] = g;
          got += !seen[static_cast<std::size_t>(k)];
          seen[static_cast<std::size_t>(k)] = 1;
        }
    }
    if (got != n())
      throw std::logic_error("svm: the members reported " + std::to_string(got) + " of " + std::to_string(n()) +
                             " gradients");
  }

 private:
  std::int64_t n() const { return static_cast<std::int64_t>(pb_.y.size()); }

  // The block's columns in `reports` into Kws; how many there were.
  static std::size_t columns(const Reports& reports, const std::unordered_map<std::int32_t, std::size_t>& col,
                             std::size_t w, std::vector<float>& Kws, std::unordered_map<std::int32_t, double>& diag) {
    std::size_t got = 0;
    for (const auto& [id, r] : reports) {
      if (r.block.size() != r.block_vars.size() * w || r.block_diag.size() != r.block_vars.size())
        throw InputError("svm: a member's block of the wrong size");
      for (std::size_t c = 0; c < r.block_vars.size(); ++c) {
        const auto it = col.find(r.block_vars[c]);
        if (it == col.end()) throw InputError("svm: a member's block names a variable outside the working set");
        diag[r.block_vars[c]] = r.block_diag[c];
        for (std::size_t a = 0; a < w; ++a) Kws[a * w + it->second] = r.block[c * w + a];
        ++got;
      }
    }
    return got;
  }

  // How often a round is asked again while members are lost in it.
  static constexpr int kAsks = 8;
  const DualProblem& pb_;
  Members& members_;
  State* s_ = nullptr;
  Reports reports_;
  std::unordered_map<std::int32_t, double> v_of_;
  std::unordered_map<std::int32_t, char> kept_;
  std::unordered_map<std::int32_t, double> diag_;  // of the last block's variables
  RowBlock last_rows_;  // sharded: the last working set's rows
};

// The variables any member waits for, ascending.
std::vector<std::int32_t> needed(const Reports& reports) {
  std::vector<std::int32_t> out;
  for (const auto& [id, r] : reports) out.insert(out.end(), r.need.begin(), r.need.end());
  std::sort(out.begin(), out.end());
  out.erase(std::unique(out.begin(), out.end()), out.end());
  return out;
}

}  // namespace

// Each round sends the rows fetched by the last and wants the next chunk:
// one round a chunk. Rows an owner lost on the way did not send are
// wanted again from their new owner.
Task<Reports> settle(Reports reports, std::function<Task<Reports>(Op)> round) {
  RowBlock carry;
  int idle = 0;
  std::int64_t last_pending = std::numeric_limits<std::int64_t>::max();
  for (;;) {
    std::vector<std::int32_t> need = needed(reports);
    std::vector<std::int32_t> sent = carry.vars;
    std::sort(sent.begin(), sent.end());
    std::vector<std::int32_t> rest;
    std::set_difference(need.begin(), need.end(), sent.begin(), sent.end(), std::back_inserter(rest));
    std::int64_t pending = 0;  // held sources members sum a batch a round
    for (const auto& [id, r] : reports) pending += r.pending;
    if (carry.empty() && need.empty() && pending == 0) co_return reports;
    const bool progress = !carry.empty() || pending < last_pending;
    last_pending = pending;
    if (!progress && ++idle > 8) throw std::runtime_error("svm: the rows members wait for did not come");
    if (progress) idle = 0;
    Op op;
    op.kind = Op::Supply;
    op.rows = std::move(carry);
    op.want.assign(rest.begin(), rest.begin() + static_cast<std::ptrdiff_t>(std::min(rest.size(), kSupplyRows)));
    const std::vector<std::int32_t> want = op.want;
    reports = co_await round(std::move(op));
    carry = RowBlock{};
    for (const auto& [id, r] : reports)
      for (std::size_t i = 0; i < r.rows.vars.size(); ++i)
        if (std::binary_search(want.begin(), want.end(), r.rows.vars[i])) {
          carry.vars.push_back(r.rows.vars[i]);
          carry.x.add_row_from(r.rows.x, static_cast<std::int64_t>(i));
        }
  }
}

// kr: unused, the members compute every kernel value (the coordinator may
// hold no rows).
Task<BinarySolution> Trainer::solve(const DualProblem& pb, const SvmParams& params, KernelRows&, SvmTimes& times) {
  const std::size_t k = solved_.size();
  const auto n = pb.y.size();
  BinarySolution s;
  if (k < restored_.size()) {
    if (restored_[k].alpha.size() != n) throw InputError("the checkpoint's svm problems are not this training's");
    s = restored_[k];
  } else if (resume_alpha_) {
    if (resume_alpha_->size() != n) throw InputError("the checkpoint's svm problem is not this training's");
    DualProblem warm = pb;
    warm.alpha0 = std::move(*resume_alpha_);
    resume_alpha_.reset();
    log::info("accel coordinator") << "svm problem " << k + 1 << " resumed from the checkpoint's multipliers";
    s = co_await solve_distributed(warm, params, times, members_);
  } else {
    s = co_await solve_distributed(pb, params, times, members_);
  }
  solved_.push_back(s);
  co_return s;
}

void Trainer::resume(std::vector<BinarySolution> solved, std::optional<std::vector<double>> alpha) {
  restored_ = std::move(solved);
  resume_alpha_ = std::move(alpha);
}

Task<BinarySolution> solve_distributed(const DualProblem& pb, const SvmParams& params, SvmTimes& times,
                                       Members& members) {
  MemberSource src(pb, members);
  co_return co_await solve_batch_with(pb, params, src, times);
}

}  // namespace accel::svm_parallel
