#include "kmeans_job.hpp"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <numeric>
#include <sstream>

#include "accel/error.hpp"
#include "accel/kmeans.hpp"
#include "labels_file.hpp"
#include "marks_wire.hpp"
#include "seeding_rounds.hpp"
#include "session.hpp"
#include "text_survey.hpp"

namespace accel::cluster {
namespace {

// Everything a member needs besides its rows.
struct Params {
  std::int64_t d = 0, k = 0;
  double tol = 0;
  bool bounds = false;  // keep Yinyang bounds between rounds (--algorithm)
  // --init kmeans-parallel: the members draw the seeds in the first rounds
  // (seeding_rounds.hpp), from this seed; no centroids come with the task.
  bool seeding = false;
  std::uint64_t seed = 0;
  std::vector<float> centroids;  // k x d, the initial ones
  std::int64_t max_iter = 0;
  // --output-labels: the shared file each member writes its rows' labels
  // into, in one more round after the last (empty: none).
  std::string labels;
  // A text input: where its rows start, so that a --pull member reads its
  // own lines alone (empty: .npy, or whole).
  TextMarks marks;
  // An input of part files: each one's rows and marks (empty: one file).
  std::vector<InputPart> parts;
};

// Bounds on a job's shape as read from the network.
constexpr std::int64_t kMaxK = 1 << 16, kMaxD = 1 << 16;

Bytes encode_params(const Params& p) {
  Out o;
  o.put(p.d);
  o.put(p.k);
  o.put(p.tol);
  o.put<std::uint8_t>(p.bounds);
  o.put<std::uint8_t>(p.seeding);
  o.put(p.seed);
  o.array(p.centroids);
  o.put(p.max_iter);
  o.text(p.labels);
  put_marks(o, p.marks);
  put_parts(o, p.parts);
  return std::move(o.b);
}

Params decode_params(std::span<const std::byte> in) {
  In i(in);
  Params p;
  p.d = i.get<std::int64_t>();
  p.k = i.get<std::int64_t>();
  p.tol = i.get<double>();
  if (p.d < 1 || p.d > kMaxD || p.k < 1 || p.k > kMaxK || !(p.tol >= 0))
    throw InputError("k-means task with an impossible shape");
  p.bounds = i.get<std::uint8_t>() != 0;
  p.seeding = i.get<std::uint8_t>() != 0;
  p.seed = i.get<std::uint64_t>();
  p.centroids = i.exactly<float>(p.seeding ? 0 : static_cast<std::uint64_t>(p.k * p.d), "centroids");
  p.max_iter = i.get<std::int64_t>();
  p.labels = i.text(4096);
  if (p.max_iter < 0) throw InputError("k-means task with an impossible iteration limit");
  p.marks = get_marks(i, "k-means task");
  p.parts = get_parts(i, "k-means task");
  i.end();
  return p;
}

// A member's contribution: per-cluster sums and counts over its rows.
Bytes encode_step(const PartialStep& s) {
  Out o;
  o.array(s.sums);
  o.array(s.counts);
  o.put(s.inertia);
  return std::move(o.b);
}

PartialStep decode_step(std::span<const std::byte> in, std::int64_t k, std::int64_t d) {
  In i(in);
  PartialStep s;
  s.sums = i.exactly<double>(static_cast<std::uint64_t>(k * d), "sums");
  s.counts = i.exactly<std::int64_t>(static_cast<std::uint64_t>(k), "counts");
  s.inertia = i.get<double>();
  i.end();
  return s;
}

std::vector<Device*> devices_for(Local& local, std::int64_t k, std::int64_t d) {
  return kmeans_capable(local.registry.select(local.devices, KernelId::KMeansAssign), k, d);
}

// total += s, the members' partials in the caller's order.
void add_into(PartialStep& total, const PartialStep& s) {
  for (std::size_t j = 0; j < total.sums.size(); ++j) total.sums[j] += s.sums[j];
  for (std::size_t j = 0; j < total.counts.size(); ++j) total.counts[j] += s.counts[j];
  total.inertia += s.inertia;
}

class KMeansPartition final : public AllToAllPartition {
 public:
  KMeansPartition(Params p, const Task& task, const float* rows, Local& local)
      : p_(std::move(p)), c_(p_.seeding ? std::vector<float>(p_.k * p_.d, 0.0f) : p_.centroids), local_(local),
        rows_(rows), begin_(task.begin), home_(task.rows),
        kept_(task.rows),
        assigner_(std::make_unique<PartialAssigner>(rows, task.rows, p_.d, p_.k, devices_for(local, p_.k, p_.d),
                                                    local.model, p_.bounds)) {
    if (!p_.labels.empty()) labels_ = std::make_unique<LabelsWriter>(p_.labels, task.units);
    if (p_.seeding) seeding_ = SeedingRounds(p_.seed, task.units, p_.d, p_.k);
  }

