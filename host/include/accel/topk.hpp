// Top-k threshold selection for gradient sparsification (Chen et al., "Gradient sparsification compression
// approach to reducing communication in distributed training", 2021): find
// tau such that S = {i : |R_i| >= tau} holds (about) the k = ceil(ratio * n)
// largest magnitudes, and return S.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace accel {

class Device;
class Buffer;

enum class TopKMethod {
  Exact,       // histogram select on the float bits: exact k-th largest
  LdteBs,      // Chen et al. 2021, Algorithm 2: Laplacian estimate, bisection on counting passes
  LdteHist,    // the Laplacian estimate corrected on one histogram pass (ours)
  NthElement,  // baseline: std::nth_element on |R|
  Sample,      // baseline (DGC): exact top-k of a 1% strided sample gives tau
};
TopKMethod parse_topk_method(const std::string& name);  // InputError for unknown names
std::string to_string(TopKMethod m);

enum class NonFinitePolicy { Error, Exclude };

struct TopKOptions {
  double ratio = 0.001;
  TopKMethod method = TopKMethod::LdteHist;
  NonFinitePolicy nonfinite = NonFinitePolicy::Error;
  double upper = 1.5;  // LDTE methods stop once k <= |S| <= upper * k
};

struct TopKResult {
  std::int64_t n = 0, k = 0;
  float tau = 0;                     // selected: finite |R_i| >= tau
  double estimate = 0;               // LDTE methods: the Laplacian estimate before correction
  std::vector<std::int64_t> indices;  // ascending
  std::int64_t ties = 0;             // exact methods: |S| - k (values equal to tau beyond k)
  std::int64_t nonfinite = 0;        // NaN/Inf seen (excluded from S)
  int passes = 0;                    // full passes over the n values, selection included
  double seconds = 0;
  // Of seconds: in the device's histogram passes (launch to completion),
  // and in copies back (histograms, candidates, their values, the sample).
  double pass_seconds = 0, copy_seconds = 0;
};

// Runs threshold searches on one device that has the topk_histogram kernel;
// the final selection of S runs on the host. Buffers are kept between calls
// of the same size (the per-iteration use of a Sparsifier).
class TopKSelector {
 public:
  explicit TopKSelector(Device* device);
  ~TopKSelector();
  TopKSelector(const TopKSelector&) = delete;
  TopKSelector& operator=(const TopKSelector&) = delete;

  // Throws InputError for a ratio outside [0, 1] or, under NonFinitePolicy::Error,
  // for the first NaN/Inf (naming its index).
  TopKResult select(const float* r, std::int64_t n, const TopKOptions& opts);
  // R already in `data`, one of this selector's device's buffers (a CUDA
  // tensor's memory through Device::wrap_device): exact and ldte-hist read
  // R only in the histogram pass, which lists the window's candidates with
  // their values; the host gets histograms and candidates, never R. The
  // baselines, ldte-bs and the rare fallbacks (a window that overflows its
  // capacity, trivial k, a NaN to name) copy R to the host first.
  TopKResult select(Buffer& data, std::int64_t n, const TopKOptions& opts);

  const Device* device() const { return device_; }

 private:
  struct Histogram;
  Histogram run_histogram(std::int64_t n, std::uint32_t lo, std::uint32_t hi, int shift, std::int64_t bins,
                          std::int64_t capacity = 0, bool want_moments = true);
  void bind(const float* r, std::int64_t n);
  // One method each (topk.cpp); Run is one select() call's state.
  struct Run;
  TopKResult dispatch(Run& run);
  TopKResult by_sorting(Run& run);    // nth-element and sample: never the device
  TopKResult ldte_bs(Run& run);       // bisection on counting passes
  TopKResult by_histogram(Run& run);  // exact and ldte-hist: one windowed histogram pass
  struct Window;                      // by_histogram's pass, and the values it says lie where
  TopKResult at_edge(Run& run, Window& w, std::int64_t edge);
  TopKResult within_bin(Run& run, Window& w, std::int64_t kbin);

  Device* device_;
  struct Buffers;
  std::unique_ptr<Buffers> buf_;
};

