// k-means|| [KMeansPar12] over pieces of the input: the seeding's state of
// a range of rows, so that the members of a distributed job, each over its
// own rows, draw the candidates one process draws over all of them.
//
// Two things make the draws independent of how the rows are split. A row's
// draw uses a deviate computed from the seed, the round and the row's number
// in the input, not the next number of a shared generator. And rows are
// scored in blocks aligned to their numbers in the input, so a row meets
// the same sgemm block wherever its piece begins.
#pragma once

#include <cstdint>
#include <functional>
#include <random>
#include <vector>

#include "accel/io.hpp"

namespace accel::kmeans_parallel {

// Rounds of drawing; each draws about l = k rows (Bahmani et al. found
// l from k/2 to 2k seeds as well as k-means++; Spark draws 2k in 2).
constexpr int kRounds = 2;
inline double oversampling(std::int64_t k) { return static_cast<double>(k); }

// Row `row`'s deviate in [0, 1) in round `round` of the job seeded `seed`.
double uniform(std::uint64_t seed, int round, std::int64_t row);

// Rows [first, first + n) of the input (n x d at `rows`): each one's
// squared distance to its nearest candidate, and which candidate that is.
class Piece {
 public:
  // release(begin, end): rows of the input this piece is done reading for
  // now (a mapped input gives their pages back).
  using Release = std::function<void(std::int64_t begin, std::int64_t end)>;
  Piece(const float* rows, std::int64_t first, std::int64_t n, std::int64_t d, Release release = {});

  std::int64_t first() const { return first_; }
  std::int64_t size() const { return n_; }
  // Row `input_row` of the input, or null when this piece does not hold it.
  const float* row(std::int64_t input_row) const;
  // Candidates measured so far.
  std::int64_t measured() const { return measured_; }
  // Measures candidates [measured(), m) of `candidates` (m x d, every
  // candidate so far, in the job's order).
  void measure(const float* candidates, std::int64_t m);
  // The sum of the rows' distances (the piece's share of phi).
  double cost() const;
  // Appends the rows (numbers in the input) round `round` draws: each one
  // with probability l * distance / phi.
  void draw(std::uint64_t seed, int round, double l, double phi, std::vector<std::int64_t>& out) const;
  // weight[j] += the rows whose nearest candidate is j.
  void count(std::vector<double>& weight) const;

 private:
  const float* rows_;
  std::int64_t first_, n_, d_;
  Release release_;
  std::vector<float> mind_;
  std::vector<std::int32_t> nearest_;
  std::int64_t measured_ = 0;
};

// The k seeds from m > k weighted candidates (m x d): weighted k-means++.
Matrix reduce(const float* candidates, std::int64_t m, std::int64_t d, const std::vector<double>& weight,
              std::int64_t k, std::mt19937_64& rng);

// The rows k random seeds take, drawn as single-node --init random draws
// them (distinct, a partial Fisher-Yates shuffle of 0..n-1).
std::vector<std::int64_t> random_rows(std::int64_t n, std::int64_t k, std::mt19937_64& rng);

}  // namespace accel::kmeans_parallel
