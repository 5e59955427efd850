// Kernel identifiers and their argument blocks. One name per kernel
// everywhere it lives: drivers/*/, kernels_hls/, kernels_cuda/, tests.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <variant>

namespace accel {

class Buffer;

enum class KernelId { KMeansAssign, CsrKernelRows, TopKHistogram };

std::string to_string(KernelId id);

// One Lloyd step over n rows: labels[i] = argmin_k ||x_i - c_k||^2 (ties to
// the lower k), sums[k*d + j] = sum of x_ij over rows labelled k (double),
// counts[k] = rows labelled k (int64), inertia[0] = sum of the minimum
// squared distances (double). x is n*d float32 row-major, centroids k*d.
struct KMeansAssignArgs {
  Buffer* x = nullptr;
  Buffer* centroids = nullptr;
  Buffer* labels = nullptr;   // int32[n]
  Buffer* sums = nullptr;     // double[k*d]
  Buffer* counts = nullptr;   // int64[k]
  Buffer* inertia = nullptr;  // double[1]
  std::int64_t n = 0, d = 0, k = 0;
  // Optional: the device's private state for launches over these rows,
  // made by Device::create_state() for this shape and kept by the caller
  // between launches, in a layout only the device knows. The cpu keeps
  // Yinyang bounds there ([Yinyang15]): its
  // first launch assigns every row and records them; later launches with
  // new centroids skip every row whose bounds prove its nearest centroid
  // unchanged. The outputs are those of a full launch (up to float ties).
  // x must not change between launches that share a state; a new state
  // starts over.
  Buffer* state = nullptr;
};

// Kernel functions exactly as LIBSVM defines them.
enum class KernelType { Linear = 0, Polynomial = 1, Rbf = 2, Sigmoid = 3 };

// K(x_q, x_i) for every query row q and every active row i of a CSR matrix:
// out[a * m + b] = K(x_{queries[a]}, x_{active[b]}). Column indices within a
// row are sorted ascending (readers sort on load). sq_norms[i] = ||x_i||^2,
// used by the RBF kernel as ||u||^2 + ||v||^2 - 2 u.v.
struct CsrKernelRowsArgs {
  Buffer* row_ptr = nullptr;   // int64[n + 1]
  Buffer* col_idx = nullptr;   // int32[nnz]
  Buffer* values = nullptr;    // float[nnz]
  Buffer* sq_norms = nullptr;  // double[n]
  Buffer* queries = nullptr;   // int32[q]
  Buffer* active = nullptr;    // int32[m]
  Buffer* out = nullptr;       // float[q * m]
  std::int64_t n = 0, nnz = 0, q = 0, m = 0;
  std::int64_t cols = 0;       // number of features (dense scatter width)
  KernelType type = KernelType::Rbf;
  double gamma = 0, coef0 = 0;
  int degree = 3;
  // Dot products accumulated in double on every path. Without it, the
  // cpu's many-query path runs sgemm (float products, twice dgemm's rate)
  // and OpenCL's tiled path sums in float; the other paths and backends
  // sum in double either way. Prediction asks for it, so that labels match
  // LIBSVM's to the last borderline row.
  bool exact = false;
};

// One pass of the histogram top-k threshold: over the n floats of data,
// counts |x| by its IEEE-754 bits (order-preserving for non-negative
// floats): a value with lo <= bits(|x|) < hi lands in bin (bits - lo) >> shift
// of hist[bins]; values outside [lo, hi) are only counted in below/above.
// In the same pass: moments[0] = sum x, moments[1] = sum x^2 (double),
// moments[2] = max |x| over the finite values, and outside[] the counts
// below lo, at or above hi, and non-finite (NaN/Inf are never binned).
// When candidates is set, the indices of the finite values with
// bits(|x|) >= lo are also written there (in any order) up to `capacity`;
// candidate_count[0] is how many there were, even beyond capacity. This
// lets one pass both histogram the upper tail and find its members.
struct TopKHistogramArgs {
  Buffer* data = nullptr;             // float[n]
  Buffer* hist = nullptr;             // uint64[bins]
  Buffer* moments = nullptr;          // double[3]
  Buffer* outside = nullptr;          // uint64[3]: below lo, at or above hi, nonfinite
  std::int64_t n = 0;
  std::uint32_t lo = 0, hi = 0x7f800000u;
  int shift = 0;
  std::int64_t bins = 0;
  Buffer* candidates = nullptr;       // int64[capacity], optional
  Buffer* candidate_count = nullptr;  // uint64[1], with candidates
  std::int64_t capacity = 0;
  // float[capacity], optional (with candidates): value j is R at index
  // candidates[j], so a caller whose R stays on the device (a CUDA tensor)
  // picks S among the candidates without reading R back.
  Buffer* candidate_values = nullptr;
  // The caller reads `moments` (the Laplacian estimate does; the exact
  // method does not). A backend may skip them when false and then leaves
  // moments zero; computing them anyway is also correct.
  bool want_moments = true;
};

// Empty when the histogram arguments are consistent: lo <= hi, every value
// in [lo, hi) maps to a bin below `bins`, and bins within max_bins.
std::string check_histogram_args(const TopKHistogramArgs& a, std::int64_t max_bins);

using KernelArgs = std::variant<KMeansAssignArgs, CsrKernelRowsArgs, TopKHistogramArgs>;

inline KernelId kernel_of(const KernelArgs& args) {
  return static_cast<KernelId>(args.index());
}

}  // namespace accel
