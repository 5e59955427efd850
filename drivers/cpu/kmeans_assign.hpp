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
// layout: -1 the faster of the two score layouts (timed once per shape and
// thread count), 0 rows x k, 1 k x rows.
void kmeans_assign_gemm(const float* x, std::int64_t n, std::int64_t d, const float* centroids, std::int64_t k,
                        std::int32_t* labels, double* sums, std::int64_t* counts, double* inertia, int layout = -1);

}  // namespace accel::cpu
