// kmeans_assign for NVIDIA GPUs (contract in host/include/accel/kernels.hpp).
// Plain C++ interface: the CUDA driver (drivers/cuda, compiled by the host
// compiler) calls these; only kmeans_assign.cu is compiled by nvcc.
//
// All pointers are device pointers on the current device; the work is
// enqueued on `stream` and nothing here synchronises with the host. Errors in
// the arguments or in enqueueing come back as a message; errors the kernels
// hit while running show up at the caller's next synchronisation.
#pragma once

#include <cstddef>
#include <cstdint>

#include "cublas_loader.hpp"
#include <cuda_runtime_api.h>

namespace accel::cuda {

enum class KMeansPath {
  Auto,   // Fused for d <= kFusedMaxD, Gemm otherwise
  Fused,  // distance + argmin per point, centroids tiled in shared memory
  Gemm,   // cuBLAS sgemm X·C^T in row blocks, then argmin over ||c||^2 - 2 x.c
};

// Rows of X the fused kernel keeps in registers: it handles d up to this.
inline constexpr std::int64_t kFusedMaxD = 32;
// Largest d and k accepted (labels are int32, cuBLAS sizes int).
inline constexpr std::int64_t kMaxDim = std::int64_t{1} << 30;

// The path Auto picks for a shape (Fused silently becomes Gemm past kFusedMaxD).
KMeansPath kmeans_assign_path(std::int64_t d, std::int64_t k, KMeansPath requested = KMeansPath::Auto);

// Device scratch the launch needs (0 for the fused path). The caller owns it
// and must not reuse it until the launch's stream work is done.
std::size_t kmeans_assign_scratch_bytes(std::int64_t n, std::int64_t d, std::int64_t k,
                                        KMeansPath path = KMeansPath::Auto);

// nullptr when this binary holds kernels the current device can run,
// otherwise why not (e.g. "no kernel image is available for execution").
const char* kmeans_assign_probe();

// Enqueues one Lloyd step: zeroes sums/counts/inertia, writes labels[n],
// sums[k*d], counts[k], inertia[1]. Needs 0 <= n, 1 <= d <= kMaxDim,
// 1 <= k <= kMaxDim, and `blas` (may be null for the fused path). Returns
// nullptr on success, otherwise a static message from cudaGetErrorString /
// cublasGetStatusString or from this file.
const char* launch_kmeans_assign(const float* x, const float* centroids, std::int64_t n, std::int64_t d,
                                 std::int64_t k, std::int32_t* labels, double* sums, std::int64_t* counts,
                                 double* inertia, void* scratch, std::size_t scratch_bytes, cublasHandle_t blas,
                                 cudaStream_t stream, KMeansPath path = KMeansPath::Auto);

}  // namespace accel::cuda
