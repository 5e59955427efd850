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
#include <limits>
#include <string>
#include <thread>
#include <unordered_map>

#include "accel/clock.hpp"
#include "accel/error.hpp"
#include "accel/faults.hpp"
#include "solver_state.hpp"

namespace accel::svm_parallel {

using namespace svm_detail;

namespace {

// Keeps rows [0, rows) of x.
void truncate(CsrMatrix& x, std::int64_t rows) {
  x.rows = rows;
  x.row_ptr.resize(rows + 1);
  x.col_idx.resize(x.row_ptr[rows]);
  x.values.resize(x.row_ptr[rows]);
}

// Sorted a minus sorted b.
std::vector<std::int32_t> minus(const std::vector<std::int32_t>& a, const std::vector<std::int32_t>& b) {
  std::vector<std::int32_t> out;
  std::set_difference(a.begin(), a.end(), b.begin(), b.end(), std::back_inserter(out));
  return out;
}

}  // namespace

struct Member::Impl {
  std::unique_ptr<RowSource> own_source;  // the LabeledCsr constructor's
  RowSource& src;
  const CsrMatrix* all;  // every row (held), or null (sharded)
  SvmParams params;
  std::vector<Device*> devices;
  std::uint32_t id;

  DualProblem pb;  // the problem being solved; s refers to its y and p
  // The kernel's matrix. Held: the problem's rows when they are a proper
  // subset (multi-class pairs), else unused (the whole set). Sharded: the
  // own rows of the problem, then the guests (the working set's, then
  // the supplied ones).
  CsrMatrix sub;
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

  // Sharded only. The rows read from storage, by owned range.
  struct Held {
    std::int64_t begin = 0, end = 0;
    CsrMatrix x;
  };
  std::vector<Held> held;
  std::unordered_map<std::int64_t, std::int32_t> own_at;  // own training-set row -> row of sub
  std::vector<std::int32_t> row_in_sub;  // per variable: its row of sub, or -1
  std::int64_t own_in_sub = 0;           // sub's rows that are own
  RowBlock ws_guests, supply_guests;

  // Making the own gradients exact (a reconstruction, an assignment, a
  // problem started from multipliers): the targets and their sums so far.
  // Sources whose rows this member holds are summed at once; the others
  // (sharded) as they are supplied.
  struct Settle {
    bool on = false;
    std::vector<std::int32_t> shrunk, stale;  // Alg. 6 from the reference; rebuilt from the multipliers
    std::vector<double> shrunk_acc, stale_acc;
    std::vector<std::int32_t> need;   // sources not supplied yet, ascending
    std::vector<std::int32_t> local;  // sources this member holds, ascending
    std::size_t local_done = 0;       // of which summed
    // Held and batched (Member::bound_settles): each target list's sources
    // and coefficients, summed a kernel_sums batch per op.
    struct Terms {
      std::vector<std::int32_t> src;
      std::vector<double> c;
      std::size_t done = 0;
      std::size_t left() const { return src.size() - done; }
    };
    Terms moved, support;
    bool batched = false;
  } settle;
  bool batch_settles = false;  // Member::bound_settles
  std::vector<std::int32_t> stale;  // own variables without a gradient (gained, or started from multipliers)
  RowBlock rows_out;                // the wanted own rows, for the next report

  Impl(RowSource& rows, SvmParams p, std::vector<Device*> devs, std::uint32_t member)
      : src(rows), all(rows.all()), params(std::move(p)), devices(std::move(devs)), id(member) {}

  bool sharded() const { return all == nullptr; }
  std::int64_t n() const { return static_cast<std::int64_t>(pb.y.size()); }
  std::int64_t row(std::int64_t v) const { return pb.rows.empty() ? v : pb.rows[v]; }
  // Whether this member holds variable v's row (every row, held).
  bool holds(std::int32_t v) const { return !sharded() || row_in_sub[v] >= 0; }
  bool owns(std::int32_t v) const { return std::binary_search(mine.begin(), mine.end(), v); }

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

