// Distributed SVM training on the cluster engine (Narasimhan et al., "Fast
// Support Vector Machines Using Parallel Adaptive Shrinking on Distributed
// Systems", 2014): the coordinator runs svm_train with the parallel solver
// (accel/svm_parallel.hpp), whose rounds are the engine's central exchange:
// members report their best violators, the coordinator decides the working
// set and its multipliers, members update the gradients of their rows.
#pragma once

#include <chrono>
#include <condition_variable>
#include <exception>
#include <mutex>
#include <optional>
#include <string>
#include <thread>

#include "accel/svm_parallel.hpp"
#include "engine.hpp"
#include "rates.hpp"

namespace accel::cluster {

struct SvmJobOptions {
  std::string train_file, model_file;
  SvmParams params;
  std::string device = "cpu";  // the coordinator's devices
};

class SvmJob final : public Job, private svm_parallel::Director {
 public:
  // Reads the training set; throws InputError.
  explicit SvmJob(const SvmJobOptions& o);
  ~SvmJob() override;
  std::string workload() const override { return "svm"; }
  std::int64_t units() const override { return data_.x.rows; }
  std::int64_t max_rounds() const override { return std::int64_t{1} << 60; }
  Bytes probe() const override;
  Bytes params() const override;
  Options result_options() const override;
  std::string input_name() const override { return o_.train_file; }
  std::uint64_t data_bytes(std::int64_t, std::int64_t) const override { return blob_.size(); }
  std::span<const std::byte> data(std::int64_t, std::int64_t) override { return blob_; }
  void partitioned(const std::vector<std::int64_t>& begin, const std::vector<std::int64_t>& rows) override;
  Bytes decide(std::int64_t round, const std::map<std::uint32_t, Bytes>& contributions) override;
  std::string finish(std::span<const std::byte> state, nlohmann::json& summary) override;
  // Coordinator restart: the problems solved so far; on a resume, svm_train
  // runs again and takes those instead of solving them, and the problem in
  // progress starts from the checkpoint's multipliers.
  Bytes saved() const override;
  void restore(std::span<const std::byte> saved, std::span<const std::byte> shared_state) override;

  const LabeledCsr& training_set() const { return data_; }
  const SvmModel& model() const { return model_; }
  const SvmTrainReport& report() const { return report_; }
  const std::vector<std::string>& device_names() const { return device_names_; }

 private:
  // Director: the trainer thread's side of the rounds.
  std::map<std::uint32_t, svm_parallel::Report> round(const std::vector<svm_parallel::Op>& ops) override;
  std::vector<svm_parallel::Range> owners() const override { return owners_; }
  std::map<std::uint32_t, svm_parallel::Report> exchange(const std::vector<svm_parallel::Op>& ops);
  bool reassign(const std::map<std::uint32_t, svm_parallel::Report>& reports);
  std::map<std::uint32_t, svm_parallel::Report> follow_membership(std::map<std::uint32_t, svm_parallel::Report> reports);
  void measure(const std::map<std::uint32_t, svm_parallel::Report>& reports);
  void resplit(const std::map<std::uint32_t, svm_parallel::Report>& reports);
  bool worth_moving(const std::vector<std::uint32_t>& ids, const std::vector<std::int64_t>& active,
                    const std::vector<double>& caps, const std::vector<svm_parallel::Range>& home) const;
  std::map<std::uint32_t, svm_parallel::Report> move_rows(const std::vector<svm_parallel::Range>& before);
  void follow(const svm_parallel::Op& op);
  BinarySolution solve(const DualProblem& pb, const SvmParams& params, KernelRows& kr, SvmTimes& times);
  void train();

  SvmJobOptions o_;
  LabeledCsr data_;
  Bytes blob_;
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

  // Between the engine's thread (decide) and the trainer thread (round):
  // one decision out, the next round's contributions back.
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::optional<Bytes> decision_;
  std::optional<std::map<std::uint32_t, Bytes>> contributions_;
  bool outstanding_ = false, trained_ = false, stopping_ = false;
  std::exception_ptr error_;
  std::thread trainer_;
  SvmModel model_;
  SvmTrainReport report_;
  std::int64_t rounds_ = 0, moves_ = 0;
  // Every dual problem solved, in svm_train's order (the trainer writes,
  // saved() reads between rounds); on a resume, the checkpoint's, and the
  // multipliers of the one it was solving.
  std::vector<BinarySolution> solved_, restored_;
  std::optional<std::vector<double>> resume_alpha_;
};

}  // namespace accel::cluster
