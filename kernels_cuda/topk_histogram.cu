// topk_histogram on NVIDIA GPUs. A grid-stride loop reads the values once
// (coalesced); each block keeps its histogram in shared memory when the
// bins fit (flushed once with global atomics), otherwise counts straight
// into global memory. Moments reduce per block (warp shuffles) into one
// double atomic each; max |x| uses an integer atomicMax on the bits of the
// non-negative float (order-preserving). Candidates take slots from one
// global counter, so their order is arbitrary: the host sorts them.
#include "topk_histogram.cuh"

#include <cuda_runtime.h>

namespace accel::cuda {
namespace {

constexpr int kThreads = 256;
constexpr unsigned kInfBits = 0x7f800000u;

// Layout of the zeroed scratch the kernel accumulates into, right behind the
// caller's buffers: moments as doubles, max as uint bits.
struct Acc {
  double sum, sumsq;
  unsigned maxbits;
};

__device__ double block_sum(double v) {
  __shared__ double part[kThreads / 32];
  for (int off = 16; off > 0; off /= 2) v += __shfl_down_sync(0xffffffffu, v, off);
  if (threadIdx.x % 32 == 0) part[threadIdx.x / 32] = v;
  __syncthreads();
  v = threadIdx.x < kThreads / 32 ? part[threadIdx.x] : 0.0;
  if (threadIdx.x < 32)
    for (int off = 16; off > 0; off /= 2) v += __shfl_down_sync(0xffffffffu, v, off);
  __syncthreads();  // part is reused by the next call
  return v;         // valid in thread 0
}

template <bool Shared>
__global__ void __launch_bounds__(kThreads)
    histogram(const float* __restrict__ x, long long n, unsigned lo, unsigned hi, int shift, int bins,
              unsigned long long* __restrict__ hist, unsigned long long* __restrict__ outside, Acc* acc,
              long long* __restrict__ cand, unsigned long long* __restrict__ cand_count, long long capacity) {
  extern __shared__ unsigned sh[];
  if (Shared) {
    for (int b = threadIdx.x; b < bins; b += blockDim.x) sh[b] = 0;
    __syncthreads();
  }
  double s = 0, s2 = 0;
  unsigned maxbits = 0;
  unsigned long long below = 0, above = 0, nonfinite = 0;
  const long long stride = static_cast<long long>(gridDim.x) * blockDim.x;
  for (long long i = static_cast<long long>(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += stride) {
    const float v = x[i];
    const unsigned u = __float_as_uint(v) & 0x7fffffffu;
    if (u >= kInfBits) {
      ++nonfinite;
      continue;
    }
    s += v;
    s2 += static_cast<double>(v) * v;
    maxbits = max(maxbits, u);
    if (u < lo) {
      ++below;
      continue;
    }
    if (cand != nullptr) {
      const unsigned long long slot = atomicAdd(cand_count, 1ull);
      if (static_cast<long long>(slot) < capacity) cand[slot] = i;
    }
    if (u >= hi) {
      ++above;
    } else if (Shared) {
      atomicAdd(&sh[(u - lo) >> shift], 1u);
    } else {
      atomicAdd(&hist[(u - lo) >> shift], 1ull);
    }
  }
  if (Shared) {
    __syncthreads();
    for (int b = threadIdx.x; b < bins; b += blockDim.x)
      if (sh[b]) atomicAdd(&hist[b], static_cast<unsigned long long>(sh[b]));
  }
  s = block_sum(s);
  s2 = block_sum(s2);
  const double b_below = block_sum(static_cast<double>(below));
  const double b_above = block_sum(static_cast<double>(above));
  const double b_nonfinite = block_sum(static_cast<double>(nonfinite));
  atomicMax(&acc->maxbits, maxbits);
  if (threadIdx.x == 0) {
    atomicAdd(&acc->sum, s);
    atomicAdd(&acc->sumsq, s2);
    atomicAdd(&outside[0], static_cast<unsigned long long>(b_below));
    atomicAdd(&outside[1], static_cast<unsigned long long>(b_above));
    atomicAdd(&outside[2], static_cast<unsigned long long>(b_nonfinite));
  }
}

__global__ void finish(const Acc* acc, double* moments) {
  moments[0] = acc->sum;
  moments[1] = acc->sumsq;
  moments[2] = static_cast<double>(__uint_as_float(acc->maxbits));
}

const char* last_error() {
  const cudaError_t e = cudaGetLastError();
  return e == cudaSuccess ? nullptr : cudaGetErrorString(e);
}

}  // namespace

const char* launch_topk_histogram(const float* data, std::int64_t n, std::uint32_t lo, std::uint32_t hi, int shift,
                                  std::int64_t bins, unsigned long long* hist, double* moments,
                                  unsigned long long* outside, long long* candidates,
                                  unsigned long long* candidate_count, std::int64_t capacity, cudaStream_t stream) {
  if (n < 0 || bins < 1 || bins > (std::int64_t{1} << 31) - 1) return "topk_histogram: bad n or bins";
  // The moment accumulators live in the (24-byte) moments buffer itself
  // until finish() turns them into the contract's doubles.
  static_assert(sizeof(Acc) <= 3 * sizeof(double), "accumulators fit the moments buffer");
  Acc* acc = reinterpret_cast<Acc*>(moments);
  cudaError_t e = cudaMemsetAsync(hist, 0, bins * sizeof(unsigned long long), stream);
  if (e == cudaSuccess) e = cudaMemsetAsync(outside, 0, 3 * sizeof(unsigned long long), stream);
  if (e == cudaSuccess) e = cudaMemsetAsync(acc, 0, sizeof(Acc), stream);
  if (e == cudaSuccess && candidates != nullptr) e = cudaMemsetAsync(candidate_count, 0, sizeof(unsigned long long), stream);
  if (e != cudaSuccess) return cudaGetErrorString(e);
  int dev = 0, sms = 1;
  if ((e = cudaGetDevice(&dev)) != cudaSuccess) return cudaGetErrorString(e);
  if ((e = cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev)) != cudaSuccess)
    return cudaGetErrorString(e);
  const long long wanted = (n + kThreads - 1) / kThreads;
  const unsigned blocks = static_cast<unsigned>(wanted < 4ll * sms ? (wanted > 0 ? wanted : 1) : 4ll * sms);
  if (bins <= kSharedHistBins)
    histogram<true><<<blocks, kThreads, bins * sizeof(unsigned), stream>>>(
        data, n, lo, hi, shift, static_cast<int>(bins), hist, outside, acc, candidates, candidate_count, capacity);
  else
    histogram<false><<<blocks, kThreads, 0, stream>>>(data, n, lo, hi, shift, static_cast<int>(bins), hist, outside,
                                                       acc, candidates, candidate_count, capacity);
  if (const char* err = last_error()) return err;
  finish<<<1, 1, 0, stream>>>(acc, moments);
  return last_error();
}

}  // namespace accel::cuda