  // --- The kernel's matrix ----------------------------------------------

  // Held: the matrix single-node svm_train builds for the problem (the CPU
  // kernel splits columns by how many of the matrix's rows use them, so
  // the matrix decides the arithmetic): a pair's rows copied out as
  // multiclass.cpp does; the whole set, through the variables' rows,
  // otherwise (two classes, one-class, SVR).
  void open_held_kernel() {
    std::vector<std::int32_t> row_of;
    const bool subset = !pb.rows.empty() && static_cast<std::int64_t>(pb.rows.size()) < all->rows;
    sub = CsrMatrix{};
    if (subset) {
      for (const std::int32_t r : pb.rows) sub.add_row_from(*all, r);
      sub.cols = all->cols;
    } else if (!pb.rows.empty()) {
      for (std::size_t v = 0; v < pb.rows.size() && row_of.empty(); ++v)
        if (pb.rows[v] != static_cast<std::int32_t>(v)) row_of = pb.rows;
    }
    kr = std::make_unique<KernelRows>(subset ? sub : *all, params, devices, std::move(row_of));
  }

  // Sharded: the owned ranges of `owners` read (rows already held are
  // kept, the others read from storage), and the rest dropped.
  void hold(const std::vector<Range>& owners) {
    std::vector<Held> next;
    for (const Range& r : owners) {
      if (r.member != id || r.end <= r.begin) continue;
      Held h{r.begin, r.end, {}};
      h.x.cols = src.cols();
      for (std::int64_t at = r.begin; at < r.end;) {
        if (const auto [x, i] = own_row(at); x) {
          h.x.add_row_from(*x, i);
          ++at;
        } else {
          std::int64_t to = at + 1;
          while (to < r.end && !own_row(to).first) ++to;
          const std::int64_t before = h.x.rows;
          src.read(at, to, h.x);
          if (h.x.rows != before + (to - at)) throw InputError("svm: rows [" + std::to_string(at) + ", " +
                                                               std::to_string(to) + ") could not be read");
          at = to;
        }
      }
      next.push_back(std::move(h));
    }
    held = std::move(next);
  }

  const Held* held_at(std::int64_t r) const {
    for (const Held& h : held)
      if (r >= h.begin && r < h.end) return &h;
    return nullptr;
  }

  // Where own training-set row r is: its held range, or the kernel's
  // matrix (held rows are dropped where it has every one: build_sub).
  std::pair<const CsrMatrix*, std::int64_t> own_row(std::int64_t r) const {
    if (const Held* h = held_at(r)) return {&h->x, r - h->begin};
    if (const auto it = own_at.find(r); it != own_at.end()) return {&sub, it->second};
    return {nullptr, 0};
  }

  // Sharded: sub = the own variables' rows (each row once, in variable
  // order), then the guests; every variable mapped to its row or to none.
  void build_sub(bool fresh) {
    truncate(sub, 0);
    sub.cols = src.cols();
    std::vector<std::int32_t> row_of(n(), -1);
    own_at.clear();
    for (const std::int32_t v : mine) {
      const auto [it, added] = own_at.emplace(row(v), static_cast<std::int32_t>(sub.rows));
      if (added) {
        const Held* h = held_at(row(v));
        if (!h) throw std::logic_error("svm: an own variable's row is not held");
        sub.add_row_from(h->x, row(v) - h->begin);
      }
      row_of[v] = it->second;
    }
    own_in_sub = sub.rows;
    // Every held row in the problem's matrix (two classes, one-class, SVR;
    // not a pair of classes): one copy of the rows is enough.
    std::int64_t held_rows = 0;
    for (const Held& h : held) held_rows += h.end - h.begin;
    if (held_rows == static_cast<std::int64_t>(own_at.size())) held.clear();
    // Room for a round's guests (the working set's, a chunk supplied), so
    // that they come and go without moving the matrix: the device keeps
    // what it derived from the own rows (KernelRows::rows_changed).
    const std::int64_t guests = q + kSupplyRows, per_row = sub.rows > 0 ? 2 * sub.nnz() / sub.rows + 1 : std::min<std::int64_t>(sub.cols, 4096);
    sub.row_ptr.reserve(sub.rows + guests + 1);
    sub.col_idx.reserve(sub.nnz() + guests * per_row);
    sub.values.reserve(sub.nnz() + guests * per_row);
    add_guests(ws_guests, row_of);
    add_guests(supply_guests, row_of);
    if (fresh) {
      kr = std::make_unique<KernelRows>(sub, params, devices, row_of);
    } else {
      kr->rows_changed(0);
      for (std::int64_t v = 0; v < n(); ++v)
        if (row_of[v] != row_in_sub[v]) kr->remap(static_cast<std::int32_t>(v), row_of[v]);
    }
    row_in_sub = std::move(row_of);
  }

