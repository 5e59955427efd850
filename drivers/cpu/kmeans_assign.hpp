#pragma once

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
void kmeans_assign_gemm(const float* x, std::int64_t n, std::int64_t d, const float* centroids, std::int64_t k,
                        std::int32_t* labels, double* sums, std::int64_t* counts, double* inertia);

}  // namespace accel::cpu
