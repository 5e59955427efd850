#include "svm_wire.hpp"

#include <climits>
#include <cmath>

#include "marks_wire.hpp"

namespace accel::cluster::svm_wire {
namespace {

void put_problem(Out& o, const DualProblem& pb) {
  o.array(pb.y);
  o.array(pb.p);
  o.array(pb.alpha0);
  o.put(pb.Cp);
  o.put(pb.Cn);
  o.put<std::uint8_t>(pb.nu);
  o.array(pb.rows);
}

DualProblem get_problem(In& i, std::int64_t max_vars) {
  DualProblem pb;
  const auto m = static_cast<std::uint64_t>(max_vars);
  pb.y = i.array<std::int8_t>(m);
  pb.p = i.exactly<double>(pb.y.size(), "linear term");
  pb.alpha0 = i.array<double>(m);
  pb.Cp = i.get<double>();
  pb.Cn = i.get<double>();
  pb.nu = i.get<std::uint8_t>() != 0;
  pb.rows = i.array<std::int32_t>(m);
  for (const auto v : pb.y)
    if (v != 1 && v != -1) throw InputError("svm problem with a label other than +1 / -1");
  if (!(pb.Cp > 0) || !(pb.Cn > 0)) throw InputError("svm problem with a bound that is not positive");
  return pb;
}

void put_owners(Out& o, const std::vector<svm_parallel::Range>& owners) {
  o.put<std::uint64_t>(owners.size());
  for (const auto& r : owners) {
    o.put(r.member);
    o.put(r.begin);
    o.put(r.end);
  }
}

std::vector<svm_parallel::Range> get_owners(In& i) {
  const auto n = i.get<std::uint64_t>();
  if (n > 4096) throw InputError("svm decision with too many owner ranges");
  std::vector<svm_parallel::Range> out(n);
  for (auto& r : out) {
    r.member = i.get<std::uint32_t>();
    r.begin = i.get<std::int64_t>();
    r.end = i.get<std::int64_t>();
    if (r.begin < 0 || r.end < r.begin) throw InputError("svm decision with an impossible owner range");
  }
  return out;
}

void put_rows(Out& o, const svm_parallel::RowBlock& b) {
  o.array(b.vars);
  o.put(b.x.cols);
  o.array(b.x.row_ptr);
  o.array(b.x.col_idx);
  o.array(b.x.values);
}

// Rows as CsrMatrix keeps them: offsets from 0 to the values' count,
// columns strictly increasing within a row and below cols, values finite.
svm_parallel::RowBlock get_rows(In& i, std::int64_t max_vars) {
  svm_parallel::RowBlock b;
  const auto m = static_cast<std::uint64_t>(max_vars);
  b.vars = i.array<std::int32_t>(m);
  b.x.cols = i.get<std::int64_t>();
  if (b.x.cols < 0 || b.x.cols > INT32_MAX) throw InputError("svm rows with an impossible width");
  b.x.row_ptr = i.exactly<std::int64_t>(b.vars.size() + 1, "row offsets");
  b.x.col_idx = i.array<std::int32_t>(std::uint64_t{1} << 32);
  b.x.values = i.exactly<float>(b.x.col_idx.size(), "row values");
  b.x.rows = static_cast<std::int64_t>(b.vars.size());
  const auto nnz = static_cast<std::int64_t>(b.x.values.size());
  if (b.x.row_ptr.front() != 0 || b.x.row_ptr.back() != nnz) throw InputError("svm rows with impossible offsets");
  for (std::int64_t r = 0; r < b.x.rows; ++r) {
    const std::int64_t lo = b.x.row_ptr[r], hi = b.x.row_ptr[r + 1];
    if (hi < lo || hi > nnz) throw InputError("svm rows with impossible offsets");
    for (std::int64_t k = lo; k < hi; ++k)
      if (b.x.col_idx[k] < 0 || b.x.col_idx[k] >= b.x.cols || (k > lo && b.x.col_idx[k] <= b.x.col_idx[k - 1]) ||
          !std::isfinite(b.x.values[k]))
        throw InputError("svm rows with a bad entry");
  }
  for (const auto v : b.vars)
    if (v < 0 || v >= max_vars) throw InputError("svm rows name a bad variable");
  return b;
}

void put_op(Out& o, const Op& op) {
  o.put<std::uint8_t>(op.kind);
  switch (op.kind) {
    case Op::Start:
      put_problem(o, op.problem);
      o.put(op.q);
      put_owners(o, op.owners);
      break;
    case Op::Step:
      o.array(op.ws);
      o.array(op.alpha);
      break;
    case Op::Rows:
      o.array(op.ws);
      put_rows(o, op.rows);
      break;
    case Op::Supply:
      put_rows(o, op.rows);
      o.array(op.want);
      break;
    case Op::Shrink:
      o.put(op.gmax);
      o.put(op.gmin);
      break;
    case Op::Assign: {
      put_owners(o, op.owners);
      std::vector<std::int32_t> vars;
      std::vector<double> g;
      for (const auto& [k, v] : op.gradients) {
        vars.push_back(k);
        g.push_back(v);
      }
      o.array(vars);
      o.array(g);
      break;
    }
    case Op::Reconstruct:
    case Op::Report: break;
  }
}

Op get_op(In& i, std::int64_t max_vars) {
  Op op;
  const auto kind = i.get<std::uint8_t>();
  if (kind < Op::Start || kind > Op::Supply) throw InputError("svm decision with an unknown step");
  op.kind = static_cast<Op::Kind>(kind);
  const auto m = static_cast<std::uint64_t>(max_vars);
  switch (op.kind) {
    case Op::Start:
      op.problem = get_problem(i, max_vars);
      op.q = i.get<std::int64_t>();
      op.owners = get_owners(i);
      break;
    case Op::Step:
      op.ws = i.array<std::int32_t>(m);
      op.alpha = i.exactly<double>(op.ws.size(), "multipliers");
      break;
    case Op::Rows:
      op.ws = i.array<std::int32_t>(m);
      op.rows = get_rows(i, max_vars);
      break;
    case Op::Supply:
      op.rows = get_rows(i, max_vars);
      op.want = i.array<std::int32_t>(m);
      break;
    case Op::Shrink:
      op.gmax = i.get<double>();
      op.gmin = i.get<double>();
      break;
    case Op::Assign: {
      op.owners = get_owners(i);
      const auto vars = i.array<std::int32_t>(m);
      const auto g = i.exactly<double>(vars.size(), "gradients");
      for (std::size_t k = 0; k < vars.size(); ++k) op.gradients.emplace_back(vars[k], g[k]);
      break;
    }
    case Op::Reconstruct:
    case Op::Report: break;
  }
  return op;
}

template <class A, class B>
void put_pairs(Out& o, const std::vector<std::pair<A, B>>& v) {
  std::vector<A> a;
  std::vector<B> b;
  for (const auto& [x, y] : v) {
    a.push_back(x);
    b.push_back(y);
  }
  o.array(a);
  o.array(b);
}

template <class A, class B>
std::vector<std::pair<A, B>> get_pairs(In& i, std::uint64_t max) {
  const auto a = i.array<A>(max);
  const auto b = i.exactly<B>(a.size(), "pairs");
  std::vector<std::pair<A, B>> v(a.size());
  for (std::size_t k = 0; k < a.size(); ++k) v[k] = {a[k], b[k]};
  return v;
}

}  // namespace

Bytes encode_params(const TaskParams& t) {
  Out o;
  const SvmParams& p = t.params;
  o.put<std::uint8_t>(static_cast<std::uint8_t>(p.kernel));
  o.put(p.degree);
  o.put(p.gamma);
  o.put(p.coef0);
  o.put(p.cache_mb);
  o.put<std::uint8_t>(t.sharded);
  put_parts(o, t.parts);
  o.put(t.cols);
  return std::move(o.b);
}

TaskParams decode_params(std::span<const std::byte> in) {
  In i(in);
  TaskParams t;
  SvmParams& p = t.params;
  const auto kernel = i.get<std::uint8_t>();
  if (kernel > 3) throw InputError("svm task with an unknown kernel");
  p.kernel = static_cast<KernelType>(kernel);
  p.degree = i.get<int>();
  p.gamma = i.get<double>();
  p.coef0 = i.get<double>();
  p.cache_mb = i.get<double>();
  t.sharded = i.get<std::uint8_t>() != 0;
  t.parts = get_parts(i, "svm task");
  t.cols = i.get<std::int64_t>();
  i.end();
  if (!(p.cache_mb >= 0) || p.degree < 0 || p.degree > 64) throw InputError("svm task with bad kernel parameters");
  if (t.cols < 0 || t.cols > INT32_MAX || t.parts.empty())
    throw InputError("svm task with an impossible training set");
  return t;
}

Bytes encode_decision(const Decision& d) {
  Out o;
  o.put<std::uint8_t>(d.end);
  o.put<std::uint64_t>(d.ops.size());
  for (const Op& op : d.ops) put_op(o, op);
  return std::move(o.b);
}

Decision decode_decision(std::span<const std::byte> in, std::int64_t max_vars) {
  In i(in);
  Decision d;
  d.end = i.get<std::uint8_t>() != 0;
  const auto n = i.get<std::uint64_t>();
  if (n > 16) throw InputError("svm decision with too many steps");
  for (std::uint64_t k = 0; k < n; ++k) d.ops.push_back(get_op(i, max_vars));
  i.end();
  return d;
}

Bytes encode_report(const Report& r) {
  Out o;
  o.put(r.owned);
  o.put(r.active);
  for (const auto& e : r.ext) {
    o.put(e.gmax);
    o.put(e.gmin);
    o.put(e.i);
    o.put(e.j);
  }
  put_pairs(o, r.up);
  put_pairs(o, r.low);
  put_pairs(o, r.ws_g);
  put_pairs(o, r.all_g);
  o.array(r.block_vars);
  o.array(r.block);
  o.array(r.block_diag);
  o.put(r.seconds);
  put_rows(o, r.rows);
  o.array(r.need);
  o.put(r.pending);
  return std::move(o.b);
}

Report decode_report(std::span<const std::byte> in, std::int64_t max_vars) {
  In i(in);
  Report r;
  const auto m = static_cast<std::uint64_t>(max_vars);
  r.owned = i.get<std::int64_t>();
  r.active = i.get<std::int64_t>();
  if (r.owned < 0 || r.owned > max_vars || r.active < 0 || r.active > r.owned)
    throw InputError("svm report with impossible counts");
  for (auto& e : r.ext) {
    e.gmax = i.get<double>();
    e.gmin = i.get<double>();
    e.i = i.get<std::int32_t>();
    e.j = i.get<std::int32_t>();
    if (e.i < -1 || e.i >= max_vars || e.j < -1 || e.j >= max_vars) throw InputError("svm report names a bad variable");
  }
  r.up = get_pairs<double, std::int32_t>(i, m);
  r.low = get_pairs<double, std::int32_t>(i, m);
  r.ws_g = get_pairs<std::int32_t, double>(i, m);
  r.all_g = get_pairs<std::int32_t, double>(i, m);
  r.block_vars = i.array<std::int32_t>(m);
  r.block = i.array<float>(std::min<std::uint64_t>(m * m, std::uint64_t{1} << 28));
  r.block_diag = i.array<double>(m);
  if (r.block_diag.size() != r.block_vars.size()) throw InputError("svm report with a block of inconsistent sizes");
  for (const double d : r.block_diag)
    if (!std::isfinite(d)) throw InputError("svm report with a non-finite kernel value");
  for (const auto k : r.block_vars)
    if (k < 0 || k >= max_vars) throw InputError("svm report names a bad variable");
  r.seconds = i.get<double>();
  if (!(r.seconds >= 0) || r.seconds > 1e9) throw InputError("svm report with an impossible time");
  r.rows = get_rows(i, max_vars);
  r.need = i.array<std::int32_t>(m);
  for (const auto k : r.need)
    if (k < 0 || k >= max_vars) throw InputError("svm report names a bad variable");
  r.pending = i.get<std::int64_t>();
  if (r.pending < 0 || r.pending > 2 * max_vars) throw InputError("svm report with impossible pending sums");
  for (const auto& v : {&r.up, &r.low})
    for (const auto& [g, k] : *v)
      if (k < 0 || k >= max_vars) throw InputError("svm report names a bad variable");
  for (const auto& v : {&r.ws_g, &r.all_g})
    for (const auto& [k, g] : *v)
      if (k < 0 || k >= max_vars) throw InputError("svm report names a bad variable");
  i.end();
  return r;
}

Bytes encode_shared(const Shared& s) {
  Out o;
  o.put<std::uint8_t>(s.start.has_value());
  if (s.start) put_op(o, *s.start);
  o.array(s.alpha);
  return std::move(o.b);
}

Shared decode_shared(std::span<const std::byte> in, std::int64_t max_vars) {
  In i(in);
  Shared s;
  if (i.get<std::uint8_t>()) {
    s.start = get_op(i, max_vars);
    if (s.start->kind != Op::Start) throw InputError("svm state without its problem");
  }
  s.alpha = i.array<double>(static_cast<std::uint64_t>(max_vars));
  i.end();
  if (s.start && s.alpha.size() != s.start->problem.y.size()) throw InputError("svm state of inconsistent sizes");
  return s;
}

}  // namespace accel::cluster::svm_wire

