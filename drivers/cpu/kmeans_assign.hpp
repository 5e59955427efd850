#pragma once

#include <cstddef>
#include <cstdint>

namespace accel::cpu {

// The CPU kmeans_assign kernel (contract in accel/kernels.hpp). Picks the
// direct small-d loop or the sgemm path by shape; OpenMP threads keep private
// sums and merge once at the end.
void kmeans_assign(const float* x, std::int64_t n, std::int64_t d, const float* centroids, std::int64_t k,
                   std::int32_t* labels, double* sums, std::int64_t* counts, double* inertia);

// Exposed for tests: force a path.
void kmeans_assign_direct(const float* x, std::int64_t n, std::int64_t d, const float* centroids,
                          std::int64_t k, std::int32_t* labels, double* sums, std::int64_t* counts,
                          double* inertia);
// layout: -1 the faster of the two score layouts (timed once per shape and
// thread count), 0 rows x k, 1 k x rows.
void kmeans_assign_gemm(const float* x, std::int64_t n, std::int64_t d, const float* centroids, std::int64_t k,
                        std::int32_t* labels, double* sums, std::int64_t* counts, double* inertia, int layout = -1);

// kmeans_assign with Yinyang bounds kept in `state` (KMeansAssignArgs::bounds,
// layout accel::kmeans_bounds_layout): kmeans_assign_bounds.cpp.
void kmeans_assign_bounds(const float* x, std::int64_t n, std::int64_t d, const float* centroids, std::int64_t k,
                          std::int32_t* labels, double* sums, std::int64_t* counts, double* inertia,
                          std::byte* state);

namespace detail {
// Shared by the gemm path and the bounds' first launch.
// score (m x k, row stride k) or, transposed, (k x m, row stride ld) += X C^T.
void block_sgemm(bool transposed, const float* xb, std::int64_t m, std::int64_t d, const float* c, std::int64_t k,
                 float beta, float* score, std::int64_t ld);
// The faster layout for (d, k, threads), timed on the first call and cached.
bool pick_layout(const float* x, std::int64_t rows, std::int64_t d, const float* c, std::int64_t k);
}  // namespace detail

}  // namespace accel::cpu
