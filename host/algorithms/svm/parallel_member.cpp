// Parallel SMO across processes: the members' half (Member), which keeps
// the gradients of its own rows and applies the coordinator's decisions.
// See accel/svm_parallel.hpp for the design; the coordinator's half is
// member_source.cpp.
#include "accel/svm_parallel.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <thread>
#include <unordered_map>

#include "accel/error.hpp"
#include "accel/faults.hpp"
#include "solver_state.hpp"

namespace accel::svm_parallel {

using namespace svm_detail;

struct Member::Impl {
  const LabeledCsr& data;
  SvmParams params;
  std::vector<Device*> devices;
  std::uint32_t id;

  DualProblem pb;  // the problem being solved; s refers to its y and p
  CsrMatrix sub;   // the problem's rows when they are a proper subset (multi-class pairs)
  std::int64_t q = 0;
  std::unique_ptr<State> s;
  std::unique_ptr<KernelRows> kr;
  std::vector<std::int32_t> mine;  // own variables, ascending
  std::vector<std::int32_t> last_ws;
  std::vector<char> is_active;     // per variable
  bool report_all = false;
  std::vector<std::int32_t> block_vars;
  std::vector<float> block;
  std::vector<double> block_diag;
  double rows_seconds = 0;
  long long rows_ops = 0;  // Rows ops this member got: where a test's slowdown starts (faults.hpp)

  Impl(const LabeledCsr& d, SvmParams p, std::vector<Device*> devs, std::uint32_t member)
      : data(d), params(std::move(p)), devices(std::move(devs)), id(member) {}

  std::int64_t n() const { return static_cast<std::int64_t>(pb.y.size()); }
  std::int64_t row(std::int64_t v) const { return pb.rows.empty() ? v : pb.rows[v]; }

  std::vector<std::int32_t> own_of(const std::vector<Range>& owners) const {
    std::vector<std::int32_t> out;
    for (std::int64_t v = 0; v < n(); ++v)
      for (const Range& r : owners)
        if (r.member == id && row(v) >= r.begin && row(v) < r.end) {
          out.push_back(static_cast<std::int32_t>(v));
          break;
        }
    return out;
  }

  void set_active(std::vector<std::int32_t> active) {
    for (const std::int32_t k : s->active) is_active[k] = 0;
    s->active = std::move(active);
    for (const std::int32_t k : s->active) is_active[k] = 1;
    kr->set_active(s->active);
  }

  // G_k = p_k + y_k sum_j y_j alpha_j K(x_j, x_k) for the variables `targets`.
  void gradient_from_alpha(const std::vector<std::int32_t>& targets) {
    std::vector<std::int32_t> support;
    std::vector<double> c;
    for (std::int64_t j = 0; j < n(); ++j)
      if (s->alpha[j] != 0) {
        support.push_back(static_cast<std::int32_t>(j));
        c.push_back(s->y[j] * s->alpha[j]);
      }
    const std::vector<double> acc = kernel_sums(*kr, support, c, targets, false);
    for (std::size_t b = 0; b < targets.size(); ++b) s->G[targets[b]] = s->p[targets[b]] + s->y[targets[b]] * acc[b];
  }

  void start(const Op& op) {
    pb = op.problem;
    q = op.q;
    s = std::make_unique<State>(pb);
    // The kernel over the same matrix single-node svm_train builds for the
    // problem (the CPU kernel splits columns by how many of the matrix's
    // rows use them, so the matrix decides the arithmetic): a pair's rows
    // copied out as multiclass.cpp does; the whole set, through the
    // variables' rows, otherwise (two classes, one-class, SVR).
    std::vector<std::int32_t> row_of;
    const bool subset = !pb.rows.empty() && static_cast<std::int64_t>(pb.rows.size()) < data.x.rows;
    sub = CsrMatrix{};
    if (subset) {
      for (const std::int32_t r : pb.rows) sub.add_row_from(data.x, r);
      sub.cols = data.x.cols;
    } else if (!pb.rows.empty()) {
      for (std::size_t v = 0; v < pb.rows.size() && row_of.empty(); ++v)
        if (pb.rows[v] != static_cast<std::int32_t>(v)) row_of = pb.rows;
    }
    kr = std::make_unique<KernelRows>(subset ? sub : data.x, params, devices, std::move(row_of));
    kr->set_held_calls(1);  // a round is done with its rows when the next asks for its own
    is_active.assign(n(), 0);
    s->active.clear();
    mine = own_of(op.owners);
    set_active(mine);
    last_ws.clear();
    if (!pb.alpha0.empty() && !mine.empty()) gradient_from_alpha(mine);
    s->alpha_ref = s->alpha;
    s->G_ref = s->G;
  }

