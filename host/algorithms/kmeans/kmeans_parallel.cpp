// k-means|| (Bahmani, Moseley, Vattani, Kumar and Vassilvitskii, "Scalable
// K-Means++", 2012): a few rounds that each draw about l rows at once, each
// row independently with probability l * d^2 / phi, then weighted k-means++
// over the drawn candidates, each weighted by the rows nearest to it.
//
// A round's candidates update every row's distance in one pass of sgemm
// blocks (|x|^2 + |c|^2 - 2 x.c), one block of rows per thread, which is
// what a Lloyd iteration over that many centroids costs. Spark MLlib draws
// l = 2k in 2 rounds: 4k candidates, four Lloyd iterations' work at k;
// here l = k (2k candidates, two iterations), which Bahmani et al. also
// found to seed well. The rows' nearest candidates are kept through the
// rounds, so the weights need no pass of their own.
//
// One process runs it over one Piece of every row; a distributed job's
// members each over theirs (kmeans_parallel.hpp), with the same draws.
#include <cblas.h>

#include <algorithm>
#include <chrono>
#include <limits>

#include "accel/interrupt.hpp"
#include "accel/kmeans_parallel.hpp"
#include "accel/log.hpp"
#include "runtime/blas_threads.hpp"
#include "seeding.hpp"

namespace accel::kmeans_parallel {
namespace {

constexpr std::int64_t kRows = 256;         // rows per sgemm block, aligned to the input's row numbers
constexpr std::int64_t kCandidates = 1024;  // candidates per sgemm block

float norm2(const float* a, std::int64_t d) {
  float s = 0;
#pragma omp simd reduction(+ : s)
  for (std::int64_t j = 0; j < d; ++j) s += a[j] * a[j];
  return s;
}

std::uint64_t mix(std::uint64_t z) {  // splitmix64's finalizer
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

// Each row's nearest of f candidates by |c|^2 - 2 x.c (strict: the first of
// a tie); the winner's distance is then measured exactly.
struct Block {
  std::vector<float> dot, best;
  std::vector<std::int32_t> arg;
  Block(std::int64_t f) : dot(kRows * f), best(kRows), arg(kRows) {}
  void nearest(const float* c, const float* cn, std::int64_t f, const float* x, std::int64_t m, std::int64_t d) {
    // Scores candidate-major (f x m, row stride m): the running minimum
    // then goes down the candidates with every lane a row, the layout
    // Lloyd's gemm path also finds faster.
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, static_cast<int>(f), static_cast<int>(m),
                static_cast<int>(d), 1.0f, c, static_cast<int>(d), x, static_cast<int>(d), 0.0f, dot.data(),
                static_cast<int>(m));
    std::fill_n(best.begin(), m, std::numeric_limits<float>::infinity());
    std::fill_n(arg.begin(), m, 0);
    for (std::int64_t q = 0; q < f; ++q) {
      const float* sq = dot.data() + q * m;
      const float cq = cn[q];
      const auto q32 = static_cast<std::int32_t>(q);
#pragma omp simd
      for (std::int64_t r = 0; r < m; ++r) {
        const float v = cq - 2.0f * sq[r];
        const bool lower = v < best[r];
        best[r] = lower ? v : best[r];
        arg[r] = lower ? q32 : arg[r];
      }
    }
  }
};

}  // namespace

double uniform(std::uint64_t seed, int round, std::int64_t row) {
  const std::uint64_t h =
      mix(mix(seed ^ (0x9e3779b97f4a7c15ULL * static_cast<std::uint64_t>(round + 1))) + static_cast<std::uint64_t>(row));
  return static_cast<double>(h >> 11) * 0x1.0p-53;
}

Piece::Piece(const float* rows, std::int64_t first, std::int64_t n, std::int64_t d, Release release)
    : rows_(rows), first_(first), n_(n), d_(d), release_(std::move(release)),
      mind_(static_cast<std::size_t>(n), std::numeric_limits<float>::infinity()),
      nearest_(static_cast<std::size_t>(n), -1) {}

const float* Piece::row(std::int64_t input_row) const {
  if (input_row < first_ || input_row >= first_ + n_) return nullptr;
  return rows_ + (input_row - first_) * d_;
}

void Piece::measure(const float* candidates, std::int64_t m) {
  const std::int64_t d = d_;
  // Block starts at the input's multiples of kRows (the first may be short).
  std::vector<std::int64_t> starts;
  for (std::int64_t i = first_; i < first_ + n_; i = (i / kRows + 1) * kRows) starts.push_back(i - first_);
  starts.push_back(n_);
  const auto blocks = static_cast<std::int64_t>(starts.size()) - 1;
  for (std::int64_t f0 = measured_; f0 < m; f0 += kCandidates) {
    const std::int64_t f = std::min(kCandidates, m - f0);
    const float* c = candidates + f0 * d;
    std::vector<float> cn(f);
    for (std::int64_t q = 0; q < f; ++q) cn[q] = norm2(c + q * d, d);
    const BlasThreads one(1);  // each thread's sgemm on that thread (OpenBLAS's pthread build too)
#pragma omp parallel
    {
      Block blk(f);
#pragma omp for schedule(dynamic, 8)
      for (std::int64_t b = 0; b < blocks; ++b) {
        const std::int64_t i0 = starts[b], rows = starts[b + 1] - i0;
        blk.nearest(c, cn.data(), f, rows_ + i0 * d, rows, d);
        for (std::int64_t r = 0; r < rows; ++r) {
          // The distance to the candidate picked, exactly: |x|^2 + |c|^2 -
          // 2 x.c cancels where the rows lie far from the origin (values of
          // 1000 +- 1 in 100-D: |x|^2 ~ 1e8, a float step 8, distances
          // ~200), and a row drawn would keep a rounding residue and could
          // be drawn again. d flops a row, against the block's f * d.
          const float dd = seeding::sqdist(rows_ + (i0 + r) * d, c + blk.arg[r] * d, d);
          if (dd < mind_[i0 + r]) {
            mind_[i0 + r] = dd;
            nearest_[i0 + r] = static_cast<std::int32_t>(f0 + blk.arg[r]);
          }
        }
        if (release_) release_(first_ + i0, first_ + i0 + rows);
      }
    }
  }
  measured_ = std::max(measured_, m);
}

double Piece::cost() const {
  double s = 0;
  for (const float v : mind_) s += v;
  return s;
}

void Piece::draw(std::uint64_t seed, int round, double l, double phi, std::vector<std::int64_t>& out) const {
  for (std::int64_t i = 0; i < n_; ++i)
    if (mind_[i] > 0 && uniform(seed, round, first_ + i) < l * mind_[i] / phi) out.push_back(first_ + i);
}

void Piece::count(std::vector<double>& weight) const {
  for (const std::int32_t j : nearest_)
    if (j >= 0 && static_cast<std::size_t>(j) < weight.size()) weight[j] += 1;
}

Matrix reduce(const float* candidates, std::int64_t m, std::int64_t d, const std::vector<double>& weight,
              std::int64_t k, std::mt19937_64& rng) {
  Matrix cand;
  cand.rows = m;
  cand.cols = d;
  cand.data.assign(candidates, candidates + m * d);
  if (m == k) return cand;
  return seeding::plusplus(cand, weight.data(), k, rng);
}

}  // namespace accel::kmeans_parallel