  // Own rows, then the rows computed for other members (in id order),
  // summed; in the labels round, each one's labels written as well.
  Bytes contribute(std::int64_t) override {
    if (!seeding_.done()) return seeding_.contribute(pieces());
    PartialStep s = step(*assigner_, begin_);
    for (auto& [id, e] : extra_) add_into(s, step(*e.assigner, e.begin));
    if (labelling_) labels_->sync();
    return encode_step(s);
  }
  bool timed() const override { return seeding_.done(); }
  std::int64_t rows() const override {
    std::int64_t n = kept_;
    for (const auto& [id, e] : extra_) n += e.rows;
    return n;
  }
  bool keep(std::int64_t rows) override {
    rows = std::clamp<std::int64_t>(rows, 0, home_);
    if (rows == kept_) return true;
    kept_ = rows;
    own_piece_.reset();
    assigner_ = std::make_unique<PartialAssigner>(rows_, kept_, p_.d, p_.k, devices_for(local_, p_.k, p_.d),
                                                  local_.model, p_.bounds);
    return true;
  }
  bool add_extra(std::uint32_t member, std::int64_t begin, std::int64_t rows, std::span<const std::byte> data) override {
    if (data.size() != static_cast<std::size_t>(rows * p_.d) * sizeof(float)) return false;
    const auto* x = reinterpret_cast<const float*>(data.data());
    extra_[member] = {std::make_unique<PartialAssigner>(x, rows, p_.d, p_.k, devices_for(local_, p_.k, p_.d),
                                                        local_.model, p_.bounds),
                      x, begin, rows, nullptr};
    return true;
  }
  void drop_extra(std::uint32_t member) override { extra_.erase(member); }
  // The member's blocks, each given back once computed.
  Bytes stand_in(std::uint32_t member) override {
    auto it = taken_.find(member);
    if (it == taken_.end()) return idle();
    if (!seeding_.done()) return seed_in(it->second);
    PartialStep s = nothing();
    for (auto& b : it->second.blocks) {
      add_into(s, step(*b.assigner, b.begin));
      if (it->second.release) it->second.release(b.begin, b.begin + b.rows);
    }
    if (labelling_) labels_->sync();
    return encode_step(s);
  }
  bool take_over(std::uint32_t member, std::int64_t begin, std::int64_t rows, std::span<const std::byte> data,
                 const Release& release) override {
    if (data.size() != static_cast<std::size_t>(rows * p_.d) * sizeof(float)) return false;
    // Blocks of ~32 MiB: the pages a stand-in holds at once.
    const std::int64_t per = std::max<std::int64_t>(1024, (std::int64_t{32} << 20) / (p_.d * 4));
    auto& t = taken_[member];
    t.release = release;
    const auto* x = reinterpret_cast<const float*>(data.data());
    for (std::int64_t at = 0; at < rows; at += per) {
      const std::int64_t n = std::min(per, rows - at);
      t.blocks.push_back({std::make_unique<PartialAssigner>(x + at * p_.d, n, p_.d, p_.k,
                                                            devices_for(local_, p_.k, p_.d), local_.model, p_.bounds),
                          x + at * p_.d, begin + at, n, nullptr});
    }
    return true;
  }
  void hand_back(std::uint32_t member) override { taken_.erase(member); }
  Bytes idle() const override { return seeding_.done() ? encode_step(nothing()) : seeding_.nothing(); }
  void validate(std::span<const std::byte> b) const override {
    if (!seeding_.done()) return seeding_.validate(b);
    decode_step(b, p_.k, p_.d);
  }

