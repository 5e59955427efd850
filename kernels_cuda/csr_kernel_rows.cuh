// csr_kernel_rows for NVIDIA GPUs (contract in host/include/accel/kernels.hpp).
// Plain C++ interface for drivers/cuda; only csr_kernel_rows.cu is compiled
// by nvcc. All pointers are device pointers on the current device; work is
// enqueued on `stream` and nothing here synchronises with the host.
#pragma once

#include <cstddef>
#include <cstdint>

#include <cuda_runtime_api.h>

namespace accel::cuda {

// Device scratch the launch needs: a group of dense query rows of `cols`
// doubles each. It must be all zero before the first launch (cudaMemset once
// after allocation); every launch leaves it zero again.
std::size_t csr_kernel_rows_scratch_bytes(std::int64_t cols);

// Enqueues out[a*m + b] = K(x_{queries[a]}, x_{active[b]}) for a < q, b < m.
// type: 0 linear, 1 polynomial, 2 rbf, 3 sigmoid. Returns nullptr on
// success, otherwise a static message.
const char* launch_csr_kernel_rows(const std::int64_t* row_ptr, const std::int32_t* col_idx, const float* values,
                                   const double* sq_norms, const std::int32_t* queries, std::int64_t q,
                                   const std::int32_t* active, std::int64_t m, std::int64_t cols, int type,
                                   double gamma, double coef0, int degree, float* out, double* scratch,
                                   std::size_t scratch_bytes, cudaStream_t stream);

}  // namespace accel::cuda