  // G_k += y_k sum_a c_a K(x_ws[a], x_k) over the own active variables.
  void step(const Op& op) {
    std::vector<double> c(op.ws.size());
    for (std::size_t a = 0; a < op.ws.size(); ++a) {
      c[a] = s->y[op.ws[a]] * (op.alpha[a] - s->alpha[op.ws[a]]);
      s->alpha[op.ws[a]] = op.alpha[a];
    }
    last_ws = op.ws;
    const std::int64_t m = static_cast<std::int64_t>(s->active.size());
    if (m == 0) return;
    const std::vector<const float*> rows = kr->rows(op.ws);
    std::vector<double> acc(m, 0.0);
    accumulate_rows(rows, c, m, acc.data());
    for (std::int64_t b = 0; b < m; ++b) s->G[s->active[b]] += s->y[s->active[b]] * acc[b];
  }

  // Alg. 6 for the own variables outside the active set, then all active.
  void reconstruct_own() {
    std::vector<std::int32_t> shrunk;
    for (const std::int32_t k : mine)
      if (!is_active[k]) shrunk.push_back(k);
    if (!shrunk.empty()) {
      std::vector<std::int32_t> moved;
      std::vector<double> c;
      for (std::int64_t k = 0; k < n(); ++k)
        if (s->alpha[k] != s->alpha_ref[k]) {
          moved.push_back(static_cast<std::int32_t>(k));
          c.push_back(s->y[k] * (s->alpha[k] - s->alpha_ref[k]));
        }
      const std::vector<double> acc = kernel_sums(*kr, moved, c, shrunk, true);
      for (std::size_t b = 0; b < shrunk.size(); ++b)
        s->G[shrunk[b]] = s->G_ref[shrunk[b]] + s->y[shrunk[b]] * acc[b];
    }
    s->alpha_ref = s->alpha;
    s->G_ref = s->G;
    set_active(mine);
  }

  // New owners: the own gradients are made exact; the gained variables'
  // are the coordinator's where it sent them (their old owner's exact
  // values), else computed from the multipliers (Alg. 6 from zero); all
  // active.
  void assign(const Op& op) {
    std::vector<std::int32_t> now = own_of(op.owners);
    if (now == mine) return;
    reconstruct_own();
    std::vector<std::int32_t> gained, rebuild;
    std::set_difference(now.begin(), now.end(), mine.begin(), mine.end(), std::back_inserter(gained));
    mine = std::move(now);
    set_active({});
    std::unordered_map<std::int32_t, double> sent(op.gradients.begin(), op.gradients.end());
    for (const std::int32_t k : gained) {
      const auto it = sent.find(k);
      if (it == sent.end()) rebuild.push_back(k);
      else s->G[k] = it->second;
    }
    if (!rebuild.empty()) gradient_from_alpha(rebuild);
    s->alpha_ref = s->alpha;
    s->G_ref = s->G;
    set_active(mine);
  }

  void apply(const Op& op) {
    if (op.kind != Op::Start && !s) throw InputError("svm: a decision before its problem started");
    // Every gradient goes in the reports after a Report until the solver
    // moves on: an Assign in between (a member lost or rows moved while the
    // coordinator collects them) keeps them coming, from the new owners.
    if (op.kind != Op::Report && op.kind != Op::Assign) report_all = false;
    if (op.kind != Op::Rows) {  // a block answers only the Rows op just before the report
      block_vars.clear();
      block.clear();
      block_diag.clear();
      rows_seconds = 0;
    }
    switch (op.kind) {
      case Op::Start: return start(op);
      case Op::Step: return step(op);
      case Op::Shrink: {
        Extremes e;
        e.gmax = op.gmax;
        e.gmin = op.gmin;
        const std::vector<std::int32_t> before = s->active;
        shrink(*s, e);
        std::vector<std::int32_t> keep = std::move(s->active);
        s->active = before;  // set_active clears the flags of what it replaces
        set_active(std::move(keep));
        return;
      }
      case Op::Reconstruct: return reconstruct_own();
      case Op::Assign: return assign(op);
      case Op::Report:
        reconstruct_own();
        report_all = true;
        return;
      case Op::Rows: return rows(op);
    }
  }