  // The guests that are not own rows, appended to sub and mapped.
  void add_guests(const RowBlock& g, std::vector<std::int32_t>& row_of) {
    for (std::size_t i = 0; i < g.vars.size(); ++i) {
      const std::int32_t v = g.vars[i];
      if (row_of[v] >= 0) continue;
      row_of[v] = static_cast<std::int32_t>(sub.rows);
      sub.add_row_from(g.x, static_cast<std::int64_t>(i));
    }
  }

  // New guests of one kind (the working set's, or supplied): sub from the
  // first guest on is rebuilt; variables that leave are unmapped.
  void set_guests(RowBlock& slot, RowBlock rows) {
    slot = std::move(rows);
    const std::int64_t first = own_in_sub;
    truncate(sub, first);
    std::vector<std::int32_t> row_of = row_in_sub;
    for (std::int64_t v = 0; v < n(); ++v)
      if (row_of[v] >= first) row_of[v] = -1;
    add_guests(ws_guests, row_of);
    add_guests(supply_guests, row_of);
    kr->rows_changed(first);
    for (std::int64_t v = 0; v < n(); ++v)
      if (row_of[v] != row_in_sub[v] || row_of[v] >= first) kr->remap(static_cast<std::int32_t>(v), row_of[v]);
    row_in_sub = std::move(row_of);
  }

  // --- Making gradients exact ------------------------------------------

  // Starts making every own gradient exact: Alg. 6 for the shrunk own
  // variables (from the reference point, over the multipliers that moved
  // since), and G = p + Q alpha for the stale ones (over the support). The
  // sources this member holds are summed now; it then waits for the rows
  // of the others (sharded), or is done.
  void begin_settle() {
    Settle& st = settle;
    st = Settle{};
    st.on = true;
    st.stale = stale;
    for (const std::int32_t k : mine)
      if (!is_active[k] && !std::binary_search(stale.begin(), stale.end(), k)) st.shrunk.push_back(k);
    st.shrunk_acc.assign(st.shrunk.size(), 0.0);
    st.stale_acc.assign(st.stale.size(), 0.0);
    for (std::int64_t k = 0; k < n(); ++k) {
      const auto v = static_cast<std::int32_t>(k);
      if (!source(v)) continue;
      if (holds(v)) st.local.push_back(v);
      else st.need.push_back(v);
    }
    if (!st.need.empty()) return;
    if (!batch_settles || sharded()) {
      sum_sources(st.local);
      return end_settle();
    }
    for (const std::int32_t v : st.local) {
      if (!st.shrunk.empty() && s->alpha[v] != s->alpha_ref[v]) {
        st.moved.src.push_back(v);
        st.moved.c.push_back(s->y[v] * (s->alpha[v] - s->alpha_ref[v]));
      }
      if (!st.stale.empty() && s->alpha[v] != 0) {
        st.support.src.push_back(v);
        st.support.c.push_back(s->y[v] * s->alpha[v]);
      }
    }
    st.batched = true;
    continue_settle();
  }

