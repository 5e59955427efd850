// Kernel identifiers and their argument blocks. One name per kernel
// everywhere it lives: drivers/*/, kernels_hls/, kernels_cuda/, tests.
#pragma once

#include <cstdint>
#include <string>
#include <variant>

namespace accel {

class Buffer;

enum class KernelId { KMeansAssign };

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
};

using KernelArgs = std::variant<KMeansAssignArgs>;

inline KernelId kernel_of(const KernelArgs& args) {
  return static_cast<KernelId>(args.index());
}

}  // namespace accel
