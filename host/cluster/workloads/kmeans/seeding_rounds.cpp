#include "seeding_rounds.hpp"

#include <algorithm>
#include <cmath>
#include <set>
#include <sstream>

#include "accel/error.hpp"

namespace accel::cluster {
namespace {

namespace kp = kmeans_parallel;

constexpr std::uint64_t kMaxRng = 16384;  // the generator's state as text

const char* name(std::uint8_t phase) {
  static const char* names[] = {"pick", "cost", "sample", "weigh", "done"};
  return phase < 5 ? names[phase] : "?";
}

}  // namespace

SeedingRounds::SeedingRounds(std::uint64_t seed, std::int64_t n, std::int64_t d, std::int64_t k)
    : phase_(Phase::Pick), seed_(seed), n_(n), d_(d), k_(k), rng_(seed) {
  // The first candidate: the single-node run's first draw.
  wanted_ = {std::uniform_int_distribution<std::int64_t>(0, n - 1)(rng_)};
}

Bytes SeedingRounds::contribute(const std::vector<kp::Piece*>& pieces) const {
  Out o;
  switch (phase_) {
    case Phase::Pick:
    case Phase::Sample: {
      std::vector<std::int64_t> ids;
      std::vector<float> data;
      for (kp::Piece* p : pieces) {
        std::vector<std::int64_t> mine;
        if (phase_ == Phase::Pick) {
          for (const auto id : wanted_)
            if (p->row(id)) mine.push_back(id);
        } else {
          p->measure(cand_.data(), candidates());
          p->draw(seed_, drawn_, kp::oversampling(k_), phi_, mine);
        }
        for (const auto id : mine) data.insert(data.end(), p->row(id), p->row(id) + d_);
        ids.insert(ids.end(), mine.begin(), mine.end());
      }
      o.array(ids);
      o.array(data);
      break;
    }
    case Phase::Cost: {
      double cost = 0;
      for (kp::Piece* p : pieces) {
        p->measure(cand_.data(), candidates());
        cost += p->cost();
      }
      o.put(cost);
      break;
    }
    case Phase::Weigh: {
      std::vector<double> weight(static_cast<std::size_t>(candidates()), 0.0);
      for (kp::Piece* p : pieces) {
        p->measure(cand_.data(), candidates());
        p->count(weight);
      }
      o.array(weight);
      break;
    }
    case Phase::Done: break;
  }
  return std::move(o.b);
}

Bytes SeedingRounds::nothing() const {
  Out o;
  if (phase_ == Phase::Pick || phase_ == Phase::Sample) {
    o.array(std::vector<std::int64_t>{});
    o.array(std::vector<float>{});
  } else if (phase_ == Phase::Cost) {
    o.put(0.0);
  } else if (phase_ == Phase::Weigh) {
    o.array(std::vector<double>(static_cast<std::size_t>(candidates()), 0.0));
  }
  return std::move(o.b);
}

SeedingRounds::Rows SeedingRounds::decode_rows(std::span<const std::byte> b) const {
  In i(b);
  Rows r;
  r.ids = i.array<std::int64_t>(static_cast<std::uint64_t>(n_));
  r.data = i.exactly<float>(r.ids.size() * static_cast<std::uint64_t>(d_), "seeding rows");
  i.end();
  for (const auto id : r.ids)
    if (id < 0 || id >= n_) throw InputError("k-means|| seeding: row " + std::to_string(id) + " is not in the input");
  for (const float v : r.data)
    if (!std::isfinite(v)) throw InputError("k-means|| seeding: a row with a value that is not finite");
  return r;
}

void SeedingRounds::validate(std::span<const std::byte> b) const {
  if (phase_ == Phase::Pick || phase_ == Phase::Sample) {
    decode_rows(b);
    return;
  }
  In i(b);
  if (phase_ == Phase::Cost) {
    const double c = i.get<double>();
    if (!(c >= 0) || !std::isfinite(c)) throw InputError("k-means|| seeding: a cost that is not a finite sum");
  } else if (phase_ == Phase::Weigh) {
    for (const double w : i.exactly<double>(static_cast<std::uint64_t>(candidates()), "seeding weights"))
      if (!(w >= 0) || w > static_cast<double>(n_)) throw InputError("k-means|| seeding: an impossible weight");
  }
  i.end();
}

nlohmann::json SeedingRounds::absorb(const std::map<std::uint32_t, Bytes>& contributions) {
  const auto phase = static_cast<std::uint8_t>(phase_);
  ++rounds_;
  switch (phase_) {
    case Phase::Pick: absorb_pick(contributions); break;
    case Phase::Cost:
      phi_ = 0;
      for (const auto& [id, b] : contributions) phi_ += In(b).get<double>();
      phase_ = phi_ > 0 ? Phase::Sample : Phase::Weigh;
      break;
    case Phase::Sample: absorb_sample(contributions); break;
    case Phase::Weigh: absorb_weigh(contributions); break;
    case Phase::Done: break;
  }
  if (!done() && rounds_ >= kMaxRounds)
    throw InputError("k-means|| seeding did not finish in " + std::to_string(kMaxRounds) +
                     " rounds: the rows it asked for are held by no member");
  return {{"seeding", name(phase)}, {"candidates", candidates()}};
}

// The rows the members sent, by row number (the first copy of each).
std::map<std::int64_t, std::vector<float>> SeedingRounds::gather(
    const std::map<std::uint32_t, Bytes>& contributions) const {
  std::map<std::int64_t, std::vector<float>> rows;
  for (const auto& [id, b] : contributions) {
    const Rows r = decode_rows(b);
    for (std::size_t q = 0; q < r.ids.size(); ++q)
      rows.try_emplace(r.ids[q], r.data.begin() + q * d_, r.data.begin() + (q + 1) * d_);
  }
  return rows;
}

// The rows asked for, from whoever holds them. A row nobody sent (left
// out under --on-loss drop) is replaced by another drawn at random.
void SeedingRounds::absorb_pick(const std::map<std::uint32_t, Bytes>& contributions) {
  auto got = gather(contributions);
  std::set<std::int64_t> asked(wanted_.begin(), wanted_.end());
  bool missing = false;
  for (auto& id : wanted_) {
    if (got.count(id)) continue;
    missing = true;
    if (static_cast<std::int64_t>(asked.size()) >= n_)
      throw InputError("k-means|| seeding: every row of the input was asked for, and some are held by no member");
    std::int64_t other = id;
    while (asked.count(other)) other = std::uniform_int_distribution<std::int64_t>(0, n_ - 1)(rng_);
    asked.insert(other);
    id = other;
  }
  if (missing) return;  // pick again
  cand_.clear();
  for (const auto id : wanted_) cand_.insert(cand_.end(), got[id].begin(), got[id].end());
  wanted_.clear();
  phase_ = fallback_ ? Phase::Done : Phase::Cost;
}

// The rows drawn join the candidates in the order of their row numbers:
// the order one process draws them in.
void SeedingRounds::absorb_sample(const std::map<std::uint32_t, Bytes>& contributions) {
  const auto drawn = gather(contributions);
  for (const auto& [row, v] : drawn) cand_.insert(cand_.end(), v.begin(), v.end());
  ++drawn_;
  phase_ = drawn_ < kp::kRounds ? Phase::Cost : Phase::Weigh;
}

void SeedingRounds::absorb_weigh(const std::map<std::uint32_t, Bytes>& contributions) {
  const std::int64_t m = candidates();
  std::vector<double> weight(static_cast<std::size_t>(m), 0.0);
  for (const auto& [id, b] : contributions) {
    In i(b);
    const auto w = i.exactly<double>(static_cast<std::uint64_t>(m), "seeding weights");
    for (std::int64_t j = 0; j < m; ++j) weight[j] += w[j];
  }
  if (m < k_) {  // degenerate data: too few distinct rows to draw
    wanted_ = kp::random_rows(n_, k_, rng_);
    fallback_ = true;
    phase_ = Phase::Pick;
    return;
  }
  cand_ = kp::reduce(cand_.data(), m, d_, weight, k_, rng_).data;
  phase_ = Phase::Done;
}

// Once done, only the rounds it took.
void SeedingRounds::put(Out& o) const {
  o.put(static_cast<std::uint8_t>(phase_));
  o.put(rounds_);
  if (done()) return;
  o.put(seed_);
  o.put(n_);
  o.put(d_);
  o.put(k_);
  o.put<std::int32_t>(drawn_);
  o.array(wanted_);
  o.put<std::uint8_t>(fallback_);
  o.array(cand_);
  o.put(phi_);
  std::ostringstream rng;
  rng << rng_;
  o.text(rng.str());
}

void SeedingRounds::get(In& i) {
  const auto phase = i.get<std::uint8_t>();
  if (phase > static_cast<std::uint8_t>(Phase::Done)) throw InputError("k-means|| seeding in an unknown phase");
  phase_ = static_cast<Phase>(phase);
  rounds_ = i.get<std::int64_t>();
  if (rounds_ < 0 || rounds_ > kMaxRounds) throw InputError("k-means|| seeding state out of bounds");
  if (done()) return;
  seed_ = i.get<std::uint64_t>();
  n_ = i.get<std::int64_t>();
  d_ = i.get<std::int64_t>();
  k_ = i.get<std::int64_t>();
  drawn_ = i.get<std::int32_t>();
  if (n_ < 1 || d_ < 1 || k_ < 1 || k_ > n_ || drawn_ < 0 || drawn_ > kp::kRounds)
    throw InputError("k-means|| seeding state out of bounds");
  wanted_ = i.array<std::int64_t>(static_cast<std::uint64_t>(k_));
  fallback_ = i.get<std::uint8_t>() != 0;
  // Candidates: about 2k drawn on average; a bound far above any draw.
  cand_ = i.array<float>(static_cast<std::uint64_t>(std::min<std::int64_t>(n_, 64 * k_ + 64) * d_));
  if (d_ > 0 && cand_.size() % static_cast<std::size_t>(d_) != 0) throw InputError("k-means|| candidates cut short");
  phi_ = i.get<double>();
  std::istringstream rng(i.text(kMaxRng));
  rng >> rng_;
  if (!rng) throw InputError("k-means|| seeding: an unreadable generator state");
}

}  // namespace accel::cluster