  // One kernel_sums batch of the held sources (Alg. 6's first, then the
  // stale gradients'): batches in order are one call's arithmetic, so the
  // gradients are those of a settle done at once. Ends the settle after
  // the last.
  void continue_settle() {
    Settle& st = settle;
    auto batch = [&](Settle::Terms& t, const std::vector<std::int32_t>& targets, std::vector<double>& acc,
                     bool complete) {
      if (t.left() == 0) return false;
      const std::size_t to = std::min(t.src.size(), t.done + kernel_sums_batch(static_cast<std::int64_t>(targets.size())));
      const auto from = static_cast<std::ptrdiff_t>(t.done), end = static_cast<std::ptrdiff_t>(to);
      add_kernel_sums(*kr, {t.src.begin() + from, t.src.begin() + end}, {t.c.begin() + from, t.c.begin() + end},
                      targets, complete, acc);
      t.done = to;
      return true;
    };
    if (!batch(st.moved, st.shrunk, st.shrunk_acc, true)) batch(st.support, st.stale, st.stale_acc, false);
    if (pending() == 0) end_settle();
  }

  std::int64_t pending() const {
    return settle.batched ? static_cast<std::int64_t>(settle.moved.left() + settle.support.left()) : 0;
  }

  // The own sources below `bound` not summed yet, merged in order with
  // `more`: every source is summed in ascending order, as single-node
  // reconstruction sums them, whatever chunks the others come in.
  std::vector<std::int32_t> next_sources(std::int32_t bound, const std::vector<std::int32_t>& more) {
    Settle& st = settle;
    std::size_t to = st.local_done;
    while (to < st.local.size() && st.local[to] < bound) ++to;
    std::vector<std::int32_t> out;
    std::merge(st.local.begin() + static_cast<std::ptrdiff_t>(st.local_done),
               st.local.begin() + static_cast<std::ptrdiff_t>(to), more.begin(), more.end(), std::back_inserter(out));
    st.local_done = to;
    return out;
  }

  // Whether variable v's row is a source of the settle in progress.
  bool source(std::int32_t v) const {
    return (!settle.shrunk.empty() && s->alpha[v] != s->alpha_ref[v]) || (!settle.stale.empty() && s->alpha[v] != 0);
  }

  // The sources' kernel values against the targets, added to the sums.
  // Alg. 6's values also complete the sources' cached rows, as single-node
  // reconstruction does.
  void sum_sources(const std::vector<std::int32_t>& vars) {
    Settle& st = settle;
    std::vector<std::int32_t> moved, support;
    std::vector<double> cm, cs;
    for (const std::int32_t v : vars) {
      if (!st.shrunk.empty() && s->alpha[v] != s->alpha_ref[v]) {
        moved.push_back(v);
        cm.push_back(s->y[v] * (s->alpha[v] - s->alpha_ref[v]));
      }
      if (!st.stale.empty() && s->alpha[v] != 0) {
        support.push_back(v);
        cs.push_back(s->y[v] * s->alpha[v]);
      }
    }
    if (!moved.empty()) {
      const std::vector<double> acc = kernel_sums(*kr, moved, cm, st.shrunk, true);
      for (std::size_t b = 0; b < acc.size(); ++b) st.shrunk_acc[b] += acc[b];
    }
    if (!support.empty()) {
      const std::vector<double> acc = kernel_sums(*kr, support, cs, st.stale, false);
      for (std::size_t b = 0; b < acc.size(); ++b) st.stale_acc[b] += acc[b];
    }
  }

  // Every source summed: the targets' gradients, a new reference point,
  // and every own variable active.
  void end_settle() {
    Settle& st = settle;
    for (std::size_t b = 0; b < st.shrunk.size(); ++b)
      s->G[st.shrunk[b]] = s->G_ref[st.shrunk[b]] + s->y[st.shrunk[b]] * st.shrunk_acc[b];
    for (std::size_t b = 0; b < st.stale.size(); ++b)
      s->G[st.stale[b]] = s->p[st.stale[b]] + s->y[st.stale[b]] * st.stale_acc[b];
    settle = Settle{};
    stale.clear();
    s->alpha_ref = s->alpha;
    s->G_ref = s->G;
    set_active(mine);
  }