namespace accel::cluster::svm_wire {

Bytes encode_solved(const std::vector<BinarySolution>& solved) {
  Out o;
  o.put<std::uint64_t>(solved.size());
  for (const BinarySolution& s : solved) {
    const BinaryStats& t = s.stats;
    o.array(s.alpha);
    for (const std::int64_t v : {std::int64_t{t.class_a}, std::int64_t{t.class_b}, t.iterations, t.n, t.n_sv, t.n_bsv,
                                 t.rounds, t.ws_size, std::int64_t{t.reconstructions}, t.cache_hits, t.cache_misses,
                                 t.prefetched, t.prefetch_used, t.min_active, t.kernel_values})
      o.put(v);
    o.put(t.obj);
    o.put(t.rho);
    o.put(t.r);
    o.text(t.shrink);
  }
  return std::move(o.b);
}

std::vector<BinarySolution> decode_solved(std::span<const std::byte> in, std::int64_t max_vars) {
  In i(in);
  const auto n = i.get<std::uint64_t>();
  if (n > (std::uint64_t{1} << 24)) throw InputError("svm state with " + std::to_string(n) + " problems");
  std::vector<BinarySolution> out;
  for (std::uint64_t k = 0; k < n; ++k) {
    BinarySolution s;
    BinaryStats& t = s.stats;
    s.alpha = i.array<double>(static_cast<std::uint64_t>(max_vars));
    std::int64_t v[15];
    for (auto& x : v) x = i.get<std::int64_t>();
    for (const std::int64_t x : {v[0], v[1], v[8]})
      if (x < INT32_MIN || x > INT32_MAX) throw InputError("svm state with an impossible class or count");
    t.class_a = static_cast<int>(v[0]);
    t.class_b = static_cast<int>(v[1]);
    t.reconstructions = static_cast<int>(v[8]);
    t.iterations = v[2], t.n = v[3], t.n_sv = v[4], t.n_bsv = v[5], t.rounds = v[6], t.ws_size = v[7];
    t.cache_hits = v[9], t.cache_misses = v[10], t.prefetched = v[11], t.prefetch_used = v[12];
    t.min_active = v[13], t.kernel_values = v[14];
    t.obj = i.get<double>();
    t.rho = i.get<double>();
    t.r = i.get<double>();
    t.shrink = i.text(64);
    for (const double a : s.alpha)
      if (!std::isfinite(a)) throw InputError("svm state with a multiplier that is not finite");
    if (!std::isfinite(t.rho) || !std::isfinite(t.obj) || !std::isfinite(t.r))
      throw InputError("svm state with a solution that is not finite");
    out.push_back(std::move(s));
  }
  i.end();
  return out;
}

}  // namespace accel::cluster::svm_wire