  // The working set's rows over the own active variables (kept in the
  // cache for the Step that follows), and this member's columns of the
  // q x q block.
  void rows(const Op& op) {
    block_vars.clear();
    block.clear();
    block_diag.clear();
    rows_seconds = 0;
    const bool slowed = faults().rows.at(rows_ops++);
    if (s->active.empty()) return;
    const auto t0 = clock_type::now();
    const std::vector<const float*> r = kr->rows(op.ws);
    rows_seconds = since(t0);
    if (slowed) rows_seconds = faults().rows.slow(rows_seconds);
    for (const std::int32_t k : op.ws) {
      if (!is_active[k]) continue;
      const auto slot = std::lower_bound(s->active.begin(), s->active.end(), k) - s->active.begin();
      block_vars.push_back(k);
      block_diag.push_back(kr->diag(k));
      for (std::size_t a = 0; a < op.ws.size(); ++a) block.push_back(r[a][slot]);
    }
  }

  Report report() const {
    Report r;
    if (!s) return r;
    r.owned = static_cast<std::int64_t>(mine.size());
    r.active = static_cast<std::int64_t>(s->active.size());
    const int signs[3] = {0, 1, -1};
    for (int t = 0; t < 3; ++t) {
      const Extremes e = extremes(*s, signs[t]);
      r.ext[t] = {e.gmax, e.gmin, e.i, e.j};
    }
    for (const std::int32_t k : s->active) {
      if (s->in_up(k)) r.up.emplace_back(s->v(k), k);
      if (s->in_low(k)) r.low.emplace_back(s->v(k), k);
    }
    best_up(r.up, static_cast<std::size_t>(q));
    best_low(r.low, static_cast<std::size_t>(q));
    for (const std::int32_t k : last_ws)
      if (is_active[k]) r.ws_g.emplace_back(k, s->G[k]);
    if (report_all)
      for (const std::int32_t k : mine) r.all_g.emplace_back(k, s->G[k]);
    r.block_vars = block_vars;
    r.block = block;
    r.block_diag = block_diag;
    r.seconds = rows_seconds;
    return r;
  }
};

Member::Member(const LabeledCsr& data, SvmParams params, std::vector<Device*> devices, std::uint32_t id)
    : impl_(std::make_unique<Impl>(data, std::move(params), std::move(devices), id)) {}
Member::~Member() = default;

void Member::check(const std::vector<Op>& ops) const {
  std::int64_t n = impl_->s ? impl_->n() : -1;
  for (const Op& op : ops) {
    if (op.kind == Op::Start) {
      const auto& pb = op.problem;
      n = static_cast<std::int64_t>(pb.y.size());
      if (static_cast<std::int64_t>(pb.p.size()) != n || (!pb.alpha0.empty() && static_cast<std::int64_t>(pb.alpha0.size()) != n) ||
          (!pb.rows.empty() && static_cast<std::int64_t>(pb.rows.size()) != n) || op.q < 2)
        throw InputError("svm: a problem of inconsistent sizes");
      for (const auto r : pb.rows)
        if (r < 0 || r >= impl_->data.x.rows) throw InputError("svm: a problem names row " + std::to_string(r));
      if (pb.rows.empty() && n > impl_->data.x.rows) throw InputError("svm: a problem larger than the training set");
    } else if (n < 0) {
      throw InputError("svm: a decision before its problem started");
    }
    for (const auto& [k, g] : op.gradients)
      if (k < 0 || k >= n || !std::isfinite(g)) throw InputError("svm: an assignment names variable " + std::to_string(k));
    if (op.kind == Op::Step || op.kind == Op::Rows) {
      if (op.kind == Op::Step && op.ws.size() != op.alpha.size()) throw InputError("svm: a step of inconsistent sizes");
      for (const auto k : op.ws)
        if (k < 0 || k >= n) throw InputError("svm: a step names variable " + std::to_string(k));
    }
  }
}

void Member::apply(const std::vector<Op>& ops) {
  for (const Op& op : ops) impl_->apply(op);
}

Report Member::report() const { return impl_->report(); }

}  // namespace accel::svm_parallel