  // Lloyd's partial sums add up; the seeding rounds' samples do not.
  std::optional<Bytes> combine(std::span<const std::byte> a, std::span<const std::byte> b) const override {
    if (!seeding_.done()) return std::nullopt;
    PartialStep s = decode_step(a, p_.k, p_.d);
    add_into(s, decode_step(b, p_.k, p_.d));
    return encode_step(s);
  }

  // Sum of the members' partials, in id order: every participant runs the
  // same update on the same numbers.
  //
  // With --output-labels, the round after the last (converged, or the
  // iteration limit) is the labels round: every participant assigns the rows
  // it computes to the final centroids and writes their labels (the
  // single-node final assignment), and the centroids stay; its inertia is
  // theirs, as single-node reports it.
  //
  // The seeding rounds (--init kmeans-parallel) come first and are no
  // iterations: the limit counts Lloyd's rounds only.
  RoundOutcome absorb(std::int64_t round, const std::map<std::uint32_t, Bytes>& contributions) override {
    if (!seeding_.done()) {
      RoundOutcome out{false, seeding_.absorb(contributions)};
      if (seeding_.done()) {
        c_ = seeding_.seeds();
        forget_pieces();
      }
      return out;
    }
    // A coordinator resumed from the checkpoint of the last round runs one
    // more, which changes nothing.
    if (ended_) return {false, {}, true};
    const std::int64_t iteration = round - seeding_.rounds();
    PartialStep total = nothing();
    for (const auto& [id, bytes] : contributions) add_into(total, decode_step(bytes, p_.k, p_.d));
    inertia_ = total.inertia;
    if (labelling_) return {true, {{"inertia", total.inertia}, {"labels", "written"}}};
    std::int64_t reseeded = 0;
    const double shift = update_centroids(total.sums, total.counts, c_, p_.k, p_.d, &reseeded);
    const bool stop = p_.tol > 0 && shift < p_.tol;
    labelling_ = labels_ && (stop || iteration >= p_.max_iter);
    RoundOutcome out{stop && !labels_, {{"inertia", total.inertia}, {"max_shift", shift}}};
    out.last = ended_ = !labels_ && iteration >= p_.max_iter;
    return out;
  }

  Bytes shared_state() const override {
    Out o;
    o.array(c_);
    o.put(inertia_);
    o.put<std::uint8_t>(labelling_);
    o.put<std::uint8_t>(ended_);
    seeding_.put(o);
    return std::move(o.b);
  }
  void adopt(std::span<const std::byte> state) override {
    In i(state);
    c_ = i.exactly<float>(static_cast<std::uint64_t>(p_.k * p_.d), "centroids");
    inertia_ = i.get<double>();
    labelling_ = i.get<std::uint8_t>() != 0 && labels_;
    ended_ = i.get<std::uint8_t>() != 0;
    seeding_.get(i);
    i.end();
    forget_pieces();  // measured against the candidates of before
  }

 private:
  Params p_;
  std::vector<float> c_;
  double inertia_ = 0;
  Local& local_;
  // Sums and counts of no rows: what partials are added to.
  PartialStep nothing() const {
    return {std::vector<double>(p_.k * p_.d, 0.0), std::vector<std::int64_t>(p_.k, 0), 0, 0, 0};
  }

  // One assignment step over rows from `begin` of the input; their labels
  // written in the labels round.
  PartialStep step(PartialAssigner& a, std::int64_t begin) {
    PartialStep s = a.step(c_);
    if (labelling_) {
      const auto per = a.rows_per_device();
      std::vector<std::int32_t> l(static_cast<std::size_t>(std::accumulate(per.begin(), per.end(), std::int64_t{0})));
      a.labels(l.data());
      labels_->write(begin, l);
    }
    return s;
  }