namespace accel::seeding {

Matrix kmeans_parallel(const Matrix& x, std::int64_t k, std::uint64_t seed, std::mt19937_64& rng) {
  namespace kp = accel::kmeans_parallel;
  const std::int64_t d = x.cols;
  const std::int64_t first = std::uniform_int_distribution<std::int64_t>(0, x.rows - 1)(rng);
  kp::Piece piece(x.row(0), 0, x.rows, d, [&x](std::int64_t b, std::int64_t e) { release_rows(x, b, e); });
  std::vector<float> cand(x.row(first), x.row(first) + d);
  piece.measure(cand.data(), 1);
  for (int round = 0; round < kp::kRounds; ++round) {
    interruption_point();
    const double phi = piece.cost();
    if (!(phi > 0)) break;
    std::vector<std::int64_t> fresh;
    piece.draw(seed, round, kp::oversampling(k), phi, fresh);
    const auto t0 = std::chrono::steady_clock::now();
    for (const auto i : fresh) cand.insert(cand.end(), x.row(i), x.row(i) + d);
    piece.measure(cand.data(), static_cast<std::int64_t>(cand.size()) / d);
    log::debug("accel kmeans") << "k-means|| round " << round + 1 << ": " << fresh.size() << " candidates measured in "
                               << std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() << " s";
  }
  const auto m = static_cast<std::int64_t>(cand.size()) / d;
  if (m < k) return random_rows(x, k, rng);  // degenerate data: too few distinct rows to draw
  std::vector<double> weight(m, 0.0);
  piece.count(weight);
  return kp::reduce(cand.data(), m, d, weight, k, rng);
}

}  // namespace accel::seeding
