// Distributed k-means on the cluster engine ([Antimatroid]): every
// member
// assigns its rows to the nearest centroids and contributes per-cluster
// sums and counts; the all-to-all exchange gives every participant the same
// sums, and each computes the same next centroids.
#pragma once

#include <map>
#include <string>

#include "accel/io.hpp"
#include "engine.hpp"
#include "labels_file.hpp"
#include "seeding_rounds.hpp"

namespace accel::cluster {

struct KMeansJobOptions {
  std::string input, init = "kmeans++", output_centroids;
  // Written by the members into one preallocated file (labels_file.hpp).
  std::string output_labels;
  bool resumed = false;     // from a checkpoint: keep the labels written so far
  bool rows_may_drop = false;  // --on-loss drop: rows left out stay unlabelled (-1)
  bool pull = false;           // --pull: the workers read their own rows (and check them)
  std::string algorithm = "auto";  // lloyd | yinyang | auto, for every participant
  std::int64_t k = 8;
  int max_iter = 100;
  double tol = 1e-4;
  std::uint64_t seed = 0;
};

class KMeansJob final : public Job {
 public:
  // Reads the input and chooses the initial centroids; throws InputError.
  explicit KMeansJob(const KMeansJobOptions& o);
  std::string workload() const override { return "kmeans"; }
  std::int64_t units() const override { return x_.rows; }
  // With labels, one more round writes them; k-means|| takes rounds before
  // the iterations (the partition counts them and ends the job).
  std::int64_t max_rounds() const override {
    return o_.max_iter + (labels_ ? 1 : 0) + (seeding() ? SeedingRounds::kMaxRounds : 0);
  }
  Options result_options() const override;
  std::string input_name() const override { return o_.input; }
  Bytes probe() const override;
  Bytes params() const override;
  std::uint64_t data_bytes(std::int64_t begin, std::int64_t end) const override;
  std::span<const std::byte> data(std::int64_t begin, std::int64_t end) override;
  void release(std::int64_t begin, std::int64_t end) override;
  std::string finish(std::span<const std::byte> state, nlohmann::json& summary) override;
  // --pull, k-means|| and a text input: the members count it in byte
  // splits (text_survey.hpp), and the coordinator reads only the rows it
  // computes.
  Bytes survey(std::uint32_t member, int members) const override;
  void surveyed(int members, const std::map<std::uint32_t, Bytes>& answers) override;
  std::uint64_t digest(std::int64_t begin, std::int64_t end) override;
  std::uint64_t fingerprint() override;

 private:
  void shaped();  // the checks and outputs that need the input's shape
  bool seeding() const { return o_.init == "kmeans-parallel"; }
  void check_rows(std::int64_t begin, std::int64_t end);
  // Whether the coordinator reads every row: to seed k-means++, or to push.
  bool reads_every_row() const { return !o_.pull || o_.init == "kmeans++"; }
  KMeansJobOptions o_;
  Matrix x_;
  std::vector<float> init_;
  bool bounds_ = false;
  double loading_ = 0;
  bool checked_ = true;  // every row checked finite at loading (else each range data() hands out)
  std::map<std::int64_t, std::int64_t> checked_ranges_;  // begin -> end of the rows data() checked
  std::unique_ptr<LabelsFile> labels_;
  // Surveyed: the text file (absolute) and its size; the rows data() read,
  // by [begin, end), each spilled and mapped (kept while the job runs:
  // partitions hold spans of them).
  bool surveying_ = false;
  std::string text_path_;
  std::int64_t text_bytes_ = 0;
  std::map<std::pair<std::int64_t, std::int64_t>, Matrix> spilled_;
};

}  // namespace accel::cluster
