// Distributed SVM training on the cluster engine (Narasimhan et al., "Fast
// Support Vector Machines Using Parallel Adaptive Shrinking on Distributed
// Systems", 2014): the coordinator runs svm_train with the parallel solver
// (accel/svm_parallel.hpp), whose rounds are the engine's central exchange:
// members report their best violators, the coordinator decides the working
// set and its multipliers, members update the gradients of their rows.
//
// The training is a task (svm_train_steps) on the engine's thread: each
// decide() resumes it with the round's contributions, and it runs until it
// leaves its next decision in the job's mailbox.
#pragma once

#include <string>

#include "accel/io.hpp"
#include "accel/svm_parallel.hpp"
#include "engine.hpp"
#include "rates.hpp"

namespace accel::cluster {

struct SvmJobOptions {
  std::string train_file, model_file;
  SvmParams params;
  std::string device = "cpu";  // the coordinator's devices
  // Every member reads the training file (--pull): members read only the
  // rows they own, and other rows travel as a round needs them.
  bool shared_storage = false;
};

class SvmJob final : public Job, private svm_parallel::Members {
 public:
  // Reads the training set; throws InputError.
  explicit SvmJob(const SvmJobOptions& o);
  std::string workload() const override { return "svm"; }
  std::int64_t units() const override { return data_.x.rows; }
  std::int64_t max_rounds() const override { return std::int64_t{1} << 60; }
  Bytes probe() const override;
  Bytes params() const override;
  Options result_options() const override;
  std::string input_name() const override { return o_.train_file; }
  // Every member gets the training file's bytes (and parses them): the
  // coordinator maps the file (part files: joined, map_joined_text) and
  // gives its pages back once pushed.
  // Sharded, none: members read the rows they own.
  std::uint64_t data_bytes(std::int64_t, std::int64_t) const override {
    return sharded_ ? 0 : file_->bytes().size();
  }
  std::span<const std::byte> data(std::int64_t, std::int64_t) override {
    return sharded_ ? std::span<const std::byte>{} : file_->bytes();
  }
  void release(std::int64_t, std::int64_t) override { file_->release(); }
  void pushed(std::span<const std::byte> bytes) override { file_->release(bytes); }
  // Two blocks of the default 64 MiB: the coordinator's peak stays a few
  // blocks of the file.
  std::size_t push_window() const override { return std::size_t{128} << 20; }
  bool coordinator_shares() const override { return full_; }
  std::unique_ptr<Partition> open_own(const Task& task, Local& local) override;
  void partitioned(const std::vector<std::int64_t>& begin, const std::vector<std::int64_t>& rows) override;
  Bytes decide(std::int64_t round, const std::map<std::uint32_t, Bytes>& contributions) override;
  std::string finish(std::span<const std::byte> state, nlohmann::json& summary) override;
  // Coordinator restart: the problems solved so far (Trainer).
  Bytes saved() const override;
  void restore(std::span<const std::byte> saved, std::span<const std::byte> shared_state) override;

  // The labels, lines and shape of the training set; its rows only with
  // -b 1 (whose cross-validation runs here).
  const LabeledCsr& training_set() const { return data_; }
  const SvmModel& model() const { return model_; }
  const SvmTrainReport& report() const { return report_; }
  const std::vector<std::string>& device_names() const { return device_names_; }

 private:
  using Reports = std::map<std::uint32_t, svm_parallel::Report>;
  // Members: a decision out, its round's reports back, with the membership
  // and re-split rounds it leads to.
  accel::Task<Reports> round(svm_parallel::Op op) override;
  std::vector<svm_parallel::Range> owners() const override { return owners_; }
  bool sharded() const override { return sharded_; }
  accel::Task<Reports> exchange(svm_parallel::Op op);
  bool reassign(const Reports& reports);
  std::uint32_t survivor(const Reports& reports) const;
  bool computes(std::uint32_t id) const;
  accel::Task<Reports> follow_membership(Reports reports);
  accel::Task<Reports> settled(Reports reports);
  void measure(const Reports& reports);
  void resplit(const Reports& reports);
  bool worth_moving(const std::vector<std::uint32_t>& ids, const std::vector<std::int64_t>& active,
                    const std::vector<double>& caps, const std::vector<svm_parallel::Range>& home) const;
  accel::Task<Reports> move_rows(std::vector<svm_parallel::Range> before);
  void follow(const svm_parallel::Op& op);

  void read_training_set();
  std::pair<std::size_t, std::int64_t> part_of(std::int64_t row) const;
  const LabeledCsr& every_row();
  void fill_support_vectors();

  SvmJobOptions o_;
  // The coordinator decides and holds no rows (LabeledCsr with empty rows:
  // labels, lines, shape), unless -b 1 needs them all here (full_), or
  // every worker is lost and it computes their rows (every_row()).
  LabeledCsr data_;
  bool full_ = false;
  bool sharded_ = false;
  // The training file, or its part files: each one's rows and the marks
  // of every 4096th, for members that read their own (sharded).
  std::vector<InputPart> parts_;
  std::int64_t nonzeros_ = 0;
  std::vector<std::int64_t> offsets_;  // each row's line in its part (the support vectors' read back)
  std::unique_ptr<MappedFile> file_;
  std::unique_ptr<LabeledCsr> all_rows_;
  Registry registry_;
  std::vector<Device*> devices_;
  std::vector<std::string> device_names_;
  // home: where each member's rows belong (the engine's partition by
  // measured speed, then re-split as the speeds drift); owners: where they
  // are now (a lost member's rows are the coordinator's until it returns).
  std::vector<svm_parallel::Range> home_, owners_;
  RateCollector rates_;
  // Drift at 20% over the mean for 3 rounds: a round waits for its
  // slowest member.
  DriftPolicy drift_;
  SwingDamper swings_;
  bool resplit_due_ = false;
  // The current problem, as far as a re-split's price goes (follow()).
  std::int64_t steps_ = 0;
  std::vector<std::int32_t> rows_;  // the problem's variables' rows (empty: variable k is row k)
  double move_seconds_ = 0;         // the last re-split's move, measured (0: none yet)
  std::int64_t resplits_ = 0;
  double loading_ = 0;

  SvmModel model_;
  SvmTrainReport report_;
  std::int64_t moves_ = 0;
  bool trained_ = false;
  // Solves the training's problems across the members (this job), and
  // keeps them for a checkpoint.
  svm_parallel::Trainer trainer_{*this};
  // The training, and where it leaves each decision and waits for the
  // round's contributions. Last: its frames refer to the members above.
  Mailbox<Bytes, std::map<std::uint32_t, Bytes>> mailbox_;
  accel::Task<SvmModel> training_;
};

}  // namespace accel::cluster