  const float* rows_;
  std::int64_t begin_;         // of the partition in the input
  std::int64_t home_, kept_;  // the partition's rows, of which computed here
  std::unique_ptr<PartialAssigner> assigner_;
  struct Block {
    std::unique_ptr<PartialAssigner> assigner;
    const float* x;
    std::int64_t begin, rows;  // of the input
    std::unique_ptr<kmeans_parallel::Piece> piece;  // while seeding
  };
  struct Taken {
    std::vector<Block> blocks;
    Release release;
  };
  std::map<std::uint32_t, Taken> taken_;  // lost members' rows, stood in for
  struct Extra {
    std::unique_ptr<PartialAssigner> assigner;
    const float* x;
    std::int64_t begin, rows;  // of the input
    std::unique_ptr<kmeans_parallel::Piece> piece;  // while seeding
  };
  std::map<std::uint32_t, Extra> extra_;  // other members' tails (re-split)
  std::unique_ptr<LabelsWriter> labels_;  // --output-labels
  bool labelling_ = false;                // this round writes the labels
  bool ended_ = false;                    // the iteration limit was reached
  SeedingRounds seeding_;                 // done from the start unless --init kmeans-parallel
  std::unique_ptr<kmeans_parallel::Piece> own_piece_;

  // The seeding's pieces of the rows this participant computes: its own
  // and other members' tails, each made when first needed.
  std::vector<kmeans_parallel::Piece*> pieces() {
    if (!own_piece_) own_piece_ = std::make_unique<kmeans_parallel::Piece>(rows_, begin_, kept_, p_.d);
    std::vector<kmeans_parallel::Piece*> out{own_piece_.get()};
    for (auto& [id, e] : extra_) {
      if (!e.piece) e.piece = std::make_unique<kmeans_parallel::Piece>(e.x, e.begin, e.rows, p_.d);
      out.push_back(e.piece.get());
    }
    return out;
  }
  // A lost member's seeding contribution, its rows' pages given back as
  // each sgemm block of them is measured (they are not this node's rows).
  Bytes seed_in(Taken& t) {
    std::vector<kmeans_parallel::Piece*> ps;
    for (auto& b : t.blocks) {
      if (!b.piece) b.piece = std::make_unique<kmeans_parallel::Piece>(b.x, b.begin, b.rows, p_.d, t.release);
      ps.push_back(b.piece.get());
    }
    Bytes out = seeding_.contribute(ps);
    if (t.release)
      for (const auto& b : t.blocks) t.release(b.begin, b.begin + b.rows);
    return out;
  }
  void forget_pieces() {
    own_piece_.reset();
    for (auto& [id, e] : extra_) e.piece.reset();
    for (auto& [id, t] : taken_)
      for (auto& b : t.blocks) b.piece.reset();
  }
};

class KMeansWorkload final : public Workload {
 public:
  Exchange exchange() const override { return Exchange::AllToAll; }
  bool gathers() const override { return true; }

