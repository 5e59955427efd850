#include <algorithm>
#include <cmath>

#include "accel/error.hpp"
#include "accel/topk.hpp"
#include "residual.hpp"

namespace accel {

namespace sparsify {

void check_momentum(double momentum) {
  if (!(momentum >= 0 && momentum < 1))
    throw InputError("momentum " + std::to_string(momentum) + ": must be within [0, 1)");
}

void accumulate_residual(float* r, float* u, const float* g, std::int64_t n, double momentum) {
  if (momentum > 0) {
    const auto m = static_cast<float>(momentum);
#pragma omp parallel for simd schedule(static)
    for (std::int64_t i = 0; i < n; ++i) {
      u[i] = m * u[i] + g[i];
      r[i] += u[i];
    }
  } else {
#pragma omp parallel for simd schedule(static)
    for (std::int64_t i = 0; i < n; ++i) r[i] += g[i];
  }
}

}  // namespace sparsify

Sparsifier::Sparsifier(std::int64_t n, const SparsifierOptions& opts, TopKSelector& selector)
    : opts_(opts), selector_(selector), residual_(n, 0.0f), velocity_(opts.momentum > 0 ? n : 0, 0.0f) {
  sparsify::check_momentum(opts.momentum);
}

double sparsifier_ratio(const SparsifierOptions& opts, double epoch) {
  if (!opts.warmup) return opts.topk.ratio;
  // the warm-up of Chen et al. 2021 (after deep gradient compression, Lin
  // et al. 2018).
  return std::max(opts.topk.ratio, 0.25 * std::pow(0.25, epoch));
}

double Sparsifier::ratio() const { return sparsifier_ratio(opts_, epoch_); }

SparseGradient Sparsifier::step(const float* g) {
  const std::int64_t n = static_cast<std::int64_t>(residual_.size());
  float* r = residual_.data();
  sparsify::accumulate_residual(r, velocity_.data(), g, n, opts_.momentum);
  TopKOptions t = opts_.topk;
  t.ratio = ratio();
  SparseGradient out;
  out.stats = selector_.select(r, n, t);
  out.indices = out.stats.indices;
  out.values.resize(out.indices.size());
  for (std::size_t j = 0; j < out.indices.size(); ++j) {
    const std::int64_t i = out.indices[j];
    out.values[j] = r[i];
    r[i] = 0.0f;
    if (opts_.momentum > 0 && opts_.masking) velocity_[i] = 0.0f;  // momentum-factor masking
  }
  return out;
}

}  // namespace accel
