#pragma once

#include <cstdint>

namespace accel::cpu {

// The CPU topk_histogram kernel (contract in accel/kernels.hpp): one pass,
// OpenMP threads with private 32-bit counters, moments in the same pass;
// candidates (may be null) receive ascending indices, candidate_values (may
// be null) their values.
void topk_histogram(const float* x, std::int64_t n, std::uint32_t lo, std::uint32_t hi, int shift,
                    std::int64_t bins, std::uint64_t* hist, double* moments, std::uint64_t* outside,
                    std::int64_t* candidates, std::uint64_t* candidate_count, std::int64_t capacity,
                    bool want_moments = true, float* candidate_values = nullptr);

}  // namespace accel::cpu
