// topk_histogram on NVIDIA GPUs. Each thread reads four values a step (one
// 16-byte load where the input is aligned) in a loop over the whole grid,
// sized to the blocks the GPU holds at once, so enough loads are in flight
// to keep memory busy. Each block keeps its histogram in shared memory when
// the bins fit (flushed once with global atomics), otherwise counts
// straight into global memory, where the lanes of a warp that hit the same
// bin add once together (__match_any_sync: real gradients pile into a few
// bins, and same-address global atomics serialise; in shared memory the
// match costs more than the conflicts it saves). Candidates take their
// slots a warp at a time from one global counter, so their order is
// arbitrary: the host sorts them. Moments: each block's sums go to its own
// slot of a scratch array and one thread adds the slots in block order, so
// a pass gives the same bits every time (double atomics would add the
// blocks in whatever order they finish). max |x| uses an integer atomicMax
// on the bits of the non-negative float (order-preserving).
#include "topk_histogram.cuh"

#include <cuda_runtime.h>

namespace accel::cuda {
namespace {

constexpr int kThreads = 256;
constexpr unsigned kInfBits = 0x7f800000u;
constexpr unsigned kNoBin = 0xffffffffu;
constexpr unsigned kFull = 0xffffffffu;

// Zeroed before the pass, in the moments buffer itself until finish()
// writes the contract's doubles there.
struct Acc {
  unsigned maxbits;
};

__device__ double block_sum(double v) {
  __shared__ double part[kThreads / 32];
  for (int off = 16; off > 0; off /= 2) v += __shfl_down_sync(kFull, v, off);
  if (threadIdx.x % 32 == 0) part[threadIdx.x / 32] = v;
  __syncthreads();
  v = threadIdx.x < kThreads / 32 ? part[threadIdx.x] : 0.0;
  if (threadIdx.x < 32)
    for (int off = 16; off > 0; off /= 2) v += __shfl_down_sync(kFull, v, off);
  __syncthreads();  // part is reused by the next call
  return v;         // valid in thread 0
}

struct Pass {
  const float* x;
  long long n;
  unsigned lo, hi;
  int shift;
  unsigned long long* hist;
  long long* cand;
  unsigned long long* cand_count;
  long long capacity;
  float* cand_values;  // may be null
};

// Per-thread tallies of one pass.
struct Tally {
  double s = 0, s2 = 0;
  unsigned maxbits = 0;
  unsigned long long below = 0, above = 0, nonfinite = 0;
};

// One value per lane; every lane of the warp calls it together (valid says
// whether the lane holds a value), as __match_any_sync and __ballot_sync need.
template <bool Shared>
__device__ __forceinline__ void visit(const Pass& p, unsigned* sh, float v, long long i, bool valid, Tally& t) {
  const unsigned u = __float_as_uint(v) & 0x7fffffffu;
  const bool finite = valid && u < kInfBits;
  t.nonfinite += valid && !finite;
  if (finite) {
    t.s += v;
    t.s2 += static_cast<double>(v) * v;
    t.maxbits = max(t.maxbits, u);
  }
  t.below += finite && u < p.lo;
  const bool window = finite && u >= p.lo;
  if (p.cand != nullptr) {  // uniform across the grid
    const unsigned want = __ballot_sync(kFull, window);
    if (want != 0) {
      const int lane = threadIdx.x % 32, leader = __ffs(want) - 1;
      unsigned long long base = 0;
      if (lane == leader) base = atomicAdd(p.cand_count, static_cast<unsigned long long>(__popc(want)));
      base = __shfl_sync(kFull, base, leader);
      const long long slot = static_cast<long long>(base) + __popc(want & ((1u << lane) - 1u));
      if (window && slot < p.capacity) {
        p.cand[slot] = i;
        if (p.cand_values != nullptr) p.cand_values[slot] = v;
      }
    }
  }
  t.above += window && u >= p.hi;
  const unsigned key = window && u < p.hi ? (u - p.lo) >> p.shift : kNoBin;
  if (Shared) {
    if (key != kNoBin) atomicAdd(&sh[key], 1u);
  } else {
    const unsigned peers = __match_any_sync(kFull, key);
    if (key != kNoBin && static_cast<int>(threadIdx.x % 32) == __ffs(peers) - 1)
      atomicAdd(&p.hist[key], static_cast<unsigned long long>(__popc(peers)));
  }
}

// Four values from step `step` (four floats a step) into v; 16-byte loads
// where the input is aligned, read once (__ldcs: not kept in L2).
__device__ __forceinline__ void load4(const Pass& p, bool aligned, long long step, float v[4]) {
  const long long i0 = 4 * step;
  if (aligned && i0 + 3 < p.n) {
    const float4 q = __ldcs(reinterpret_cast<const float4*>(p.x) + step);
    v[0] = q.x, v[1] = q.y, v[2] = q.z, v[3] = q.w;
  } else {
    for (int j = 0; j < 4; ++j) v[j] = i0 + j < p.n ? p.x[i0 + j] : 0.0f;
  }
}

template <bool Shared>
__global__ void __launch_bounds__(kThreads)
    histogram(Pass p, int bins, unsigned long long* __restrict__ outside, Acc* acc, double* __restrict__ partials) {
  extern __shared__ unsigned sh[];
  if (Shared) {
    for (int b = threadIdx.x; b < bins; b += blockDim.x) sh[b] = 0;
    __syncthreads();
  }
  Tally t;
  // Steps of four values; a warp runs its steps together (the loop bound
  // is the warp's, so every lane reaches the warp-wide calls in visit).
  const long long steps = (p.n + 3) / 4;
  const long long stride = static_cast<long long>(gridDim.x) * blockDim.x;
  const long long warp0 = static_cast<long long>(blockIdx.x) * blockDim.x + (threadIdx.x & ~31u);
  const bool aligned = (reinterpret_cast<unsigned long long>(p.x) & 15u) == 0;
  // Two steps a trip, both loaded before either is counted: twice the
  // bytes in flight a thread.
  for (long long w = warp0; w < steps; w += 2 * stride) {
    const long long s0 = w + threadIdx.x % 32, s1 = s0 + stride;
    float v[8];
    load4(p, aligned, s0, v);
    load4(p, aligned, s1, v + 4);
#pragma unroll
    for (int j = 0; j < 8; ++j) {
      const long long i = 4 * (j < 4 ? s0 : s1) + (j & 3);
      visit<Shared>(p, sh, v[j], i, i < p.n, t);
    }
  }
  if (Shared) {
    __syncthreads();
    for (int b = threadIdx.x; b < bins; b += blockDim.x)
      if (sh[b]) atomicAdd(&p.hist[b], static_cast<unsigned long long>(sh[b]));
  }
  const double s = block_sum(t.s);
  const double s2 = block_sum(t.s2);
  const double b_below = block_sum(static_cast<double>(t.below));
  const double b_above = block_sum(static_cast<double>(t.above));
  const double b_nonfinite = block_sum(static_cast<double>(t.nonfinite));
  atomicMax(&acc->maxbits, t.maxbits);
  if (threadIdx.x == 0) {
    partials[2 * blockIdx.x] = s;
    partials[2 * blockIdx.x + 1] = s2;
    atomicAdd(&outside[0], static_cast<unsigned long long>(b_below));
    atomicAdd(&outside[1], static_cast<unsigned long long>(b_above));
    atomicAdd(&outside[2], static_cast<unsigned long long>(b_nonfinite));
  }
}

// The blocks' sums in block order: the same bits every pass.
__global__ void finish(const Acc* acc, const double* partials, int blocks, double* moments) {
  double s = 0, s2 = 0;
  for (int b = 0; b < blocks; ++b) {
    s += partials[2 * b];
    s2 += partials[2 * b + 1];
  }
  const unsigned maxbits = acc->maxbits;
  moments[0] = s;
  moments[1] = s2;
  moments[2] = static_cast<double>(__uint_as_float(maxbits));
}

const char* last_error() {
  const cudaError_t e = cudaGetLastError();
  return e == cudaSuccess ? nullptr : cudaGetErrorString(e);
}

// Blocks of the pass: as many as the GPU holds at once (a second wave
// would start its share of the grid-stride loop late), at most kMaxBlocks.
template <bool Shared>
const char* blocks_for(long long n, std::size_t smem, int& blocks) {
  int dev = 0, sms = 1, per_sm = 1;
  cudaError_t e = cudaGetDevice(&dev);
  if (e == cudaSuccess) e = cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev);
  if (e == cudaSuccess) e = cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, histogram<Shared>, kThreads, smem);
  if (e != cudaSuccess) return cudaGetErrorString(e);
  const long long wanted = ((n + 3) / 4 + kThreads - 1) / kThreads;
  long long b = static_cast<long long>(sms) * (per_sm > 0 ? per_sm : 1);
  if (b > wanted) b = wanted;
  if (b > kTopkMaxBlocks) b = kTopkMaxBlocks;
  blocks = static_cast<int>(b > 0 ? b : 1);
  return nullptr;
}

}  // namespace

