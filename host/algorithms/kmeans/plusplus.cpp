// k-means++ (Arthur and Vassilvitskii, "k-means++: The Advantages of Careful
// Seeding", 2007) with triangle-inequality pruning (seeding.hpp).
#include <algorithm>
#include <cmath>
#include <limits>

#include "accel/interrupt.hpp"
#include "seeding.hpp"

namespace accel::seeding {
namespace {

constexpr std::int64_t kBlock = 4096;  // rows per block: the unit of threads, sums and draws
constexpr std::int64_t kAhead = 4;     // rows prefetched ahead

void prefetch_row(const float* r, std::int64_t d) {
  const char* p = reinterpret_cast<const char*>(r);
  for (std::int64_t at = 0; at < d * 4; at += 64) __builtin_prefetch(p + at);
}

}  // namespace

float sqdist(const float* a, const float* b, std::int64_t d) {
  float s = 0;
#pragma omp simd reduction(+ : s)
  for (std::int64_t j = 0; j < d; ++j) {
    const float t = a[j] - b[j];
    s += t * t;
  }
  return s;
}

Seeder::Seeder(const Matrix& x, const double* weight)
    : x_(x), w_(weight), mind_(x.rows, std::numeric_limits<float>::infinity()), nearest_(x.rows, -1),
      sums_((x.rows + kBlock - 1) / kBlock, 0.0) {}

double Seeder::block_sum(std::int64_t b) const {
  const std::int64_t end = std::min(x_.rows, (b + 1) * kBlock);
  double s = 0;
  for (std::int64_t i = b * kBlock; i < end; ++i) s += (w_ ? w_[i] : 1.0) * mind_[i];
  return s;
}

void Seeder::adopt(const float* center) {
  centers_.insert(centers_.end(), center, center + x_.cols);
  ++t_;
}

void Seeder::refresh() {
  const auto blocks = static_cast<std::int64_t>(sums_.size());
#pragma omp parallel for schedule(static)
  for (std::int64_t b = 0; b < blocks; ++b) sums_[b] = block_sum(b);
}

void Seeder::add(const float* c) {
  const std::int64_t d = x_.cols, t = t_;
  // gap[j] = |c - c_j|^2 / 4: a row nearest c_j with distance^2 <= gap[j]
  // cannot be nearer to c.
  std::vector<float> gap(t);
  for (std::int64_t j = 0; j < t; ++j) gap[j] = 0.25f * sqdist(c, centers_.data() + j * d, d);
  centers_.insert(centers_.end(), c, c + d);
  const auto blocks = static_cast<std::int64_t>(sums_.size());
#pragma omp parallel
  {
    std::vector<std::int64_t> near;  // the block's rows the bound does not rule out
    near.reserve(kBlock);
#pragma omp for schedule(dynamic, 4)
    for (std::int64_t b = 0; b < blocks; ++b) {
      const std::int64_t end = std::min(x_.rows, (b + 1) * kBlock);
      near.clear();
      for (std::int64_t i = b * kBlock; i < end; ++i) {
        const std::int32_t j = nearest_[i];
        if (j < 0 || mind_[i] > gap[j]) near.push_back(i);
      }
      // The rows left are scattered (those near c): their lines are
      // fetched a few rows ahead, or each row waits on its own misses.
      bool moved = false;
      const auto m = static_cast<std::int64_t>(near.size());
      for (std::int64_t q = 0; q < m; ++q) {
        if (q + kAhead < m) prefetch_row(x_.row(near[q + kAhead]), d);
        const std::int64_t i = near[q];
        const float dd = sqdist(x_.row(i), c, d);
        if (dd < mind_[i] || nearest_[i] < 0) {
          mind_[i] = dd;
          nearest_[i] = static_cast<std::int32_t>(t);
          moved = true;
        }
      }
      if (moved) sums_[b] = block_sum(b);
      release_rows(x_, b * kBlock, end);  // a streamed input's pages (io.hpp)
    }
  }
  ++t_;
}

double Seeder::total() const {
  double total = 0;
  for (double s : sums_) total += s;
  return total;
}

std::int64_t Seeder::draw(std::mt19937_64& rng) const {
  const double total = this->total();
  if (!(total > 0) || !std::isfinite(total))
    return std::uniform_int_distribution<std::int64_t>(0, x_.rows - 1)(rng);
  double r = std::uniform_real_distribution<double>(0, total)(rng);
  const auto blocks = static_cast<std::int64_t>(sums_.size());
  std::int64_t b = 0;
  for (; b + 1 < blocks && r >= sums_[b]; ++b) r -= sums_[b];
  const std::int64_t end = std::min(x_.rows, (b + 1) * kBlock);
  std::int64_t last = -1;  // rounding can leave r past the block's end: its last row of weight
  for (std::int64_t i = b * kBlock; i < end; ++i) {
    const double wi = (w_ ? w_[i] : 1.0) * mind_[i];
    if (wi <= 0) continue;
    last = i;
    r -= wi;
    if (r < 0) return i;
  }
  if (last >= 0) return last;
  // Rounding carried r past every row of weight in this block: the last
  // row of weight before it.
  for (std::int64_t bb = b - 1; bb >= 0; --bb)
    if (sums_[bb] > 0)
      for (std::int64_t i = std::min(x_.rows, (bb + 1) * kBlock) - 1; i >= bb * kBlock; --i)
        if ((w_ ? w_[i] : 1.0) * mind_[i] > 0) return i;
  return b * kBlock;  // unreachable while total > 0
}

// k-means++ over weighted rows (weight nullptr: plain k-means++).
Matrix plusplus(const Matrix& x, const double* weight, std::int64_t k, std::mt19937_64& rng) {
  Matrix c;
  c.rows = k;
  c.cols = x.cols;
  c.data.resize(k * x.cols);
  Seeder s(x, weight);
  std::int64_t pick;
  if (weight) {
    // The first center by weight alone.
    double total = 0;
    for (std::int64_t i = 0; i < x.rows; ++i) total += weight[i];
    double r = std::uniform_real_distribution<double>(0, total)(rng);
    pick = x.rows - 1;
    for (std::int64_t i = 0; i < x.rows; ++i)
      if ((r -= weight[i]) < 0) {
        pick = i;
        break;
      }
  } else {
    pick = std::uniform_int_distribution<std::int64_t>(0, x.rows - 1)(rng);
  }
  for (std::int64_t kk = 0; kk < k; ++kk) {
    interruption_point();
    if (kk > 0) pick = s.draw(rng);
    std::copy_n(x.row(pick), x.cols, c.data.begin() + kk * x.cols);
    if (kk + 1 < k) s.add(c.row(kk));  // the last center draws nothing more
  }
  return c;
}

}  // namespace accel::seeding
