#include "svm_job.hpp"

#include <algorithm>
#include <filesystem>
#include <iostream>
#include <numeric>
#include <sstream>

#include "accel/error.hpp"
#include "accel/log.hpp"
#include "accel/perf_model.hpp"
#include "session.hpp"
#include "svm_wire.hpp"

namespace accel::cluster {
namespace {

using svm_parallel::Op;
using svm_parallel::Range;
using svm_parallel::Report;

// A decision of one op (not in a coroutine: GCC 12 cannot compile an
// initializer list inside one).
Bytes decision_of(const Op& op) { return svm_wire::encode_decision({false, {op}}); }

std::vector<Device*> svm_devices(const Local& local) {
  return local.registry.select(local.devices, KernelId::CsrKernelRows);
}

// A member's own rows read from the shared training file, or its part
// files (sharded, --pull): the lines of each range alone, from the mark
// before it in the part that holds them.
class FileRows final : public svm_parallel::RowSource {
 public:
  FileRows(std::vector<InputPart> parts, std::int64_t rows, std::int64_t cols)
      : parts_(std::move(parts)), rows_(rows), cols_(cols) {
    std::int64_t sum = 0;
    for (const auto& p : parts_) sum += p.rows;
    if (sum != rows_) throw InputError("svm task whose files hold " + std::to_string(sum) + " of its " + std::to_string(rows_) + " rows");
  }
  std::int64_t rows() const override { return rows_; }
  std::int64_t cols() const override { return cols_; }
  void read(std::int64_t begin, std::int64_t end, CsrMatrix& out) override {
    if (begin < 0 || end > rows_) throw InputError(parts_.front().path + ": no rows [" + std::to_string(begin) + ", " + std::to_string(end) + ")");
    std::int64_t first = 0;
    for (const auto& p : parts_) {
      const std::int64_t lo = std::max(begin, first), hi = std::min(end, first + p.rows);
      if (lo < hi) {
        const LabeledCsr got = read_libsvm_range(p.path, p.marks, lo - first, hi - lo);
        if (got.x.cols > cols_) throw InputError(p.path + ": wider than the job's training set (changed since the job began)");
        for (std::int64_t r = 0; r < got.x.rows; ++r) out.add_row_from(got.x, r);
      }
      first += p.rows;
    }
  }

 private:
  std::vector<InputPart> parts_;
  std::int64_t rows_, cols_;
};

// A member's share: the parallel solver's Member over its rows (the whole
// set pushed to it, or its own ranges read from the shared file), and the
// shared state a returning member needs (the problem, owners current, and
// every multiplier), kept from the decisions it applies.
//
// The coordinator's partition starts over the set without rows (it owns
// none); given rows (every worker lost), it takes every row from
// `every_row` and restarts the problem in progress from the multipliers,
// as a returning member does. Sharded, it reads the ranges it is given
// as any member does.
class SvmPartition final : public StarPartition {
 public:
  using EveryRow = std::function<const LabeledCsr&()>;
  SvmPartition(std::unique_ptr<LabeledCsr> owned, std::unique_ptr<svm_parallel::RowSource> rows,
               const SvmParams& params, std::vector<Device*> devices, std::uint32_t id, EveryRow every_row = {})
      : owned_(std::move(owned)), rows_(std::move(rows)), params_(params), devices_(std::move(devices)), id_(id),
        max_vars_(2 * std::max<std::int64_t>(1, rows_->rows())), every_row_(std::move(every_row)),
        member_(std::make_unique<svm_parallel::Member>(*rows_, params, devices_, id)) {
    member_->bound_settles();
  }

  Bytes contribute(std::int64_t) override { return svm_wire::encode_report(member_->report()); }
  Bytes idle() const override { return svm_wire::encode_report(Report{}); }
  void validate(std::span<const std::byte> b) const override { svm_wire::decode_report(b, max_vars_); }
  void validate_decision(std::span<const std::byte> b) const override {
    member_->check(svm_wire::decode_decision(b, max_vars_).ops);
  }

