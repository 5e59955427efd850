// BucketSparsifier (accel/topk.hpp): residual gradient compression of a
// bucket of layers, with the bucket's small layers selected in one parallel
// pass on the host and the large ones by the selector's device.
#include <omp.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <exception>
#include <limits>
#include <string>

#include "accel/error.hpp"
#include "accel/topk.hpp"
#include "residual.hpp"

namespace accel {
namespace {

std::int64_t k_of(double ratio, std::int64_t n) {
  return std::min<std::int64_t>(static_cast<std::int64_t>(std::ceil(ratio * static_cast<double>(n))), n);
}

// The exact selection of one small layer (every finite value when whole):
// the k largest finite |r| and their ties, ascending. Returns the number of
// NaN/Inf values and sets `first_bad` to the first one's index.
std::int64_t select_exact(const float* r, std::int64_t n, double ratio, bool whole, std::vector<std::int64_t>& out,
                          std::int64_t& first_bad) {
  std::vector<float> mag;
  mag.reserve(n);
  std::int64_t bad = 0;
  for (std::int64_t i = 0; i < n; ++i) {
    if (std::isfinite(r[i])) mag.push_back(std::fabs(r[i]));
    else if (bad++ == 0) first_bad = i;
  }
  const auto finite = static_cast<std::int64_t>(mag.size());
  const std::int64_t k = whole ? finite : std::min(k_of(ratio, n), finite);
  if (k == 0) return bad;
  float tau = 0;  // k == finite: every finite value
  if (k < finite) {
    std::nth_element(mag.begin(), mag.begin() + (k - 1), mag.end(), std::greater<float>());
    tau = mag[k - 1];
  }
  for (std::int64_t i = 0; i < n; ++i)
    if (std::isfinite(r[i]) && std::fabs(r[i]) >= tau) out.push_back(i);
  return bad;
}

std::string where(std::size_t layer, std::int64_t offset) {
  return "layer " + std::to_string(layer) + " (bucket offset " + std::to_string(offset) + ")";
}

}  // namespace

BucketSparsifier::BucketSparsifier(std::vector<std::int64_t> sizes, const BucketOptions& opts, TopKSelector& selector)
    : opts_(opts), selector_(selector) {
  if (sizes.empty()) throw InputError("bucket sparsifier: no layers");
  sparsify::check_momentum(opts.sparsifier.momentum);
  if (!(opts.sparsifier.topk.ratio > 0 && opts.sparsifier.topk.ratio <= 1))
    throw InputError("ratio " + std::to_string(opts.sparsifier.topk.ratio) + " is outside (0, 1]");
  if (opts.dense_below < 0) throw InputError("dense_below " + std::to_string(opts.dense_below) + " is negative");
  offsets_.push_back(0);
  for (std::size_t l = 0; l < sizes.size(); ++l) {
    if (sizes[l] < 1) throw InputError("bucket sparsifier: layer " + std::to_string(l) + " has " +
                                       std::to_string(sizes[l]) + " values");
    if (offsets_.back() > std::numeric_limits<std::uint32_t>::max() - sizes[l])
      throw InputError("bucket sparsifier: 2^32 values or more");
    offsets_.push_back(offsets_.back() + sizes[l]);
  }
  residual_.assign(offsets_.back(), 0.0f);
  if (opts.sparsifier.momentum > 0) velocity_.assign(offsets_.back(), 0.0f);
}

double BucketSparsifier::ratio() const { return sparsifier_ratio(opts_.sparsifier, epoch_); }

// Whole layers and layers below host_below, each by one thread of one
// parallel region (dynamic: their sizes differ by orders of magnitude).
// Returns the NaN/Inf count; under the error policy the first is an error.
std::int64_t BucketSparsifier::select_small(std::vector<std::vector<std::int64_t>>& picked,
                                            const TopKOptions& t) const {
  const auto layers = static_cast<std::int64_t>(picked.size());
  std::vector<std::int64_t> bad(layers, 0), first(layers, -1);
  std::exception_ptr failed;  // nothing may leave an OpenMP region by throwing
#pragma omp parallel for schedule(dynamic)
  for (std::int64_t l = 0; l < layers; ++l) {
    const std::int64_t n = offsets_[l + 1] - offsets_[l];
    const bool whole = n < opts_.dense_below;
    if (!whole && n >= opts_.host_below) continue;
    try {
      bad[l] = select_exact(residual_.data() + offsets_[l], n, t.ratio, whole, picked[l], first[l]);
    } catch (...) {
#pragma omp critical(accel_bucket_failed)
      if (!failed) failed = std::current_exception();
    }
  }
  if (failed) std::rethrow_exception(failed);
  std::int64_t total = 0;
  for (std::int64_t l = 0; l < layers; ++l) {
    total += bad[l];
    if (bad[l] > 0 && t.nonfinite == NonFinitePolicy::Error) {
      const float v = residual_[offsets_[l] + first[l]];
      throw InputError(where(l, offsets_[l]) + ": its value " + std::to_string(first[l]) + " is " +
                       (std::isnan(v) ? "NaN" : "Inf") + " (use nonfinite exclude to skip non-finite values)");
    }
  }
  return total;
}

SparseGradient BucketSparsifier::step(const float* g) {
  const auto t0 = std::chrono::steady_clock::now();
  sparsify::accumulate_residual(residual_.data(), velocity_.data(), g, size(), opts_.sparsifier.momentum);
  TopKOptions t = opts_.sparsifier.topk;
  t.ratio = ratio();
  const std::size_t layers = offsets_.size() - 1;
  std::vector<std::vector<std::int64_t>> picked(layers);
  SparseGradient out;
  out.stats.nonfinite = select_small(picked, t);
  out.stats.n = size();
  for (std::size_t l = 0; l < layers; ++l) {
    const std::int64_t n = offsets_[l + 1] - offsets_[l];
    if (n < opts_.dense_below) continue;
    out.stats.k += k_of(t.ratio, n);
    if (n < opts_.host_below) continue;
    try {
      TopKResult r = selector_.select(residual_.data() + offsets_[l], n, t);
      picked[l] = std::move(r.indices);
      out.stats.nonfinite += r.nonfinite;
      out.stats.passes = std::max(out.stats.passes, r.passes);
    } catch (const InputError& e) {
      throw InputError(where(l, offsets_[l]) + ": " + e.what());
    }
  }
  std::size_t total = 0;
  for (auto& p : picked) total += p.size();
  out.indices.reserve(total);
  out.values.reserve(total);
  const bool mask = opts_.sparsifier.momentum > 0 && opts_.sparsifier.masking;
  for (std::size_t l = 0; l < layers; ++l) {
    const std::int64_t base = offsets_[l];
    // A whole layer keeps its velocity: it is momentum SGD, not masked.
    const bool masked = mask && offsets_[l + 1] - base >= opts_.dense_below;
    for (std::int64_t j : picked[l]) {
      const std::int64_t i = base + j;
      out.indices.push_back(i);
      out.values.push_back(residual_[i]);
      residual_[i] = 0.0f;
      if (masked) velocity_[i] = 0.0f;
    }
  }
  out.stats.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return out;
}

void BucketSparsifier::load(std::int64_t at, std::int64_t n, const float* residual, const float* velocity) {
  if (at < 0 || n < 0 || at + n > size())
    throw InputError("sparsifier state for values [" + std::to_string(at) + ", " + std::to_string(at + n) +
                     ") of a bucket of " + std::to_string(size()));
  std::copy_n(residual, n, residual_.begin() + at);
  if (velocity_.empty()) return;
  if (velocity) std::copy_n(velocity, n, velocity_.begin() + at);
  else std::fill_n(velocity_.begin() + at, n, 0.0f);
}

}  // namespace accel