  // Rows per second of this node's devices for the job's shape ([SysInfo]'s processor of measured speed): one assignment step on synthetic
  // rows, on each device alone, summed. Measuring them together would split the probe evenly and
  // let the slowest device set the node's rate (an emulated fpga beside the cpu would make a worker
  // look many times slower than it is). The per-device rates land in local.model, so the job's first split among
  // them follows them too. The probe is on every job's critical path, so it is kept short: the rows
  // come from a multiplicative hash (normal deviates would take a large share of the probe), and
  // the warm-up step (allocations, thread pools, the cpu's sgemm layout choice) runs on a prefix of
  // them.
  double measure(std::span<const std::byte> probe, Local& local) const override {
    In in(probe);
    const auto d = in.get<std::int64_t>(), k = in.get<std::int64_t>();
    in.end();
    if (d < 1 || d > kMaxD || k < 1 || k > kMaxK) throw InputError("probe with an impossible shape");
    const std::int64_t n = std::clamp<std::int64_t>(20000000 / std::max<std::int64_t>(d * k, 1), 1024, 65536);
    std::vector<float> x(n * d), c(k * d);
    auto fill = [](std::vector<float>& v, std::uint32_t seed) {
      for (std::size_t i = 0; i < v.size(); ++i) {
        const std::uint32_t h = (static_cast<std::uint32_t>(i) + seed) * 2654435761u;
        v[i] = static_cast<float>(h >> 8) * (1.0f / 16777216.0f) - 0.5f;  // uniform in [-0.5, 0.5)
      }
    };
    fill(x, 1);
    fill(c, 7);
    const std::int64_t warm = std::min<std::int64_t>(n, 1024);
    // Each device: a warm-up launch, then measured launches until two in a
    // row agree within 10% (at most four), and the fastest. A single short
    // launch is often far off on a shared machine, and the partition it
    // set would then cost every round the difference.
    double total = 0;
    for (Device* dev : devices_for(local, k, d)) {
      PerfModel scratch;
      PartialAssigner(x.data(), warm, d, k, {dev}, scratch).step(c);
      PartialAssigner a(x.data(), n, d, k, {dev}, local.model);
      double last = 0, best = 0;
      for (int trial = 0; trial < 4; ++trial) {
        const double r = n / std::max(a.step(c).compute_seconds, 1e-6);
        best = std::max(best, r);
        if (trial > 0 && std::abs(r - last) <= 0.1 * std::max(r, last)) break;
        last = r;
      }
      total += best;
    }
    return total;
  }

  std::unique_ptr<Partition> open(const Task& task, std::span<const std::byte> data, Local& local) const override {
    Params p = decode_params(task.params);
    if (data.size() != static_cast<std::size_t>(task.rows * p.d) * sizeof(float))
      throw InputError("k-means partition of " + std::to_string(data.size()) + " bytes for " +
                       std::to_string(task.rows) + " rows");
    return std::make_unique<KMeansPartition>(std::move(p), task, reinterpret_cast<const float*>(data.data()), local);
  }

  void read(const Task& task, std::span<std::byte> out) const override {
    const Params p = decode_params(task.params);
    if (out.size() != static_cast<std::size_t>(task.rows * p.d) * sizeof(float))
      throw InputError("k-means partition size does not match its rows");
    // Only this partition's rows (.npy: only their bytes).
    auto* rows = reinterpret_cast<float*>(out.data());
    if (!p.parts.empty()) return load_parts_rows(p.parts, p.d, task.begin, task.rows, rows);
    load_matrix_rows(task.input, task.units, p.d, task.begin, task.rows, rows, &p.marks);
  }

