// csr_kernel_rows on NVIDIA GPUs. Queries go kQueryGroup at a time: each is
// scattered into its own dense buffer of `cols` doubles in global memory
// (they stay in L2 for the rows pass); then one warp per active row: lanes
// stride over the row's non-zeros, gathering each from every buffer of the
// group into double accumulators, so a row is read once per group instead
// of once per query (the batched SVM solver asks for hundreds of rows at a
// time). Shuffle reductions give the dot products and lane 0 applies the
// kernel function. A last pass clears the entries the queries set, so the
// buffers are zero between launches without a memset of all of them.
#include "csr_kernel_rows.cuh"

#include <algorithm>
#include <climits>

#include <cuda_runtime.h>

namespace accel::cuda {
namespace {

constexpr int kThreads = 256;
constexpr int kScatterBlocks = 64;
constexpr int kQueryGroup = 4;

// blockIdx.y picks the query of the group (g of them from a0).
__global__ void scatter_rows(const std::int64_t* row_ptr, const std::int32_t* col_idx, const float* values,
                             const std::int32_t* queries, std::int64_t a0, std::int64_t cols, double* dense,
                             bool clear) {
  const std::int64_t u = queries[a0 + blockIdx.y];
  double* buf = dense + blockIdx.y * cols;
  const std::int64_t lo = row_ptr[u], hi = row_ptr[u + 1];
  for (std::int64_t k = lo + blockIdx.x * blockDim.x + threadIdx.x; k < hi; k += std::int64_t{gridDim.x} * blockDim.x)
    buf[col_idx[k]] = clear ? 0.0 : static_cast<double>(values[k]);
}

__device__ double kernel_value(int type, double dot, double su, double sv, double gamma, double coef0, int degree) {
  switch (type) {
    case 0: return dot;
    case 1: {
      double base = gamma * dot + coef0, r = 1.0;
      for (int t = degree; t > 0; t /= 2) {
        if (t % 2) r *= base;
        base *= base;
      }
      return r;
    }
    case 2: return exp(-gamma * fmax(0.0, su + sv - 2.0 * dot));
    default: return tanh(gamma * dot + coef0);
  }
}

__global__ void rows_kernel(const std::int64_t* row_ptr, const std::int32_t* col_idx, const float* values,
                            const double* sq_norms, const std::int32_t* queries, std::int64_t a0, int g,
                            std::int64_t cols, const std::int32_t* active, std::int64_t m, const double* dense,
                            int type, double gamma, double coef0, int degree, float* out) {
  const int lane = threadIdx.x % 32;
  const std::int64_t warp = (std::int64_t{blockIdx.x} * blockDim.x + threadIdx.x) / 32;
  if (warp >= m) return;  // whole warps leave together: the shuffles below see full warps
  const std::int64_t v = active[warp];
  const std::int64_t lo = row_ptr[v], hi = row_ptr[v + 1];
  double s[kQueryGroup] = {};
  for (std::int64_t k = lo + lane; k < hi; k += 32) {
    const double x = values[k];
    const std::int64_t c = col_idx[k];
#pragma unroll
    for (int j = 0; j < kQueryGroup; ++j) s[j] += x * dense[j * cols + c];  // buffers past g hold zeros
  }
#pragma unroll
  for (int j = 0; j < kQueryGroup; ++j)
    for (int off = 16; off > 0; off /= 2) s[j] += __shfl_down_sync(0xffffffffu, s[j], off);
  if (lane == 0)
    for (int j = 0; j < g; ++j) {
      const std::int64_t u = queries[a0 + j];
      out[(a0 + j) * m + warp] =
          static_cast<float>(kernel_value(type, s[j], sq_norms[u], sq_norms[v], gamma, coef0, degree));
    }
}

}  // namespace

std::size_t csr_kernel_rows_scratch_bytes(std::int64_t cols) {
  return static_cast<std::size_t>(kQueryGroup) * static_cast<std::size_t>(cols > 0 ? cols : 1) * sizeof(double);
}

const char* launch_csr_kernel_rows(const std::int64_t* row_ptr, const std::int32_t* col_idx, const float* values,
                                   const double* sq_norms, const std::int32_t* queries, std::int64_t q,
                                   const std::int32_t* active, std::int64_t m, std::int64_t cols, int type,
                                   double gamma, double coef0, int degree, float* out, double* scratch,
                                   std::size_t scratch_bytes, cudaStream_t stream) {
  if (q < 0 || m < 0 || cols < 0 || type < 0 || type > 3) return "csr_kernel_rows: bad arguments";
  if (scratch_bytes < csr_kernel_rows_scratch_bytes(cols)) return "csr_kernel_rows: scratch too small";
  if (q == 0 || m == 0) return nullptr;
  const std::int64_t blocks = (m * 32 + kThreads - 1) / kThreads;
  if (blocks > INT_MAX) return "csr_kernel_rows: too many active rows";
  for (std::int64_t a0 = 0; a0 < q; a0 += kQueryGroup) {
    const int g = static_cast<int>(std::min<std::int64_t>(kQueryGroup, q - a0));
    const dim3 scatter_grid(kScatterBlocks, g);
    scatter_rows<<<scatter_grid, kThreads, 0, stream>>>(row_ptr, col_idx, values, queries, a0, cols, scratch, false);
    rows_kernel<<<static_cast<int>(blocks), kThreads, 0, stream>>>(row_ptr, col_idx, values, sq_norms, queries, a0,
                                                                   g, cols, active, m, scratch, type, gamma, coef0,
                                                                   degree, out);
    scatter_rows<<<scatter_grid, kThreads, 0, stream>>>(row_ptr, col_idx, values, queries, a0, cols, scratch, true);
  }
  const cudaError_t e = cudaGetLastError();
  return e == cudaSuccess ? nullptr : cudaGetErrorString(e);
}

}  // namespace accel::cuda