  // Supplied rows: those of the sources still needed are summed (as
  // guests while they are), the rest ignored.
  void supply(const Op& op) {
    if (settle.on && settle.batched) return continue_settle();
    if (!settle.on || op.rows.empty()) return;
    std::vector<std::pair<std::int32_t, std::size_t>> got;  // (variable, its row in op.rows), ascending
    for (std::size_t i = 0; i < op.rows.vars.size(); ++i) {
      const std::int32_t v = op.rows.vars[i];
      const auto it = std::lower_bound(settle.need.begin(), settle.need.end(), v);
      if (it == settle.need.end() || *it != v) continue;
      settle.need.erase(it);
      got.emplace_back(v, i);
    }
    if (got.empty()) return;
    std::sort(got.begin(), got.end());
    RowBlock use;
    use.x.cols = src.cols();
    for (const auto& [v, i] : got) {
      use.vars.push_back(v);
      use.x.add_row_from(op.rows.x, static_cast<std::int64_t>(i));
    }
    const std::int32_t bound = settle.need.empty() ? std::numeric_limits<std::int32_t>::max() : settle.need.front();
    const std::vector<std::int32_t> vars = next_sources(bound, use.vars);
    set_guests(supply_guests, std::move(use));
    sum_sources(vars);
    set_guests(supply_guests, {});
    if (settle.need.empty()) {
      sum_sources(next_sources(std::numeric_limits<std::int32_t>::max(), {}));
      end_settle();
    }
  }

  // The wanted variables' rows that this member owns, for its report.
  void attach(const std::vector<std::int32_t>& want) {
    rows_out = RowBlock{};
    rows_out.x.cols = src.cols();
    for (const std::int32_t v : want) {
      if (!sharded() || !owns(v)) continue;
      const auto [x, i] = own_row(row(v));
      if (!x) continue;
      rows_out.vars.push_back(v);
      rows_out.x.add_row_from(*x, i);
    }
  }

  // --- The ops ----------------------------------------------------------

  void start(const Op& op) {
    pb = op.problem;
    q = op.q;
    s = std::make_unique<State>(pb);
    settle = Settle{};
    ws_guests = supply_guests = RowBlock{};
    mine = own_of(op.owners);
    if (sharded()) {
      hold(op.owners);
      build_sub(true);
    } else {
      open_held_kernel();
    }
    kr->set_held_calls(1);  // a round is done with its rows when the next asks for its own
    is_active.assign(n(), 0);
    s->active.clear();
    last_ws.clear();
    // Started from multipliers (a resumed or re-started problem): every own
    // gradient from them.
    stale = pb.alpha0.empty() ? std::vector<std::int32_t>{} : mine;
    set_active(minus(mine, stale));
    if (!stale.empty()) begin_settle();
  }

  // G_k += y_k sum_a c_a K(x_ws[a], x_k) over the own active variables. A
  // member without a row of the set (it missed the Rows op that brought
  // them) cannot: its gradients are rebuilt from the new multipliers.
  void step(const Op& op) {
    std::vector<double> c(op.ws.size());
    for (std::size_t a = 0; a < op.ws.size(); ++a) {
      c[a] = s->y[op.ws[a]] * (op.alpha[a] - s->alpha[op.ws[a]]);
      s->alpha[op.ws[a]] = op.alpha[a];
    }
    last_ws = op.ws;
    const std::int64_t m = static_cast<std::int64_t>(s->active.size());
    if (m > 0 && !std::all_of(op.ws.begin(), op.ws.end(), [&](std::int32_t v) { return holds(v); })) {
      stale = mine;
      set_active({});
      begin_settle();
      return;
    }
    if (m > 0) {
      const std::vector<const float*> rows = kr->rows(op.ws);
      std::vector<double> acc(m, 0.0);
      accumulate_rows(rows, c, m, acc.data());
      for (std::int64_t b = 0; b < m; ++b) s->G[s->active[b]] += s->y[s->active[b]] * acc[b];
    }
    if (settle.on) begin_settle();  // the sums so far were over the old multipliers
  }

