// Initial centroids: random rows, k-means++ (D^2 sampling), k-means|| as
// Spark MLlib runs it (2 rounds, oversampling 2k, weighted k-means++ on the
// candidates), or a user file.
#include <omp.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <random>

#include "accel/error.hpp"
#include "accel/kmeans.hpp"

namespace accel {
namespace {

double sqdist(const float* a, const float* b, std::int64_t d) {
  double s = 0;
  for (std::int64_t j = 0; j < d; ++j) {
    const double t = static_cast<double>(a[j]) - b[j];
    s += t * t;
  }
  return s;
}

// mind[i] = min(mind[i], ||x_i - c||^2) for every row.
void update_min_dist(const Matrix& x, const float* c, std::vector<double>& mind) {
#pragma omp parallel for schedule(static)
  for (std::int64_t i = 0; i < x.rows; ++i) mind[i] = std::min(mind[i], sqdist(x.row(i), c, x.cols));
}

std::int64_t sample_weighted(const std::vector<double>& w, std::mt19937_64& rng) {
  const double total = std::accumulate(w.begin(), w.end(), 0.0);
  if (!(total > 0)) return std::uniform_int_distribution<std::int64_t>(0, static_cast<std::int64_t>(w.size()) - 1)(rng);
  double r = std::uniform_real_distribution<double>(0, total)(rng);
  for (std::size_t i = 0; i < w.size(); ++i) {
    r -= w[i];
    if (r < 0) return static_cast<std::int64_t>(i);
  }
  return static_cast<std::int64_t>(w.size()) - 1;
}

// k-means++ over weighted points (weights = 1 for plain k-means++).
Matrix plusplus(const Matrix& x, const std::vector<double>& weight, std::int64_t k, std::mt19937_64& rng) {
  Matrix c;
  c.rows = k;
  c.cols = x.cols;
  c.data.resize(k * x.cols);
  std::vector<double> mind(x.rows, std::numeric_limits<double>::infinity());
  std::int64_t first = sample_weighted(weight, rng);
  std::copy_n(x.row(first), x.cols, c.data.begin());
  update_min_dist(x, c.row(0), mind);
  std::vector<double> w(x.rows);
  for (std::int64_t kk = 1; kk < k; ++kk) {
    for (std::int64_t i = 0; i < x.rows; ++i) w[i] = weight[i] * mind[i];
    const std::int64_t pick = sample_weighted(w, rng);
    std::copy_n(x.row(pick), x.cols, c.data.begin() + kk * x.cols);
    update_min_dist(x, c.row(kk), mind);
  }
  return c;
}

Matrix random_rows(const Matrix& x, std::int64_t k, std::mt19937_64& rng) {
  std::vector<std::int64_t> idx(x.rows);
  std::iota(idx.begin(), idx.end(), 0);
  // Partial Fisher-Yates: k distinct rows.
  for (std::int64_t i = 0; i < k; ++i)
    std::swap(idx[i], idx[std::uniform_int_distribution<std::int64_t>(i, x.rows - 1)(rng)]);
  Matrix c;
  c.rows = k;
  c.cols = x.cols;
  c.data.resize(k * x.cols);
  for (std::int64_t i = 0; i < k; ++i) std::copy_n(x.row(idx[i]), x.cols, c.data.begin() + i * x.cols);
  return c;
}

Matrix kmeans_parallel(const Matrix& x, std::int64_t k, std::mt19937_64& rng) {
  const int steps = 2;                         // Spark's initializationSteps
  const double oversample = 2.0 * static_cast<double>(k);  // Spark's l = 2k
  std::vector<std::int64_t> chosen{std::uniform_int_distribution<std::int64_t>(0, x.rows - 1)(rng)};
  std::vector<double> mind(x.rows, std::numeric_limits<double>::infinity());
  update_min_dist(x, x.row(chosen[0]), mind);
  std::vector<char> taken(x.rows, 0);
  taken[chosen[0]] = 1;
  for (int s = 0; s < steps; ++s) {
    const double cost = std::accumulate(mind.begin(), mind.end(), 0.0);
    if (!(cost > 0)) break;
    std::vector<std::int64_t> fresh;
    std::uniform_real_distribution<double> u(0, 1);
    for (std::int64_t i = 0; i < x.rows; ++i)
      if (!taken[i] && u(rng) < oversample * mind[i] / cost) fresh.push_back(i);
    for (auto i : fresh) {
      taken[i] = 1;
      chosen.push_back(i);
      update_min_dist(x, x.row(i), mind);
    }
  }
  // Weight each candidate by the rows closest to it, then pick k of them by
  // weighted k-means++ (Spark follows with a local Lloyd; the main Lloyd
  // loop does that job here).
  Matrix cand;
  cand.rows = static_cast<std::int64_t>(chosen.size());
  cand.cols = x.cols;
  cand.data.resize(cand.rows * x.cols);
  for (std::int64_t c = 0; c < cand.rows; ++c) std::copy_n(x.row(chosen[c]), x.cols, cand.data.begin() + c * x.cols);
  if (cand.rows == k) return cand;
  if (cand.rows < k) return random_rows(x, k, rng);  // degenerate data: too few candidates
  std::vector<double> weight(cand.rows, 0.0);
  std::vector<std::vector<double>> local(omp_get_max_threads(), std::vector<double>(cand.rows, 0.0));
#pragma omp parallel for schedule(static)
  for (std::int64_t i = 0; i < x.rows; ++i) {
    double best = std::numeric_limits<double>::infinity();
    std::int64_t arg = 0;
    for (std::int64_t c = 0; c < cand.rows; ++c) {
      const double dd = sqdist(x.row(i), cand.row(c), x.cols);
      if (dd < best) { best = dd; arg = c; }
    }
    local[omp_get_thread_num()][arg] += 1;
  }
  for (auto& l : local)
    for (std::int64_t c = 0; c < cand.rows; ++c) weight[c] += l[c];
  return plusplus(cand, weight, k, rng);
}

}  // namespace

Matrix kmeans_init(const Matrix& x, const KMeansOptions& opts) {
  if (opts.k < 1) throw InputError("--k " + std::to_string(opts.k) + ": must be at least 1");
  if (opts.k > x.rows)
    throw InputError("--k " + std::to_string(opts.k) + " exceeds the " + std::to_string(x.rows) + " input rows");
  std::mt19937_64 rng(opts.seed);
  if (opts.init == "random") return random_rows(x, opts.k, rng);
  if (opts.init == "kmeans++") return plusplus(x, std::vector<double>(x.rows, 1.0), opts.k, rng);
  if (opts.init == "kmeans-parallel") return kmeans_parallel(x, opts.k, rng);
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
