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
#include <cblas.h>

#include <algorithm>
#include <chrono>
#include <limits>

#include "accel/interrupt.hpp"
#include "accel/log.hpp"
#include "runtime/blas_threads.hpp"
#include "seeding.hpp"

namespace accel::seeding {
namespace {

constexpr std::int64_t kRows = 256;       // rows per sgemm block
constexpr std::int64_t kCandidates = 1024;  // candidates per sgemm block

float norm2(const float* a, std::int64_t d) {
  float s = 0;
#pragma omp simd reduction(+ : s)
  for (std::int64_t j = 0; j < d; ++j) s += a[j] * a[j];
  return s;
}

// Rows' distances and nearest candidates after adding `cand` (rows of x,
// numbered from `first`).
void add_candidates(const Matrix& x, const std::vector<std::int64_t>& cand, std::int64_t first, Seeder& s) {
  const std::int64_t d = x.cols, n = x.rows;
  std::vector<float>& mind = s.distances();
  std::vector<std::int32_t>& nearest = s.nearest();
  for (std::size_t f0 = 0; f0 < cand.size(); f0 += kCandidates) {
    const auto f = static_cast<std::int64_t>(std::min<std::size_t>(kCandidates, cand.size() - f0));
    std::vector<float> c(f * d), cn(f);
    for (std::int64_t q = 0; q < f; ++q) {
      const float* cq = x.row(cand[f0 + q]);
      std::copy_n(cq, d, c.data() + q * d);
      cn[q] = norm2(cq, d);
    }
    const std::int64_t blocks = (n + kRows - 1) / kRows;
    const BlasThreads one(1);  // each thread's sgemm on that thread (OpenBLAS's pthread build too)
#pragma omp parallel
    {
      std::vector<float> dot(kRows * f), best(kRows);
      std::vector<std::int32_t> arg(kRows);
#pragma omp for schedule(dynamic, 8)
      for (std::int64_t b = 0; b < blocks; ++b) {
        const std::int64_t i0 = b * kRows, m = std::min(kRows, n - i0);
        // Scores candidate-major (f x m, row stride m): the running minimum
        // then goes down the candidates with every lane a row, the layout
        // Lloyd's gemm path also finds faster.
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, static_cast<int>(f), static_cast<int>(m),
                    static_cast<int>(d), 1.0f, c.data(), static_cast<int>(d), x.row(i0), static_cast<int>(d), 0.0f,
                    dot.data(), static_cast<int>(m));
        std::fill_n(best.begin(), m, std::numeric_limits<float>::infinity());
        std::fill_n(arg.begin(), m, 0);
        for (std::int64_t q = 0; q < f; ++q) {
          const float* sq = dot.data() + q * m;
          const float cq = cn[q];
          const auto q32 = static_cast<std::int32_t>(q);
#pragma omp simd
          for (std::int64_t r = 0; r < m; ++r) {
            const float v = cq - 2.0f * sq[r];
            const bool lower = v < best[r];  // strict: the first candidate of a tie
            best[r] = lower ? v : best[r];
            arg[r] = lower ? q32 : arg[r];
          }
        }
        for (std::int64_t r = 0; r < m; ++r) {
          // The distance to the candidate picked, exactly: |x|^2 + |c|^2 -
          // 2 x.c cancels where the rows lie far from the origin (values of
          // 1000 +- 1 in 100-D: |x|^2 ~ 1e8, a float step 8, distances
          // ~200), and a row drawn would keep a rounding residue and could
          // be drawn again. d flops a row, against the block's f * d.
          const float dd = sqdist(x.row(i0 + r), c.data() + arg[r] * d, d);
          if (dd < mind[i0 + r]) {
            mind[i0 + r] = dd;
            nearest[i0 + r] = static_cast<std::int32_t>(first + static_cast<std::int64_t>(f0) + arg[r]);
          }
        }
        release_rows(x, i0, i0 + m);  // a streamed input's pages (io.hpp)
      }
    }
  }
}

}  // namespace

Matrix kmeans_parallel(const Matrix& x, std::int64_t k, std::mt19937_64& rng) {
  constexpr int kRounds = 2;
  const double l = static_cast<double>(k);
  Seeder s(x, nullptr);
  std::vector<std::int64_t> chosen{std::uniform_int_distribution<std::int64_t>(0, x.rows - 1)(rng)};
  s.add(x.row(chosen[0]));
  for (int round = 0; round < kRounds; ++round) {
    interruption_point();
    const double phi = s.total();
    if (!(phi > 0)) break;
    const std::vector<float>& mind = s.distances();
    std::vector<std::int64_t> fresh;
    std::uniform_real_distribution<double> u(0, 1);
    for (std::int64_t i = 0; i < x.rows; ++i)
      if (mind[i] > 0 && u(rng) < l * mind[i] / phi) fresh.push_back(i);
    const auto t0 = std::chrono::steady_clock::now();
    add_candidates(x, fresh, static_cast<std::int64_t>(chosen.size()), s);
    log::debug("accel kmeans") << "k-means|| round " << round + 1 << ": " << fresh.size() << " candidates measured in "
                               << std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() << " s";
    for (const auto i : fresh) s.adopt(x.row(i));
    chosen.insert(chosen.end(), fresh.begin(), fresh.end());
    s.refresh();
  }
  const auto m = static_cast<std::int64_t>(chosen.size());
  if (m < k) return random_rows(x, k, rng);  // degenerate data: too few distinct rows to draw
  Matrix cand;
  cand.rows = m;
  cand.cols = x.cols;
  cand.data.resize(m * x.cols);
  for (std::int64_t c = 0; c < m; ++c) std::copy_n(x.row(chosen[c]), x.cols, cand.data.begin() + c * x.cols);
  if (m == k) return cand;
  std::vector<double> weight(m, 0.0);
  for (const std::int32_t j : s.nearest()) weight[j] += 1;
  return plusplus(cand, weight.data(), k, rng);
}

}  // namespace accel::seeding