  // New owners: the gained variables take the gradients the coordinator
  // sent (their old owner's exact values) or are rebuilt from the
  // multipliers (stale); then every own gradient is made exact and active.
  void assign(const Op& op) {
    std::vector<std::int32_t> now = own_of(op.owners);
    if (now == mine && !settle.on) return;
    const std::vector<std::int32_t> gained = minus(now, mine);
    std::vector<std::int32_t> kept;
    std::set_intersection(s->active.begin(), s->active.end(), now.begin(), now.end(), std::back_inserter(kept));
    stale = minus(stale, minus(mine, now));
    mine = std::move(now);
    if (sharded()) {
      hold(op.owners);
      build_sub(false);
    }
    std::unordered_map<std::int32_t, double> sent(op.gradients.begin(), op.gradients.end());
    for (const std::int32_t k : gained) {
      const auto it = sent.find(k);
      if (it == sent.end()) {
        stale.push_back(k);
      } else {
        s->G[k] = it->second;
        kept.push_back(k);
      }
    }
    std::sort(stale.begin(), stale.end());
    std::sort(kept.begin(), kept.end());
    set_active(std::move(kept));
    begin_settle();
  }

  void apply(const Op& op) {
    if (op.kind != Op::Start && !s) throw InputError("svm: a decision before its problem started");
    // Every gradient goes in the reports after a Report until the solver
    // moves on: an Assign or a Supply in between (a member lost, rows moved
    // or supplied while the coordinator collects them) keeps them coming,
    // from the new owners.
    if (op.kind != Op::Report && op.kind != Op::Assign && op.kind != Op::Supply) report_all = false;
    if (op.kind != Op::Rows) {  // a block answers only the Rows op just before the report
      block_vars.clear();
      block.clear();
      block_diag.clear();
      rows_seconds = 0;
    }
    rows_out = RowBlock{};
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
      case Op::Reconstruct: return begin_settle();
      case Op::Assign: return assign(op);
      case Op::Report:
        begin_settle();
        report_all = true;
        return;
      case Op::Rows: return rows(op);
      case Op::Supply:
        supply(op);
        attach(op.want);
        return;
    }
  }

  // The working set's rows over the own active variables (kept in the
  // cache for the Step that follows), and this member's columns of the
  // q x q block. Sharded, the set's rows came with the op.
  void rows(const Op& op) {
    block_vars.clear();
    block.clear();
    block_diag.clear();
    rows_seconds = 0;
    const bool slowed = faults().rows.at(rows_ops++);
    if (sharded()) {
      RowBlock guests;
      guests.x.cols = src.cols();
      for (std::size_t i = 0; i < op.rows.vars.size(); ++i)
        if (!owns(op.rows.vars[i])) {
          guests.vars.push_back(op.rows.vars[i]);
          guests.x.add_row_from(op.rows.x, static_cast<std::int64_t>(i));
        }
      set_guests(ws_guests, std::move(guests));
    }
    if (s->active.empty()) return;
    for (const std::int32_t v : op.ws)
      if (!holds(v)) throw InputError("svm: the working set's row of variable " + std::to_string(v) + " did not come");
    // accel::Clock, not steady_clock: the coordinator re-splits the rows by
    // this speed, so in the simulator it must be virtual time (none passes
    // while computing), or a seed's run would depend on the host's load.
    const auto t0 = Clock::now();
    const std::vector<const float*> r = kr->rows(op.ws);
    rows_seconds = std::chrono::duration<double>(Clock::now() - t0).count();
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
    if (report_all && !settle.on)
      for (const std::int32_t k : mine) r.all_g.emplace_back(k, s->G[k]);
    r.block_vars = block_vars;
    r.block = block;
    r.block_diag = block_diag;
    r.seconds = rows_seconds;
    r.rows = rows_out;
    if (sharded() && !settle.on && static_cast<std::int64_t>(mine.size()) < n()) likely_rows(r);
    r.need = settle.need;
    r.pending = pending();
    return r;
  }