  RoundOutcome apply(std::int64_t, std::span<const std::byte> decision) override {
    const auto d = svm_wire::decode_decision(decision, max_vars_);
    if (d.end) return {true, {{"ops", "end"}}};
    std::string kinds;
    for (const Op& op : d.ops) {
      track(op);
      if (!kinds.empty()) kinds += ',';
      kinds += std::to_string(static_cast<int>(op.kind));
      if (every_row_ && gains_rows(op)) take_every_row(op);
      member_->apply({op});
    }
    return {false, {{"ops", kinds}}};
  }

  Bytes shared_state() const override { return svm_wire::encode_shared(shared_); }

  void hold(const std::vector<Range>& owners) { member_->hold(owners); }

  // Alg. 6 from zero: the problem started again at the current multipliers
  // computes every own gradient from them.
  void adopt(std::span<const std::byte> state) override {
    shared_ = svm_wire::decode_shared(state, max_vars_);
    if (!shared_.start) return;
    Op start = *shared_.start;
    start.problem.alpha0 = shared_.alpha;
    member_->check({start});
    member_->apply({start});
  }

 private:
  bool gains_rows(const Op& op) const {
    if (op.kind != Op::Start && op.kind != Op::Assign) return false;
    return std::any_of(op.owners.begin(), op.owners.end(),
                       [&](const Range& r) { return r.member == id_ && r.end > r.begin; });
  }

  // Rows for a partition that held none: every row, and the problem in
  // progress started again from its multipliers (a Start about to be
  // applied starts it anyway). Once: from then on it holds every row.
  void take_every_row(const Op& op) {
    auto all = std::make_unique<svm_parallel::HeldRows>(every_row_().x);
    every_row_ = {};
    member_ = std::make_unique<svm_parallel::Member>(*all, params_, devices_, id_);
    member_->bound_settles();
    rows_ = std::move(all);
    if (op.kind == Op::Start || !shared_.start) return;
    Op start = *shared_.start;  // its owners already the op's (track)
    start.problem.alpha0 = shared_.alpha;
    member_->apply({start});
  }

  void track(const Op& op) {
    if (op.kind == Op::Start) {
      shared_.start = op;
      shared_.alpha = op.problem.alpha0.empty() ? std::vector<double>(op.problem.y.size(), 0.0) : op.problem.alpha0;
    } else if (op.kind == Op::Step) {
      for (std::size_t a = 0; a < op.ws.size(); ++a) shared_.alpha[op.ws[a]] = op.alpha[a];
    } else if (op.kind == Op::Assign && shared_.start) {
      shared_.start->owners = op.owners;
    }
  }

  std::unique_ptr<LabeledCsr> owned_;
  std::unique_ptr<svm_parallel::RowSource> rows_;
  SvmParams params_;
  std::vector<Device*> devices_;
  std::uint32_t id_;
  std::int64_t max_vars_;
  EveryRow every_row_;
  std::unique_ptr<svm_parallel::Member> member_;
  svm_wire::Shared shared_;
};

class SvmWorkload final : public Workload {
 public:
  Exchange exchange() const override { return Exchange::Central; }

  // Kernel values per second of the local devices on rows shaped like the
  // job's (columns, non-zeros per row): 32 queries against 2048 rows, the
  // shape of a round's kernel rows; the faster of two after a warm-up. Kept
  // short: it is on the job's critical path, and the rounds'
  // own measurements correct the split (DriftPolicy).
  double measure(std::span<const std::byte> probe, Local& local) const override {
    In in(probe);
    const auto cols = in.get<std::int64_t>();
    const auto nnz = in.get<std::int64_t>();
    in.end();
    if (cols < 1 || cols > (1ll << 31) || nnz < 0 || nnz > cols) throw InputError("svm probe with an impossible shape");
    constexpr std::int64_t kRows = 2048, kQueries = 32;
    CsrMatrix x;
    for (std::int64_t r = 0; r < kRows; ++r) {
      std::vector<std::pair<std::int32_t, float>> row;
      for (std::int64_t j = 0; j < nnz; ++j) {
        const auto c = static_cast<std::int32_t>((r * 2654435761u + j * (cols / std::max<std::int64_t>(nnz, 1))) % cols);
        if (row.empty() || row.back().first < c) row.emplace_back(c, static_cast<float>((r + j) % 7) * 0.1f);
      }
      std::sort(row.begin(), row.end());
      row.erase(std::unique(row.begin(), row.end(), [](auto& a, auto& b) { return a.first == b.first; }), row.end());
      x.add_row(row);
    }
    x.cols = cols;
    SvmParams p;
    p.gamma = 1.0 / static_cast<double>(cols);
    KernelRows kr(x, p, svm_devices(local));
    std::vector<std::int32_t> q(kQueries), t(kRows);
    for (std::int64_t i = 0; i < kQueries; ++i) q[i] = static_cast<std::int32_t>(i * (kRows / kQueries));
    for (std::int64_t i = 0; i < kRows; ++i) t[i] = static_cast<std::int32_t>(i);
    std::vector<float> out(kQueries * kRows);
    kr.compute(q, t, out.data());
    double best = 0;
    for (int trial = 0; trial < 2; ++trial) {
      const auto t0 = Clock::now();
      kr.compute(q, t, out.data());
      best = std::max(best, kQueries * kRows / std::max(secs(t0, Clock::now()), 1e-6));
    }
    return best / kQueries;  // rows of a round's kernel rows per second
  }

