#pragma once

#include <cstdint>

#include "accel/host_buffer.hpp"
#include "accel/kernels.hpp"

namespace accel::cpu {

// The CPU csr_kernel_rows kernel (contract in accel/kernels.hpp):
// out[a*m + b] = K(x_{queries[a]}, x_{active[b]}). OpenMP threads split the
// active rows; dot products are accumulated in double (sgemm on the gemm path).
struct CsrView {
  const std::int64_t* row_ptr;
  const std::int32_t* col_idx;
  const float* values;
  const double* sq_norms;
  std::int64_t n, cols;
  // The buffer holding `values`, where the host runtime launched: the gemm
  // path keeps what it derives from the matrix there (host_buffer.hpp).
  HostBuffer* owner = nullptr;
};

enum class CsrDotPath {
  Auto,     // whichever was measured faster for this matrix (cached per matrix)
  Merge,    // Narasimhan et al. 2014, Algorithm 2: merge of two sorted index lists
  Scatter,  // query rows scattered into dense buffers, active rows gather from them
  Gemm,     // frequent columns by sgemm on dense tiles, rare ones by an inverted index (many queries)
};

void csr_kernel_rows(const CsrView& x, const std::int32_t* queries, std::int64_t q, const std::int32_t* active,
                     std::int64_t m, KernelType type, double gamma, double coef0, int degree, float* out,
                     CsrDotPath path = CsrDotPath::Auto, bool exact = false);

// The gemm path over target slots [b0, b1) of out (row stride m), in float
// (sgemm) or, for T = double, dgemm; see csr_kernel_rows_gemm.cpp.
template <class T>
void csr_rows_gemm(const CsrView& x, const std::int32_t* queries, std::int64_t q, const std::int32_t* active,
                   std::int64_t b0, std::int64_t b1, std::int64_t m, KernelType type, double gamma, double coef0,
                   int degree, float* out);

// Whether the gemm path holds the matrix's dense columns written out (a
// matrix dense enough that this costs at most twice its CSR): many queries
// then go to sgemm on them without a contest.
bool gemm_written_out(const CsrView& x);

// The kernel function applied to a dot product (and, for RBF, the two norms).
double kernel_value(KernelType type, double dot, double sq_u, double sq_v, double gamma, double coef0, int degree);

}  // namespace accel::cpu