std::size_t topk_histogram_scratch_bytes() { return 2 * sizeof(double) * kTopkMaxBlocks; }

const char* launch_topk_histogram(const float* data, std::int64_t n, std::uint32_t lo, std::uint32_t hi, int shift,
                                  std::int64_t bins, unsigned long long* hist, double* moments,
                                  unsigned long long* outside, long long* candidates,
                                  unsigned long long* candidate_count, std::int64_t capacity,
                                  float* candidate_values, void* scratch, std::size_t scratch_bytes,
                                  cudaStream_t stream) {
  if (n < 0 || bins < 1 || bins > (std::int64_t{1} << 31) - 1) return "topk_histogram: bad n or bins";
  if (scratch == nullptr || scratch_bytes < topk_histogram_scratch_bytes()) return "topk_histogram: scratch too small";
  static_assert(sizeof(Acc) <= 3 * sizeof(double), "accumulators fit the moments buffer");
  Acc* acc = reinterpret_cast<Acc*>(moments);
  cudaError_t e = cudaMemsetAsync(hist, 0, bins * sizeof(unsigned long long), stream);
  if (e == cudaSuccess) e = cudaMemsetAsync(outside, 0, 3 * sizeof(unsigned long long), stream);
  if (e == cudaSuccess) e = cudaMemsetAsync(acc, 0, sizeof(Acc), stream);
  if (e == cudaSuccess && candidates != nullptr) e = cudaMemsetAsync(candidate_count, 0, sizeof(unsigned long long), stream);
  if (e != cudaSuccess) return cudaGetErrorString(e);
  const Pass p{data, n, lo, hi, shift, hist, candidates, candidates ? candidate_count : nullptr, capacity,
               candidates ? candidate_values : nullptr};
  auto* partials = static_cast<double*>(scratch);
  int blocks = 1;
  if (bins <= kSharedHistBins) {
    const std::size_t smem = bins * sizeof(unsigned);
    if (const char* err = blocks_for<true>(n, smem, blocks)) return err;
    histogram<true><<<blocks, kThreads, smem, stream>>>(p, static_cast<int>(bins), outside, acc, partials);
  } else {
    if (const char* err = blocks_for<false>(n, 0, blocks)) return err;
    histogram<false><<<blocks, kThreads, 0, stream>>>(p, static_cast<int>(bins), outside, acc, partials);
  }
  if (const char* err = last_error()) return err;
  finish<<<1, 1, 0, stream>>>(acc, partials, blocks, moments);
  return last_error();
}

}  // namespace accel::cuda