  Bytes survey(std::span<const std::byte> request) const override { return count_requested_split(request); }
};

ACCEL_REGISTER_WORKLOAD("kmeans", KMeansWorkload);

}  // namespace

KMeansJob::KMeansJob(const KMeansJobOptions& o) : o_(o) {
  kmeans_uses_bounds(o.algorithm, 16);  // rejects an unknown name before the input is read
  const auto t0 = Clock::now();
  // Streamed: the checks and the seeding pass over a mapped .npy and give
  // its pages back, so the coordinator holds its own share, not the file.
  // With --pull and a seeding that needs few rows, the coordinator reads
  // only the rows it computes, checked as data() hands them out; each
  // worker checks the rows it reads.
  checked_ = reads_every_row();
  if (o.k < 1) throw InputError("--k " + std::to_string(o.k) + ": must be at least 1");
  surveying_ = o.pull && seeding() && text_file(o.input);
  if (surveying_) {
    // Counted by the members (surveyed()); the probe's columns until then
    // are the first MiB's.
    text_path_ = std::filesystem::absolute(o.input).string();
    text_bytes_ = static_cast<std::int64_t>(std::filesystem::file_size(o.input));
    x_.cols = std::max<std::int64_t>(1, count_text_split(text_path_, text_bytes_, 0, std::min<std::int64_t>(text_bytes_, 1 << 20)).cols);
    checked_ = true;  // each range data() reads is checked as it is parsed
    loading_ = secs(t0, Clock::now());
    return;
  }
  x_ = checked_ ? load_matrix_streamed(o.input) : load_matrix_streamed_unchecked(o.input);
  KMeansOptions ko;
  ko.k = o.k;
  ko.max_iter = o.max_iter;
  ko.tol = o.tol;
  ko.init = o.init;
  ko.seed = o.seed;
  // k-means|| is drawn by the members in the job's first rounds, each from
  // its own rows; the other seedings here.
  if (!seeding()) init_ = kmeans_init(x_, ko).data;
  loading_ = secs(t0, Clock::now());
  shaped();
}

void KMeansJob::shaped() {
  if (seeding() && o_.k > x_.rows)
    throw InputError("--k " + std::to_string(o_.k) + " exceeds the " + std::to_string(x_.rows) + " input rows");
  bounds_ = kmeans_uses_bounds(o_.algorithm, x_.cols);
  if (!o_.output_labels.empty())
    labels_ = std::make_unique<LabelsFile>(std::filesystem::absolute(o_.output_labels).string(), x_.rows, o_.resumed);
  // A contribution (k x d sums, k counts) or a task (k x d centroids, the
  // peers' addresses) must fit one control message.
  const std::int64_t k = o_.k, d = x_.cols;
  if (k * d * 8 + k * 8 + (std::int64_t{64} << 10) > static_cast<std::int64_t>(transport::kMaxControlPayloadLimit))
    throw InputError("k x d = " + std::to_string(k) + " x " + std::to_string(d) +
                     ": partial results would exceed the " + std::to_string(transport::kMaxControlPayloadLimit >> 20) +
                     " MiB control-message bound of the distributed job");
}

Bytes KMeansJob::survey(std::uint32_t member, int members) const {
  return surveying_ ? text_split_request(text_path_, text_bytes_, member, members) : Bytes{};
}

void KMeansJob::surveyed(int members, const std::map<std::uint32_t, Bytes>& answers) {
  if (!surveying_) return;
  const auto t0 = Clock::now();
  SurveyedText s = surveyed_text(text_path_, text_bytes_, members, answers);
  x_.rows = s.rows;
  x_.cols = s.cols;
  x_.parts = std::move(s.parts);
  check_densify_text(text_path_, x_.rows, x_.cols, text_bytes_);
  loading_ += secs(t0, Clock::now());
  shaped();
}

// A surveyed split's bytes are sampled and checked by its reader
// (InputPart::sample): the digest would need the coordinator to parse them.
std::uint64_t KMeansJob::digest(std::int64_t begin, std::int64_t end) {
  return surveying_ ? 0 : Job::digest(begin, end);
}

std::uint64_t KMeansJob::fingerprint() {
  if (!surveying_) return Job::fingerprint();
  return static_cast<std::uint64_t>(text_split_sample(text_path_, 0, text_bytes_)) << 32 ^
         static_cast<std::uint64_t>(text_bytes_);
}

Bytes KMeansJob::probe() const {
  Out o;
  o.put<std::int64_t>(x_.cols);
  o.put<std::int64_t>(o_.k);
  return std::move(o.b);
}

// --init FILE.npy names centroids: the file is part of the input, so its
// name stands in for them (the centroids themselves are in params()).
Job::Options KMeansJob::result_options() const {
  return {{"--k", std::to_string(o_.k)},          {"--init", o_.init},
          {"--seed", std::to_string(o_.seed)},    {"--algorithm", o_.algorithm},
          {"--tol", option_text(o_.tol)},               {"--max-iter", std::to_string(o_.max_iter)}};
}

Bytes KMeansJob::params() const {
  return encode_params({x_.cols, o_.k, o_.tol, bounds_, seeding(), o_.seed, init_, o_.max_iter,
                        labels_ ? labels_->partial() : "", x_.marks, x_.parts});
}

std::uint64_t KMeansJob::data_bytes(std::int64_t begin, std::int64_t end) const {
  return static_cast<std::uint64_t>(end - begin) * x_.cols * sizeof(float);
}

std::span<const std::byte> KMeansJob::data(std::int64_t begin, std::int64_t end) {
  if (surveying_) {
    auto it = std::find_if(spilled_.begin(), spilled_.end(),
                           [&](const auto& e) { return e.first.first <= begin && end <= e.first.second; });
    if (it == spilled_.end())
      it = spilled_.emplace(std::pair{begin, end}, stream_parts_rows(x_.parts, x_.cols, begin, end - begin)).first;
    return {reinterpret_cast<const std::byte*>(it->second.row(begin - it->first.first)), data_bytes(begin, end)};
  }
  if (!checked_) check_rows(begin, end);
  return {reinterpret_cast<const std::byte*>(x_.row(begin)), data_bytes(begin, end)};
}

void KMeansJob::release(std::int64_t begin, std::int64_t end) {
  if (!surveying_) return release_rows(x_, begin, end);
  for (const auto& [range, m] : spilled_) {
    const std::int64_t lo = std::max(begin, range.first), hi = std::min(end, range.second);
    if (lo < hi) release_rows(m, lo - range.first, hi - range.first);
  }
}

// Rows [begin, end) checked finite a block at a time, each block's pages
// given back: the range may be a lost member's, which the stand-in reads
// a block at a time later. Each row is checked once: the ranges checked
// are kept (a stand-in's rows are digested again when a plan moves them).
void KMeansJob::check_rows(std::int64_t begin, std::int64_t end) {
  const std::int64_t per = std::max<std::int64_t>(1024, (std::int64_t{32} << 20) / (x_.cols * 4));
  std::int64_t at = begin;
  while (at < end) {
    auto next = checked_ranges_.upper_bound(at);  // the first range starting after `at`
    if (next != checked_ranges_.begin() && std::prev(next)->second > at) {
      at = std::prev(next)->second;  // inside a checked range: skip to its end
      continue;
    }
    const std::int64_t stop = std::min({end, at + per, next == checked_ranges_.end() ? end : next->first});
    Matrix rows;
    rows.rows = stop - at;
    rows.cols = x_.cols;
    rows.view = std::shared_ptr<const float>(x_.row(at), [](const float*) {});
    check_finite(rows, o_.input, at);
    release_rows(x_, at, stop);
    checked_ranges_[at] = stop;
    at = stop;
  }
}

std::string KMeansJob::finish(std::span<const std::byte> state, nlohmann::json& summary) {
  In i(state);
  const auto c = i.exactly<float>(static_cast<std::uint64_t>(o_.k * x_.cols), "centroids");
  const double inertia = i.get<double>();
  i.get<std::uint8_t>();  // labelling
  i.get<std::uint8_t>();  // ended
  SeedingRounds seeding;
  seeding.get(i);
  if (seeding.rounds() > 0) {
    // Lloyd's rounds; a resume from the last round's checkpoint ran one
    // more that changed nothing (the partition's `ended_`).
    const std::int64_t lloyd = summary["iterations"].get<std::int64_t>() - seeding.rounds();
    summary["iterations"] = std::min<std::int64_t>(lloyd, o_.max_iter + (labels_ ? 1 : 0));
    summary["seeding_rounds"] = seeding.rounds();
  }
  if (labels_) {
    // The labels round is no iteration of the algorithm.
    summary["iterations"] = summary["iterations"].get<std::int64_t>() - 1;
    const std::int64_t missing = labels_->unlabelled();
    summary["unlabelled"] = missing;
    if (missing > 0 && !o_.rows_may_drop)
      throw InputError(o_.output_labels + ": " + std::to_string(missing) + " rows were not labelled");
  }
  if (!o_.output_centroids.empty()) write_npy(o_.output_centroids, c.data(), {o_.k, x_.cols});
  if (labels_) labels_->commit();
  summary["d"] = x_.cols;
  summary["k"] = o_.k;
  summary["inertia"] = inertia;
  summary["seconds"]["loading"] = loading_;
  summary["seconds"]["total"] = summary["seconds"]["total"].get<double>() + loading_;
  std::ostringstream line;
  line << "distributed k-means: " << x_.rows << " rows, k=" << o_.k << ", " << summary["workers"].get<int>()
       << " workers, " << summary["iterations"].get<std::int64_t>() << " iterations, inertia " << inertia;
  return line.str();
}

}  // namespace accel::cluster
