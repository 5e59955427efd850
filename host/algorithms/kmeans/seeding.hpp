// Seeding for k-means: D^2 sampling (k-means++) and its parallel form
// (k-means||), built to stay cheaper than a few Lloyd iterations on inputs
// of millions of rows (init.cpp picks among them and the other inits).
#pragma once

#include <cstdint>
#include <random>
#include <vector>

#include "accel/io.hpp"

namespace accel::seeding {

// D^2 sampling state over the rows of x: each row's squared distance to its
// nearest chosen center, and which center that is.
//
// A new center c only moves the rows it is nearer to. A row whose nearest
// center is c_j and |c - c_j| >= 2 |x - c_j| cannot be nearer to c
// (triangle inequality), so add() reads only the row's distance and center
// index, not the row -- the pruning of Raff, "Exact Acceleration of K-Means++
// and K-Means||" (2021). Once centers cover the data, a new one reads the
// rows around it rather than the whole input: 1,024 centers of 10M x 100
// rows read ~4 TB unpruned. Where distances do not separate (one
// high-dimensional blob) it prunes little and costs what plain k-means++
// does.
class Seeder {
 public:
  // weight: one per row (nullptr: all 1), kept by the caller.
  Seeder(const Matrix& x, const double* weight);
  // The next center's row: drawn with probability weight * distance^2
  // (uniformly while every distance is 0).
  std::int64_t draw(std::mt19937_64& rng) const;
  // The sum of weight * distance^2 (k-means||'s cost phi).
  double total() const;
  void add(const float* center);
  std::int64_t centers() const { return t_; }
  std::vector<float>& distances() { return mind_; }
  std::vector<std::int32_t>& nearest() { return nearest_; }
  // A center whose distances the caller measured itself (k-means||'s
  // sgemm blocks): it joins the centers a later add() prunes against.
  void adopt(const float* center);
  // After distances or nearest were changed outside add().
  void refresh();

 private:
  double block_sum(std::int64_t b) const;
  const Matrix& x_;
  const double* w_;
  std::vector<float> mind_;
  std::vector<std::int32_t> nearest_;
  std::vector<float> centers_;  // t x d
  std::vector<double> sums_;    // weight * distance^2 per block of rows
  std::int64_t t_ = 0;
};

// Squared Euclidean distance in float (the seeding's precision: it only
// weighs the draws).
float sqdist(const float* a, const float* b, std::int64_t d);

Matrix plusplus(const Matrix& x, const double* weight, std::int64_t k, std::mt19937_64& rng);
// seed: the job's, which the rows' draws are computed from (kmeans_parallel.hpp).
Matrix kmeans_parallel(const Matrix& x, std::int64_t k, std::uint64_t seed, std::mt19937_64& rng);
Matrix random_rows(const Matrix& x, std::int64_t k, std::mt19937_64& rng);

}  // namespace accel::seeding