  // Sharded: the rows of the own candidates the next working set most
  // likely takes, so that it needs no round to fetch them: the pair, and
  // the best q/4 + 2 of each side (the set takes q/2 new ones alternately
  // from the two sides' merged lists, after the pair). Rows of the last
  // set are the coordinator's already.
  void likely_rows(Report& r) const {
    std::vector<std::int32_t> vars;
    for (const Extreme& e : r.ext)
      for (const std::int32_t k : {e.i, e.j})
        if (k >= 0) vars.push_back(k);
    const std::size_t depth = static_cast<std::size_t>(q / 4 + 2);
    for (const auto* side : {&r.up, &r.low})
      for (std::size_t a = 0; a < side->size() && a < depth; ++a) vars.push_back((*side)[a].second);
    std::sort(vars.begin(), vars.end());
    vars.erase(std::unique(vars.begin(), vars.end()), vars.end());
    std::vector<std::int32_t> last = last_ws;
    std::sort(last.begin(), last.end());
    for (const std::int32_t v : r.rows.vars) last.insert(std::upper_bound(last.begin(), last.end(), v), v);
    for (const std::int32_t v : vars) {
      if (!owns(v) || std::binary_search(last.begin(), last.end(), v)) continue;
      const auto [x, i] = own_row(row(v));
      if (!x) continue;
      r.rows.vars.push_back(v);
      r.rows.x.add_row_from(*x, i);
    }
    r.rows.x.cols = src.cols();
  }
};

Member::Member(RowSource& rows, SvmParams params, std::vector<Device*> devices, std::uint32_t id)
    : impl_(std::make_unique<Impl>(rows, std::move(params), std::move(devices), id)) {}

Member::Member(const LabeledCsr& data, SvmParams params, std::vector<Device*> devices, std::uint32_t id) {
  auto rows = std::make_unique<HeldRows>(data.x);
  impl_ = std::make_unique<Impl>(*rows, std::move(params), std::move(devices), id);
  impl_->own_source = std::move(rows);
}

Member::~Member() = default;

void Member::bound_settles() { impl_->batch_settles = true; }

void Member::hold(const std::vector<Range>& owners) {
  if (impl_->sharded()) impl_->hold(owners);
}

void Member::check(const std::vector<Op>& ops) const {
  const std::int64_t rows = impl_->src.rows(), cols = impl_->src.cols();
  std::int64_t n = impl_->s ? impl_->n() : -1;
  for (const Op& op : ops) {
    if (op.kind == Op::Start) {
      const auto& pb = op.problem;
      n = static_cast<std::int64_t>(pb.y.size());
      if (static_cast<std::int64_t>(pb.p.size()) != n || (!pb.alpha0.empty() && static_cast<std::int64_t>(pb.alpha0.size()) != n) ||
          (!pb.rows.empty() && static_cast<std::int64_t>(pb.rows.size()) != n) || op.q < 2)
        throw InputError("svm: a problem of inconsistent sizes");
      for (const auto r : pb.rows)
        if (r < 0 || r >= rows) throw InputError("svm: a problem names row " + std::to_string(r));
      if (pb.rows.empty() && n > rows) throw InputError("svm: a problem larger than the training set");
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
    for (const auto k : op.want)
      if (k < 0 || k >= n) throw InputError("svm: rows wanted of variable " + std::to_string(k));
    if (static_cast<std::int64_t>(op.rows.vars.size()) != op.rows.x.rows || op.rows.x.cols > cols)
      throw InputError("svm: rows of inconsistent sizes");
    for (const auto k : op.rows.vars)
      if (k < 0 || k >= n) throw InputError("svm: rows sent of variable " + std::to_string(k));
  }
}

void Member::apply(const std::vector<Op>& ops) {
  for (const Op& op : ops) impl_->apply(op);
}

Report Member::report() const { return impl_->report(); }

}  // namespace accel::svm_parallel
