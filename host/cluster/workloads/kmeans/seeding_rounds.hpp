// k-means|| seeding [KMeansPar12] as the first rounds of a distributed
// k-means job (--init kmeans-parallel): the members draw the candidates
// from their own rows, so the coordinator reads none but its own share.
//
// The rounds, each an all-to-all exchange whose contributions every
// participant absorbs into the same next state:
//   pick    the owner of each row asked for sends it (the first candidate;
//           the k random seeds where too few candidates were drawn);
//   cost    each member's sum of its rows' distances; phi is their sum;
//   sample  each member's rows drawn with probability l * distance / phi;
//   weigh   each member's count of rows nearest each candidate; every
//           participant then runs the same weighted k-means++ over them.
// cost and sample alternate for kmeans_parallel::kRounds rounds. A row's
// draw depends on the seed, the round and its number in the input only
// (kmeans_parallel.hpp), so the seeds are those one process draws over the
// whole input, however the rows are split or moved.
#pragma once

#include <cstdint>
#include <map>
#include <nlohmann/json.hpp>
#include <random>
#include <span>
#include <vector>

#include "accel/codec.hpp"
#include "accel/kmeans_parallel.hpp"
#include "protocol.hpp"

namespace accel::cluster {

class SeedingRounds {
 public:
  // Rounds a seeding may take before the job gives up: 6 draw it (pick, 2 x
  // cost and sample, weigh), one more picks random seeds, and the rest pick
  // again rows no member held (--on-loss drop).
  static constexpr std::int64_t kMaxRounds = 32;

  SeedingRounds() = default;  // nothing to draw: the seeds came with the task
  // n rows of d columns, k seeds.
  SeedingRounds(std::uint64_t seed, std::int64_t n, std::int64_t d, std::int64_t k);

  bool done() const { return phase_ == Phase::Done; }
  // The job's rounds spent seeding (no iterations of Lloyd's).
  std::int64_t rounds() const { return rounds_; }
  // k x d, once done().
  const std::vector<float>& seeds() const { return cand_; }

  // This participant's contribution from the rows it computes this round
  // (its own, and any other member's in its charge), measuring them first.
  Bytes contribute(const std::vector<kmeans_parallel::Piece*>& pieces) const;
  // A contribution of no rows.
  Bytes nothing() const;
  // Throws InputError for a contribution this round cannot hold.
  void validate(std::span<const std::byte> contribution) const;
  // Every participant: the round's contributions (in member order) into
  // the next state; the fields for the round's log line.
  nlohmann::json absorb(const std::map<std::uint32_t, Bytes>& contributions);

  void put(Out& o) const;
  void get(In& i);

 private:
  enum class Phase : std::uint8_t { Pick, Cost, Sample, Weigh, Done };
  struct Rows {
    std::vector<std::int64_t> ids;
    std::vector<float> data;
  };
  Rows decode_rows(std::span<const std::byte> b) const;
  std::map<std::int64_t, std::vector<float>> gather(const std::map<std::uint32_t, Bytes>& contributions) const;
  void absorb_pick(const std::map<std::uint32_t, Bytes>& contributions);
  void absorb_sample(const std::map<std::uint32_t, Bytes>& contributions);
  void absorb_weigh(const std::map<std::uint32_t, Bytes>& contributions);
  std::int64_t candidates() const { return d_ > 0 ? static_cast<std::int64_t>(cand_.size()) / d_ : 0; }

  Phase phase_ = Phase::Done;
  std::uint64_t seed_ = 0;
  std::int64_t n_ = 0, d_ = 0, k_ = 0;
  int drawn_ = 0;             // k-means|| rounds drawn
  std::int64_t rounds_ = 0;   // the job's rounds so far
  std::vector<std::int64_t> wanted_;  // pick: the rows asked for
  bool fallback_ = false;     // pick: the k random seeds, not the first candidate
  std::vector<float> cand_;   // the candidates, m x d (done: the seeds)
  double phi_ = 0;
  std::mt19937_64 rng_;       // the single-node run's generator, after the same draws
};

}  // namespace accel::cluster