  std::unique_ptr<Partition> open(const Task& task, std::span<const std::byte> data, Local& local) const override {
    const svm_wire::TaskParams t = svm_wire::decode_params(task.params);
    if (t.sharded) {
      auto part = std::make_unique<SvmPartition>(nullptr, std::make_unique<FileRows>(t.parts, task.units, t.cols),
                                                 t.params, svm_devices(local), task.self);
      part->hold({{task.self, task.begin, task.begin + task.rows}});  // the rows the first problem gives it
      return part;
    }
    auto set = std::make_unique<LabeledCsr>(parse_libsvm_csr(data, task.input.empty() ? "the training set" : task.input));
    if (set->x.rows != task.units) throw InputError("svm training set of " + std::to_string(set->x.rows) + " rows");
    auto rows = std::make_unique<svm_parallel::HeldRows>(set->x);
    return std::make_unique<SvmPartition>(std::move(set), std::move(rows), t.params, svm_devices(local), task.self);
  }

  // The training file's bytes, as the coordinator pushes them (--pull);
  // sharded, nothing: the member reads its own rows when it is given them,
  // and here only checks that the file is the job's.
  void read(const Task& task, std::span<std::byte> out) const override {
    const svm_wire::TaskParams t = svm_wire::decode_params(task.params);
    if (t.sharded) {
      for (const auto& p : t.parts) check_marked_file(p.path, p.marks);
      return;
    }
    read_joined_text(t.parts, out, task.input);
  }
};

ACCEL_REGISTER_WORKLOAD("svm", SvmWorkload);

}  // namespace

SvmJob::SvmJob(const SvmJobOptions& o) : o_(o), registry_(Registry::discover_all()) {
  const auto t0 = Clock::now();
  full_ = o.params.probability;
  // Sharded (shared storage, and no -b 1 holding every row here): members
  // read their own rows from the marks.
  sharded_ = o.shared_storage && !full_;
  read_training_set();
  file_ = map_joined_text(parts_);
  // svm_train's default gamma, resolved here: members compute kernel rows
  // with the same one.
  if (o_.params.gamma == 0) o_.params.gamma = data_.x.cols > 0 ? 1.0 / double(data_.x.cols) : 1.0;
  devices_ = registry_.select(o.device, KernelId::CsrKernelRows);
  for (auto* d : devices_) device_names_.push_back(d->info().name);
  loading_ = secs(t0, Clock::now());
}

// The coordinator's partition over the job's training set (without rows
// unless -b 1), not a copy decoded from the bytes it pushes to members; it
// asks for every row if rows move to it.
// The training file, or each of its part files in name order: the labels,
// lines and shape of its rows (their values only with -b 1), each row's
// byte offset in its part, and each part's rows and marks. An empty part
// file has no rows.
void SvmJob::read_training_set() {
  namespace fs = std::filesystem;
  std::vector<std::int64_t> offsets;
  for (const auto& f : input_files(o_.train_file)) {
    InputPart p{fs::absolute(f).string(), 0, 0, {}};
    p.marks.file_bytes = p.file_bytes = static_cast<std::int64_t>(fs::file_size(f));
    parts_.push_back(p);
    if (p.file_bytes == 0 && names_parts(o_.train_file)) continue;
    std::int64_t nonzeros = 0;
    const LabeledCsr d = full_ ? read_libsvm_csr(f) : read_libsvm_labels(f, &nonzeros, &offsets);
    nonzeros_ += full_ ? d.x.nnz() : nonzeros;
    for (std::size_t r = 0; r < offsets.size(); r += TextMarks::kStride) {
      parts_.back().marks.offset.push_back(offsets[r]);
      parts_.back().marks.line.push_back(d.lines[r] - 1);
    }
    parts_.back().rows = d.x.rows;
    offsets_.insert(offsets_.end(), offsets.begin(), offsets.end());
    offsets.clear();
    append_rows(data_, d);
  }
  if (data_.x.rows == 0) throw InputError(o_.train_file + ": no data rows");
  data_.source = o_.train_file;
}

// The part holding row r, and the part's first row.
std::pair<std::size_t, std::int64_t> SvmJob::part_of(std::int64_t r) const {
  std::int64_t first = 0;
  for (std::size_t k = 0; k < parts_.size(); ++k) {
    if (r < first + parts_[k].rows) return {k, first};
    first += parts_[k].rows;
  }
  throw std::out_of_range("svm: row " + std::to_string(r) + " past the training set");
}

std::unique_ptr<Partition> SvmJob::open_own(const Task& task, Local& local) {
  const SvmParams params = svm_wire::decode_params(task.params).params;
  if (sharded_)
    return std::make_unique<SvmPartition>(nullptr, std::make_unique<FileRows>(parts_, data_.x.rows, data_.x.cols),
                                          params, svm_devices(local), task.self);
  return std::make_unique<SvmPartition>(nullptr, std::make_unique<svm_parallel::HeldRows>(data_.x), params,
                                        svm_devices(local), task.self,
                                        full_ ? SvmPartition::EveryRow{} : [this]() -> const LabeledCsr& {
                                          return every_row();
                                        });
}

// Every row, read from the training file once (the coordinator computes
// rows: every worker is lost).
const LabeledCsr& SvmJob::every_row() {
  if (full_) return data_;
  if (!all_rows_) {
    log::warn("accel coordinator") << "every worker is lost: the coordinator reads every row of " << o_.train_file;
    all_rows_ = std::make_unique<LabeledCsr>();
    for (const auto& p : parts_)
      if (p.rows > 0) append_rows(*all_rows_, read_libsvm_csr(p.path));
    if (all_rows_->x.rows != data_.x.rows || all_rows_->labels != data_.labels)
      throw InputError(o_.train_file + ": changed since the job began");
  }
  return *all_rows_;
}

Bytes SvmJob::probe() const {
  Out o;
  o.put<std::int64_t>(std::max<std::int64_t>(1, data_.x.cols));
  o.put<std::int64_t>(data_.x.rows > 0 ? nonzeros_ / data_.x.rows : 0);
  return std::move(o.b);
}

// svm-train's options by their flags (gamma resolved, as the members use
// it); the rest of what changes the result (the shrinking heuristic) is
// compared through params().
Job::Options SvmJob::result_options() const {
  const SvmParams& p = o_.params;
  std::string weights;
  for (const auto& [label, w] : p.weights) weights += (weights.empty() ? "" : ",") + std::to_string(label) + ":" + option_text(w);
  return {{"-s", std::to_string(static_cast<int>(p.type))},
          {"-t", std::to_string(static_cast<int>(p.kernel))},
          {"-d", std::to_string(p.degree)},
          {"-g", option_text(p.gamma)},
          {"-r", option_text(p.coef0)},
          {"-c", option_text(p.C)},
          {"-n", option_text(p.nu)},
          {"-p", option_text(p.p)},
          {"-e", option_text(p.eps)},
          {"-b", p.probability ? "1" : "0"},
          {"-wi", weights},
          {"--solver", std::to_string(static_cast<int>(p.solver))},
          {"--wss", std::to_string(static_cast<int>(p.wss))},
          {"--ws-size", std::to_string(p.ws_size)}};
}

Bytes SvmJob::params() const {
  return svm_wire::encode_params({o_.params, sharded_, parts_, data_.x.cols});
}

void SvmJob::partitioned(const std::vector<std::int64_t>& begin, const std::vector<std::int64_t>& rows) {
  home_.clear();
  for (std::size_t i = 0; i < begin.size(); ++i)
    if (rows[i] > 0) home_.push_back({static_cast<std::uint32_t>(i), begin[i], begin[i] + rows[i]});
  owners_ = home_;
}

Bytes SvmJob::saved() const { return svm_wire::encode_solved(trainer_.solved()); }

void SvmJob::restore(std::span<const std::byte> saved, std::span<const std::byte> shared_state) {
  const std::int64_t max_vars = 2 * data_.x.rows + 2;
  std::vector<BinarySolution> solved = svm_wire::decode_solved(saved, max_vars);
  const svm_wire::Shared shared = svm_wire::decode_shared(shared_state, max_vars);
  log::info("accel coordinator") << solved.size() << " svm problem(s) solved before the checkpoint"
                                 << (shared.start ? "; the next resumes from its multipliers" : "");
  trainer_.resume(std::move(solved), shared.start ? std::optional(shared.alpha) : std::nullopt);
}

// The contributions answer the last decision (none before the first);
// the training goes on until its next decision, or its end.
Bytes SvmJob::decide(std::int64_t, const std::map<std::uint32_t, Bytes>& contributions) {
  if (!training_.valid()) {
    training_ = svm_train_steps(data_, o_.params, devices_, trainer_, &report_);
    training_.resume();
  } else if (mailbox_.waiting()) {
    mailbox_.deliver(contributions);
  }
  if (mailbox_.waiting()) return mailbox_.take_outgoing();
  if (!trained_) {
    model_ = training_.result();  // rethrows what the training threw
    fill_support_vectors();
    trained_ = true;
  }
  return svm_wire::encode_decision({true, {}});
}

// The model's support vectors: the training assembled it over the rows the
// coordinator holds (none), so their values are read from the file now,
// those lines alone, where the first read found them.
void SvmJob::fill_support_vectors() {
  if (full_) return;
  LabeledCsr sv;
  const auto& rows = model_.sv_rows;
  for (std::size_t i = 0; i < rows.size();) {  // a run of rows of one part at a time
    const auto [k, first] = part_of(rows[i]);
    std::vector<std::int64_t> at, lines;
    for (; i < rows.size() && rows[i] >= first && rows[i] < first + parts_[k].rows; ++i) {
      at.push_back(offsets_[static_cast<std::size_t>(rows[i])]);
      lines.push_back(data_.lines[static_cast<std::size_t>(rows[i])]);
    }
    const LabeledCsr got = read_libsvm_lines(parts_[k].path, at, lines);
    for (std::size_t j = 0; j < at.size(); ++j)
      if (got.labels[j] != data_.labels[static_cast<std::size_t>(rows[i - at.size() + j])])
        throw InputError(parts_[k].path + ":" + std::to_string(lines[j]) + ": changed since the job began");
    append_rows(sv, got);
  }
  sv.x.cols = model_.sv.cols;
  model_.sv = std::move(sv.x);
}

// One decision out, its round's reports back.
accel::Task<SvmJob::Reports> SvmJob::exchange(Op op) {
  follow(op);
  const std::map<std::uint32_t, Bytes> contributions = co_await mailbox_.exchange(decision_of(op));
  Reports out;
  for (const auto& entry : contributions)
    out[entry.first] = svm_wire::decode_report(entry.second, 2 * data_.x.rows + 2);
  co_return out;
}

// What a re-split's price depends on: how long the problem has run, and
// which rows its variables are.
void SvmJob::follow(const Op& op) {
  if (op.kind == Op::Start) {
    rows_ = op.problem.rows;
    steps_ = 0;
  } else if (op.kind == Op::Step) {
    ++steps_;
  }
}

// Rows follow membership: a member that owns rows and did not report is
// gone (the engine evicted it), and its rows go to the coordinator; a
// member that reports again gets its home rows back. Returns whether the
// owners changed.
bool SvmJob::reassign(const Reports& reports) {
  bool changed = false;
  for (Range& r : owners_)
    if (!reports.count(r.member)) {
      const std::uint32_t to = survivor(reports);
      log::info("accel coordinator") << "rows [" << r.begin << ", " << r.end << ") of worker " << r.member
                << " moved to " << (to == 0 ? std::string("the coordinator") : "worker " + std::to_string(to));
      r.member = to;
      changed = true;
    }
  for (std::size_t i = 0; i < home_.size(); ++i)
    if (reports.count(home_[i].member) && owners_[i].member != home_[i].member) {
      log::info("accel coordinator") << "rows [" << home_[i].begin << ", " << home_[i].end << ") moved back to worker "
                << home_[i].member;
      owners_[i].member = home_[i].member;
      changed = true;
    }
  return changed;
}

// Who takes a lost member's rows: the reporting member that computes rows
// and owns the fewest (every worker holds every row, so any can); the
// coordinator only when no worker reports, or when it computes a share
// anyway (-b 1).
std::uint32_t SvmJob::survivor(const Reports& reports) const {
  std::uint32_t best = 0;
  std::int64_t fewest = -1;
  for (const auto& entry : reports) {
    const std::uint32_t id = entry.first;
    if (!computes(id)) continue;
    std::int64_t rows = 0;
    for (const Range& g : owners_)
      if (g.member == id) rows += g.end - g.begin;
    if (fewest < 0 || rows < fewest) best = id, fewest = rows;
  }
  return best;
}

// Whether a member computes rows: every worker; the coordinator with -b 1,
// or once it holds rows (every worker was lost).
bool SvmJob::computes(std::uint32_t id) const {
  if (id != 0 || full_ || all_rows_) return true;
  return std::any_of(owners_.begin(), owners_.end(), [](const Range& g) { return g.member == 0 && g.end > g.begin; });
}

// Each member's kernel-rows time of a Rows round feeds its rate ([SysInfo]'s collector); a drift of the split against them (DriftPolicy)
// schedules a re-split, made after the next step.
void SvmJob::measure(const Reports& reports) {
  std::map<std::uint32_t, double> seconds;
  for (const auto& [id, r] : reports)
    if (r.seconds > 0 && r.owned > 0) {
      // Only the rows: every member waits for the coordinator's decision
      // alike (none computes before it comes), so deciding is no member's
      // share. Counting it in the coordinator's would make the coordinator
      // look slower than an equally fast worker, move rows to that worker,
      // and slow the rounds.
      if (!drift_.settling()) rates_.record(id, static_cast<double>(r.active), r.seconds);
      seconds[id] = r.seconds;
    }
  if (!seconds.empty() && drift_.drifted(seconds)) resplit_due_ = true;  // only rounds that computed rows count
}

// Algorithm 1 of [SysInfo] over the reporting members'
// measured rates; the new split is every member's home from now on, in contiguous ranges by id.
void SvmJob::resplit(const Reports& reports) {
  resplit_due_ = false;
  std::vector<std::uint32_t> ids;
  std::vector<std::int64_t> loads;
  std::vector<double> caps;
  std::vector<std::int64_t> active;
  double known = 0;
  int n_known = 0;
  for (const auto& [id, r] : reports)
    if (const auto rate = rates_.rate(id); rate && computes(id)) {
      known += *rate;
      ++n_known;
    }
  if (n_known == 0) return;
  for (const auto& [id, r] : reports) {
    if (!computes(id)) continue;  // the coordinator, which holds no rows
    // A member not measured yet (back without rows) counts at the mean.
    ids.push_back(id);
    caps.push_back(rates_.rate(id).value_or(known / n_known));
    active.push_back(r.active);
    std::int64_t rows = 0;
    for (const Range& g : owners_)
      if (g.member == id) rows += g.end - g.begin;
    loads.push_back(rows);
  }
  if (std::accumulate(loads.begin(), loads.end(), std::int64_t{0}) != data_.x.rows)
    throw std::logic_error("svm: a re-split over members that do not own every row");
  // A worker back after a re-split that left it out owns nothing: it gets
  // rows whatever the damping and the price of the move say. (Priced like a
  // move between busy members, the move is sometimes not made, and the
  // worker would sit idle for the rest of the job.)
  bool homeless = false;
  for (std::size_t i = 0; i < ids.size(); ++i) homeless = homeless || (ids[i] != 0 && loads[i] == 0);
  const std::vector<std::int64_t> target = rebalance(loads, caps, 0.05);
  const std::vector<std::int64_t> next = homeless ? target : swings_.damp(ids, loads, target);
  if (next == loads) return;
  std::vector<Range> home;
  std::int64_t at = 0;
  for (std::size_t i = 0; i < ids.size(); ++i) {
    if (next[i] > 0) home.push_back({ids[i], at, at + next[i]});
    at += next[i];
  }
  if (!homeless && !worth_moving(ids, active, caps, home)) return;
  home_ = std::move(home);
  owners_ = home_;
  swings_.moved(ids, loads, next);
  ++resplits_;
  drift_.settle(5);  // Rows rounds
  {
    auto line = log::info("accel coordinator");
    line << "rows re-split by measured speed:";
    for (std::size_t i = 0; i < ids.size(); ++i) line << " " << ids[i] << ":" << loads[i] << "->" << next[i];
  }
  for (const Range& g : home_)  // a member back after a re-split that left it out
    if (g.member != 0 && loads[std::find(ids.begin(), ids.end(), g.member) - ids.begin()] == 0) {
      log::info("accel coordinator") << "rows [" << g.begin << ", " << g.end << ") moved back to worker " << g.member;
      ++moves_;
    }
}

// Lost members' rows to the coordinator, returning members' home rows back,
// until a round's reports come from every owner.
// Whether a re-split pays for itself. A round costs each member its active
// variables over its rate (a rate counts active rows a second), and waits
// for the slowest. A member whose range changes gets every own variable
// active again, so a split of the owned rows can make rounds slower where
// shrinking has left few active. The move itself costs two rounds (every
// gradient made exact and reported, then the new owners) and the gainers'
// cold kernel caches: the last move's measured time, at first two rounds
// of the current split. The saving counts over as many rounds again as the
// problem has run. Moves of a few rows in a balanced split, which the
// noise of a shared machine asks for, cost more than they save; and a
// saving the rates put under 10% of a round is within their noise (a
// member on a shared core runs its rounds at one speed or half of it), so
// it is not made: such moves would re-split a job over and over.
bool SvmJob::worth_moving(const std::vector<std::uint32_t>& ids, const std::vector<std::int64_t>& active,
                          const std::vector<double>& caps, const std::vector<Range>& home) const {
  double now = 0, then = 0;
  for (std::size_t i = 0; i < ids.size(); ++i) {
    std::int64_t next = 0, kept = 0, owned = 0;
    for (const Range& g : home)
      if (g.member == ids[i]) {
        next += g.end - g.begin;
        for (const Range& o : owners_)
          if (o.member == ids[i]) kept += std::max<std::int64_t>(0, std::min(g.end, o.end) - std::max(g.begin, o.begin));
      }
    for (const Range& o : owners_)
      if (o.member == ids[i]) owned += o.end - o.begin;
    const bool changed = kept != owned || kept != next;
    now = std::max(now, static_cast<double>(active[i]) / caps[i]);
    then = std::max(then, static_cast<double>(changed ? next : active[i]) / caps[i]);
  }
  const double cost = move_seconds_ > 0 ? move_seconds_ : 2 * now;
  return then < 0.9 * now && (now - then) * static_cast<double>(steps_) > cost;
}

// The owner of training-set row r under `owners` (none: 0, the coordinator).
static std::uint32_t owner_of(const std::vector<Range>& owners, std::int64_t r) {
  for (const Range& g : owners)
    if (r >= g.begin && r < g.end) return g.member;
  return 0;
}

// A re-split's move: every member makes its gradients exact and reports
// them, and the new owners get those of the variables they gain with the
// assignment, instead of rebuilding them from the support vectors (Alg. 6
// from zero, support x gained kernel values, costs more than many
// rounds). Gradients a lost member took with it are rebuilt by their new
// owner.
accel::Task<SvmJob::Reports> SvmJob::move_rows(std::vector<Range> before) {
  const auto t0 = Clock::now();
  Op report;
  report.kind = Op::Report;
  const Reports exact = co_await settled(co_await exchange(report));
  Op assign;
  assign.kind = Op::Assign;
  assign.owners = owners_;
  for (const auto& entry : exact)
    for (const auto& [k, g] : entry.second.all_g) {
      const std::int64_t row = rows_.empty() ? k : rows_[k];
      if (owner_of(before, row) != owner_of(owners_, row)) assign.gradients.emplace_back(k, g);
    }
  Reports reports = co_await exchange(assign);
  move_seconds_ = secs(t0, Clock::now());
  co_return co_await follow_membership(std::move(reports));
}

accel::Task<SvmJob::Reports> SvmJob::follow_membership(Reports reports) {
  while (reassign(reports)) {
    ++moves_;
    Op assign;
    assign.kind = Op::Assign;
    assign.owners = owners_;
    reports = co_await exchange(assign);
  }
  co_return reports;
}

// Rounds of Supply until no member waits for rows (sharded: a
// reconstruction, gradients rebuilt for rows a member gained) or has
// sources left to sum (held: a batch a round, Member::bound_settles); each
// follows membership, and what a lost member leaves is wanted again.
accel::Task<SvmJob::Reports> SvmJob::settled(Reports reports) {
  co_return co_await svm_parallel::settle(std::move(reports), [this](Op op) -> accel::Task<Reports> {
    Reports r = co_await exchange(std::move(op));
    co_return co_await follow_membership(std::move(r));
  });
}

accel::Task<SvmJob::Reports> SvmJob::round(Op op) {
  const bool step = op.kind == Op::Step;
  Reports reports = co_await exchange(std::move(op));
  measure(reports);
  for (const auto& entry : reports) {  // a member back after a re-split left it without a home
    const std::uint32_t id = entry.first;
    if (computes(id) && std::none_of(home_.begin(), home_.end(), [&](const Range& g) { return g.member == id; })) resplit_due_ = true;
  }
  // Membership first: a re-split splits the rows of the members that
  // reported, so a member lost in this round must have handed its rows to
  // the coordinator before, or they would belong to no one.
  reports = co_await follow_membership(std::move(reports));
  if (resplit_due_ && step) {
    const std::vector<Range> before = owners_;
    resplit(reports);
    if (owners_ != before) reports = co_await move_rows(before);
  }
  co_return co_await settled(std::move(reports));
}

std::string SvmJob::finish(std::span<const std::byte>, nlohmann::json& summary) {
  if (!trained_) throw InputError("svm: the job stopped while training");
  write_svm_model(o_.model_file, model_);
  summary["seconds"]["loading"] = loading_;
  summary["seconds"]["total"] = summary["seconds"]["total"].get<double>() + loading_;
  summary["features"] = data_.x.cols;
  summary["total_sv"] = model_.sv.rows;
  summary["sv_rows"] = model_.sv_rows;  // each support vector's row in the input, in the model's order
  summary["rows_moved"] = moves_;
  summary["resplits"] = resplits_;
  nlohmann::json probs = nlohmann::json::array();
  for (const auto& s : report_.problems)
    probs.push_back({{"classes", {s.class_a, s.class_b}}, {"n", s.n}, {"obj", s.obj}, {"rho", s.rho}, {"r", s.r},
                     {"nSV", s.n_sv}, {"nBSV", s.n_bsv}, {"rounds", s.rounds}, {"iterations", s.iterations},
                     {"reconstructions", s.reconstructions}, {"shrink", s.shrink}});
  summary["problems"] = probs;
  // The coordinator's solver time by phase: kernel = the working sets'
  // q x q blocks, select = merging reports, selection and subproblems,
  // update = waiting for the members' rounds.
  const SvmTimes& t = report_.times;
  summary["seconds"]["solver"] = {{"total", t.total}, {"kernel", t.kernel}, {"select", t.select},
                                  {"update", t.update}, {"shrink", t.shrink}, {"reconstruct", t.reconstruct}};
  summary["model_file"] = o_.model_file;
  std::ostringstream line;
  line << "distributed svm-train: " << data_.x.rows << " rows, " << summary["workers"].get<int>() << " workers, "
       << report_.problems.size() << " problems, " << model_.sv.rows << " support vectors, model " << o_.model_file;
  return line.str();
}

}  // namespace accel::cluster