// Residual gradient compression around the selector: R <- R + G (or with
// momentum correction U <- m U + G, R <- R + U), select S on R, emit
// (index, R_i) for S, zero R[S] (and U[S] with momentum-factor masking).
struct SparsifierOptions {
  TopKOptions topk;
  double momentum = 0;     // 0 disables momentum correction
  bool masking = true;     // momentum-factor masking (with momentum only)
  bool warmup = false;     // ratio 25% x 0.25^epoch down to topk.ratio (25%, 6.25%, ... at whole epochs)
};

struct SparseGradient {
  std::vector<std::int64_t> indices;
  std::vector<float> values;
  TopKResult stats;
};

// This epoch's selection ratio: topk.ratio, or with warm-up 25%, 6.25%,
// 1.5625%, ... (a factor 4 per epoch) until topk.ratio is reached. A
// fractional epoch (epoch + iteration / iterations per epoch) ramps the
// ratio down iteration by iteration instead of in steps.
double sparsifier_ratio(const SparsifierOptions& opts, double epoch);

class Sparsifier {
 public:
  Sparsifier(std::int64_t n, const SparsifierOptions& opts, TopKSelector& selector);
  void set_epoch(double epoch) { epoch_ = epoch; }
  double ratio() const;  // this epoch's ratio (warm-up applied)
  SparseGradient step(const float* gradient);
  const std::vector<float>& residual() const { return residual_; }

 private:
  SparsifierOptions opts_;
  TopKSelector& selector_;
  std::vector<float> residual_, velocity_;
  double epoch_ = 0;
};

// The Sparsifier over one gradient bucket of many layers (a PyTorch DDP
// bucket): one accumulation pass over the whole bucket, then a selection
// per layer ([Chen21] selects per layer). Layers below `host_below` values
// are selected together in one parallel pass on the host, exactly (the k
// largest and their ties, whatever the method: within every method's
// k <= |S| bound), instead of one device launch each, whose fixed cost (a
// histogram of 8160 bins, a work-queue round trip) is many times a small
// layer's selection; host_below = 0 sends every layer to the device with
// the chosen method. Larger layers go to the selector's device, one launch
// each. Layers below `dense_below` values are sent whole every step (their
// finite values; a NaN/Inf excluded by the policy stays behind): deep
// gradient compression (Lin et al., 2018) leaves such tensors (biases,
// small convolutions) uncompressed, since at 0.1% a 512-value bias would
// send one value a step. With momentum correction a whole layer sends its
// velocity U <- m U + G and is not masked, so it trains as momentum SGD.
struct BucketOptions {
  SparsifierOptions sparsifier;
  std::int64_t dense_below = 0;
  std::int64_t host_below = std::int64_t{1} << 16;
};

class BucketSparsifier {
 public:
  // InputError for an empty bucket, a layer of no values, or bad options.
  BucketSparsifier(std::vector<std::int64_t> layer_sizes, const BucketOptions& opts, TopKSelector& selector);
  void set_epoch(double epoch) { epoch_ = epoch; }
  double ratio() const;
  // The bucket's selection: indices into the bucket (ascending), values.
  // NaN/Inf follow the options' policy; an error names the layer and index.
  SparseGradient step(const float* bucket);
  const std::vector<float>& residual() const { return residual_; }
  // U of momentum correction (empty without momentum).
  const std::vector<float>& velocity() const { return velocity_; }
  // Values [at, at + n) of the residual and (with momentum) the velocity
  // set from another sparsifier's: state carried over when the bucket's
  // layers are laid out anew (DDP rebuilds its buckets). velocity may be
  // null (none kept: zeros). InputError past the end.
  void load(std::int64_t at, std::int64_t n, const float* residual, const float* velocity);
  std::int64_t size() const { return static_cast<std::int64_t>(residual_.size()); }
  const std::vector<std::int64_t>& offsets() const { return offsets_; }  // layer starts, then the size

 private:
  std::int64_t select_small(std::vector<std::vector<std::int64_t>>& picked, const TopKOptions& t) const;
  BucketOptions opts_;
  TopKSelector& selector_;
  std::vector<std::int64_t> offsets_;
  std::vector<float> residual_, velocity_;
  double epoch_ = 0;
};

}  // namespace accel
