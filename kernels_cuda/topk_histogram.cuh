// topk_histogram on NVIDIA GPUs (contract in host/include/accel/kernels.hpp).
#pragma once

#include <cstddef>
#include <cstdint>

#include <cuda_runtime_api.h>

namespace accel::cuda {

// Bins that fit one block's shared-memory histogram (32-bit counters);
// larger histograms count with global atomics.
inline constexpr std::int64_t kSharedHistBins = 12288;
// Blocks a pass uses at most (each leaves its moments in the scratch).
inline constexpr std::int64_t kTopkMaxBlocks = 4096;

// Device scratch a launch needs (the blocks' partial moments).
std::size_t topk_histogram_scratch_bytes();

// Enqueues the pass on `stream`; returns nullptr or a static error text.
// candidates may be null (then candidate_count and candidate_values are
// ignored); candidate_values may be null. Candidates are written in no
// particular order (global atomic slots), each value beside its index.
const char* launch_topk_histogram(const float* data, std::int64_t n, std::uint32_t lo, std::uint32_t hi, int shift,
                                  std::int64_t bins, unsigned long long* hist, double* moments,
                                  unsigned long long* outside, long long* candidates,
                                  unsigned long long* candidate_count, std::int64_t capacity,
                                  float* candidate_values, void* scratch, std::size_t scratch_bytes,
                                  cudaStream_t stream);

}  // namespace accel::cuda
