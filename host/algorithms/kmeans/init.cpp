// Initial centroids: random rows, k-means++ (plusplus.cpp), k-means||
// (kmeans_parallel.cpp), or a user file.
#include <algorithm>
#include <random>
#include <unordered_map>

#include "accel/error.hpp"
#include "accel/kmeans.hpp"
#include "accel/kmeans_parallel.hpp"
#include "seeding.hpp"

namespace accel {

std::vector<std::int64_t> kmeans_parallel::random_rows(std::int64_t n, std::int64_t k, std::mt19937_64& rng) {
  // A partial Fisher-Yates over the indices drawn, kept in a map (an index
  // vector of every row would be 80 MB at 10M rows).
  std::unordered_map<std::int64_t, std::int64_t> moved;
  auto at = [&](std::int64_t i) {
    const auto it = moved.find(i);
    return it == moved.end() ? i : it->second;
  };
  std::vector<std::int64_t> rows(static_cast<std::size_t>(k));
  for (std::int64_t i = 0; i < k; ++i) {
    const std::int64_t j = std::uniform_int_distribution<std::int64_t>(i, n - 1)(rng);
    rows[i] = at(j);
    moved[j] = at(i);
  }
  return rows;
}

Matrix seeding::random_rows(const Matrix& x, std::int64_t k, std::mt19937_64& rng) {
  Matrix c;
  c.rows = k;
  c.cols = x.cols;
  c.data.resize(k * x.cols);
  const auto rows = kmeans_parallel::random_rows(x.rows, k, rng);
  for (std::int64_t i = 0; i < k; ++i) std::copy_n(x.row(rows[i]), x.cols, c.data.begin() + i * x.cols);
  return c;
}

Matrix kmeans_init(const Matrix& x, const KMeansOptions& opts) {
  if (opts.k < 1) throw InputError("--k " + std::to_string(opts.k) + ": must be at least 1");
  if (opts.k > x.rows)
    throw InputError("--k " + std::to_string(opts.k) + " exceeds the " + std::to_string(x.rows) + " input rows");
  std::mt19937_64 rng(opts.seed);
  if (opts.init == "random") return seeding::random_rows(x, opts.k, rng);
  if (opts.init == "kmeans++") return seeding::plusplus(x, nullptr, opts.k, rng);
  if (opts.init == "kmeans-parallel") return seeding::kmeans_parallel(x, opts.k, opts.seed, rng);
  if (opts.init.size() > 4 && opts.init.ends_with(".npy")) {
    Matrix c = read_npy(opts.init);
    check_finite(c, opts.init);
    if (c.rows != opts.k || c.cols != x.cols)
      throw InputError(opts.init + ": initial centroids are " + std::to_string(c.rows) + " x " +
                       std::to_string(c.cols) + ", expected " + std::to_string(opts.k) + " x " +
                       std::to_string(x.cols));
    return c;
  }
  throw InputError("--init " + opts.init + ": expected kmeans++, random, kmeans-parallel or a .npy file");
}

}  // namespace accel
