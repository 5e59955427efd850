// cuBLAS, opened at first use (dlopen) instead of linked. Linking it would
// cost every accel process a large resident footprint at start-up (the
// libraries' relocations), with or without a GPU; a build with CUDA
// pays that only in a process that launches a CUDA k-means.
#pragma once

#include <cublas_v2.h>

namespace accel::cuda {

struct Cublas {
  cublasStatus_t (*create)(cublasHandle_t*);
  cublasStatus_t (*destroy)(cublasHandle_t);
  cublasStatus_t (*set_stream)(cublasHandle_t, cudaStream_t);
  cublasStatus_t (*set_math_mode)(cublasHandle_t, cublasMath_t);
  cublasStatus_t (*sgemm)(cublasHandle_t, cublasOperation_t, cublasOperation_t, int, int, int, const float*,
                          const float*, int, const float*, int, const float*, float*, int);
  const char* (*status_string)(cublasStatus_t);
};

// The library's entry points, loaded once; throws std::runtime_error naming
// the library when it cannot be opened or lacks one of them.
const Cublas& cublas();

}  // namespace accel::cuda
