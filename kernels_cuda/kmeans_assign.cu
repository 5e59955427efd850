// kmeans_assign on NVIDIA GPUs: one Lloyd step (contract in
// host/include/accel/kernels.hpp). Two ways to find the labels, as on the CPU:
//  - fused (d <= kFusedMaxD): each thread holds its points' rows in
//    registers (several points a thread where d is one the CPU wide loop
//    is built for); centroids pass through shared memory a tile at a time
//    and every thread reads the same centroid element (a broadcast). No
//    distance matrix.
//  - gemm: cuBLAS sgemm gives x.c for a block of rows, then one warp per row
//    takes argmin of ||c||^2 - 2 x.c (||x||^2 does not move the argmin) and
//    recomputes the exact ||x - c||^2 of the winner for the inertia, so the
//    inertia carries no cancellation error.
// Both scan centroids in increasing index with strict <, starting from
// (+inf, 0): ties and all-NaN rows go to the lower index, as on every backend.
// Then one pass adds each row into its cluster's sums/counts with atomics
// (per-block shared-memory partials when k*(d+1) doubles fit in 48 KiB,
// global atomics otherwise), and each block adds its inertia once.
// Double atomicAdd needs sm_60 or newer.
//
// Atomics make the order of the double additions vary from run to run: sums
// and inertia may differ in the last bits between runs; labels and counts do not.
#include "kmeans_assign.cuh"

#include <algorithm>
#include <climits>
#include <cmath>
#include <cstdint>

#include <cuda_runtime.h>

namespace accel::cuda {
namespace {

constexpr int kThreads = 256;                     // every kernel here: 8 warps
constexpr int kTileFloats = 4096;                 // fused: 16 KiB of centroids per tile
constexpr std::int64_t kDotFloats = 16ll << 20;   // gemm: 64 MiB of x.c per row block
constexpr std::size_t kSharedAccBytes = 48 << 10; // accumulate: default dynamic shared limit
constexpr std::size_t kAlign = 256;
static_assert(kMaxDim + kTileFloats <= INT_MAX, "int loop counters in the kernels step past d and k");

static_assert(kTileFloats >= kFusedMaxD, "a tile must hold one centroid");

std::size_t align_up(std::size_t v) { return (v + kAlign - 1) / kAlign * kAlign; }

// Rows per gemm block: the block's x.c (rows x k floats) stays within kDotFloats.
std::int64_t gemm_rows(std::int64_t n, std::int64_t k) {
  return std::max<std::int64_t>(1, std::min<std::int64_t>(n, kDotFloats / k));
}

// Adds v over the block and then once into *out. Every thread must call it.
__device__ void add_block_sum(double v, double* out) {
  __shared__ double warp_sums[kThreads / 32];
  for (int off = 16; off > 0; off /= 2) v += __shfl_down_sync(0xffffffffu, v, off);
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  if (lane == 0) warp_sums[warp] = v;
  __syncthreads();
  if (warp == 0) {
    v = lane < kThreads / 32 ? warp_sums[lane] : 0.0;
    for (int off = 16; off > 0; off /= 2) v += __shfl_down_sync(0xffffffffu, v, off);
    if (lane == 0) atomicAdd(out, v);
  }
}

__global__ void __launch_bounds__(kThreads)
    assign_fused(const float* __restrict__ x, const float* __restrict__ c, std::int64_t n, int d, int k,
                 std::int32_t* __restrict__ labels, double* __restrict__ inertia) {
  __shared__ float tile[kTileFloats];
  const std::int64_t i = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  const bool active = i < n;  // inactive threads still help load tiles and reduce
  float xr[kFusedMaxD];
#pragma unroll
  for (int j = 0; j < kFusedMaxD; ++j) xr[j] = active && j < d ? x[i * d + j] : 0.0f;

  float best = INFINITY;
  int arg = 0;
  const int per_tile = kTileFloats / d;
  for (int k0 = 0; k0 < k; k0 += per_tile) {
    const int tk = min(per_tile, k - k0);
    __syncthreads();  // the previous tile is no longer read
    for (int e = threadIdx.x; e < tk * d; e += blockDim.x) tile[e] = c[static_cast<std::int64_t>(k0) * d + e];
    __syncthreads();
    for (int t = 0; t < tk; ++t) {
      const float* ct = tile + t * d;
      float acc = 0.0f;
#pragma unroll
      for (int j = 0; j < kFusedMaxD; ++j) {
        if (j < d) {
          // No FMA contraction: the roundings and order of the CPU direct
          // loop when that is built without contraction (-ffp-contract=off).
          const float u = xr[j] - ct[j];
          acc = __fadd_rn(acc, __fmul_rn(u, u));
        }
      }
      if (acc < best) {
        best = acc;
        arg = k0 + t;
      }
    }
  }
  if (active) labels[i] = arg;
  add_block_sum(active ? static_cast<double>(best) : 0.0, inertia);
}

// assign_fused with d fixed at compile time (1..16, 24, 32: where the CPU
// wide loop is built, up to kFusedMaxD) and P points per thread, the CPU loop's register blocking:
// each centroid element read from shared memory serves P points instead of
// one, and the distance loop is exactly d long instead of kFusedMaxD
// predicated steps. Same roundings and order per point as assign_fused, so
// the same labels and distances (the inertia adds P points a thread before
// the block's sum, so its last bits may differ). Point p of a thread is
// first + p * kThreads, so each of the P loads is a warp's consecutive rows.
template <int D, int P>
__global__ void __launch_bounds__(kThreads)
    assign_fused_d(const float* __restrict__ x, const float* __restrict__ c, std::int64_t n, int k,
                   std::int32_t* __restrict__ labels, double* __restrict__ inertia) {
  __shared__ float tile[kTileFloats];
  const std::int64_t first = static_cast<std::int64_t>(blockIdx.x) * kThreads * P + threadIdx.x;
  float xr[P][D];
  float best[P];
  int arg[P];
#pragma unroll
  for (int p = 0; p < P; ++p) {
    const std::int64_t i = first + static_cast<std::int64_t>(p) * kThreads;
#pragma unroll
    for (int j = 0; j < D; ++j) xr[p][j] = i < n ? x[i * D + j] : 0.0f;
    best[p] = INFINITY;
    arg[p] = 0;
  }
  constexpr int per_tile = kTileFloats / D;
  for (int k0 = 0; k0 < k; k0 += per_tile) {
    const int tk = min(per_tile, k - k0);
    __syncthreads();  // the previous tile is no longer read
    for (int e = threadIdx.x; e < tk * D; e += kThreads) tile[e] = c[static_cast<std::int64_t>(k0) * D + e];
    __syncthreads();
    for (int t = 0; t < tk; ++t) {
      const float* ct = tile + t * D;
      float acc[P];
#pragma unroll
      for (int p = 0; p < P; ++p) acc[p] = 0.0f;
#pragma unroll
      for (int j = 0; j < D; ++j) {
        const float cj = ct[j];
#pragma unroll
        for (int p = 0; p < P; ++p) {
          const float u = xr[p][j] - cj;
          acc[p] = __fadd_rn(acc[p], __fmul_rn(u, u));
        }
      }
#pragma unroll
      for (int p = 0; p < P; ++p)
        if (acc[p] < best[p]) {
          best[p] = acc[p];
          arg[p] = k0 + t;
        }
    }
  }
  double sum = 0.0;
#pragma unroll
  for (int p = 0; p < P; ++p) {
    const std::int64_t i = first + static_cast<std::int64_t>(p) * kThreads;
    if (i < n) {
      labels[i] = arg[p];
      sum += static_cast<double>(best[p]);
    }
  }
  add_block_sum(sum, inertia);
}

template <int D>
cudaError_t launch_fused_d(const float* x, const float* c, std::int64_t n, int k, std::int32_t* labels,
                           double* inertia, cudaStream_t stream) {
  // Points per thread: P * D floats of x in registers stay at 32 or fewer.
  constexpr int P = D <= 8 ? 4 : D <= 16 ? 2 : 1;
  const auto blocks = static_cast<unsigned>((n + kThreads * P - 1) / (kThreads * P));
  assign_fused_d<D, P><<<blocks, kThreads, 0, stream>>>(x, c, n, k, labels, inertia);
  return cudaGetLastError();
}

// Whether assign_fused_d is built for d (else assign_fused takes it).
bool fused_fixed_fits(std::int64_t d) { return (d >= 1 && d <= 16) || d == 24 || d == 32; }

// The fused launch for d known at compile time (fused_fixed_fits(d)).
cudaError_t launch_fused_fixed(const float* x, const float* c, std::int64_t n, std::int64_t d, int k,
                               std::int32_t* labels, double* inertia, cudaStream_t stream) {
  switch (d) {
#define ACCEL_FUSED_CASE(D) \
  case D: return launch_fused_d<D>(x, c, n, k, labels, inertia, stream);
    ACCEL_FUSED_CASE(1) ACCEL_FUSED_CASE(2) ACCEL_FUSED_CASE(3) ACCEL_FUSED_CASE(4) ACCEL_FUSED_CASE(5)
    ACCEL_FUSED_CASE(6) ACCEL_FUSED_CASE(7) ACCEL_FUSED_CASE(8) ACCEL_FUSED_CASE(9) ACCEL_FUSED_CASE(10)
    ACCEL_FUSED_CASE(11) ACCEL_FUSED_CASE(12) ACCEL_FUSED_CASE(13) ACCEL_FUSED_CASE(14) ACCEL_FUSED_CASE(15)
    ACCEL_FUSED_CASE(16) ACCEL_FUSED_CASE(24) ACCEL_FUSED_CASE(32)
#undef ACCEL_FUSED_CASE
    default: return cudaErrorInvalidValue;  // not reached: fused_fixed_fits(d) is checked first
  }
}

// ||c_k||^2, one warp per centroid.
__global__ void __launch_bounds__(kThreads)
    centroid_norms(const float* __restrict__ c, int d, int k, float* __restrict__ norms) {
  const std::int64_t w = (static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x) / 32;
  const int lane = threadIdx.x % 32;
  if (w >= k) return;  // whole warps leave together
  const float* ck = c + w * d;
  float s = 0.0f;
  for (int j = lane; j < d; j += 32) s += ck[j] * ck[j];
  for (int off = 16; off > 0; off /= 2) s += __shfl_xor_sync(0xffffffffu, s, off);
  if (lane == 0) norms[w] = s;
}

// One warp per row of a gemm block: argmin over dot[q*k + kk] then the exact
// distance to the winner. xb/labels_b point at the block's first row.
__global__ void __launch_bounds__(kThreads)
    assign_from_dots(const float* __restrict__ dot, const float* __restrict__ norms,
                     const float* __restrict__ xb, const float* __restrict__ c, std::int64_t m, int d, int k,
                     std::int32_t* __restrict__ labels_b, double* __restrict__ inertia) {
  const std::int64_t q = (static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x) / 32;
  const int lane = threadIdx.x % 32;
  double contrib = 0.0;
  if (q < m) {  // uniform across the warp
    const float* g = dot + q * k;
    float best = INFINITY;
    int arg = INT_MAX;  // "none yet": loses every tie below
    for (int kk = lane; kk < k; kk += 32) {
      const float dist = norms[kk] - 2.0f * g[kk];
      if (dist < best) {
        best = dist;
        arg = kk;
      }
    }
    // Lexicographic min of (best, arg): same answer as a forward scan with strict <.
    for (int off = 16; off > 0; off /= 2) {
      const float ob = __shfl_xor_sync(0xffffffffu, best, off);
      const int oa = __shfl_xor_sync(0xffffffffu, arg, off);
      if (ob < best || (ob == best && oa < arg)) {
        best = ob;
        arg = oa;
      }
    }
    if (best == INFINITY) arg = 0;  // nothing beat +inf (NaN row): the scan's start value
    const float* xi = xb + q * d;
    const float* ci = c + static_cast<std::int64_t>(arg) * d;
    float exact = 0.0f;
    for (int j = lane; j < d; j += 32) {
      const float u = xi[j] - ci[j];
      exact += u * u;
    }
    for (int off = 16; off > 0; off /= 2) exact += __shfl_xor_sync(0xffffffffu, exact, off);
    if (lane == 0) {
      labels_b[q] = arg;
      contrib = exact;
    }
  }
  add_block_sum(contrib, inertia);
}

// sums[label*d + j] += x[i*d + j], counts[label] += 1, over the flattened
// n*d elements (coalesced reads of x). Shared: per-block partials in dynamic
// shared memory (k*d doubles then k counters) flushed once per block.
template <bool Shared>
__global__ void __launch_bounds__(kThreads)
    accumulate(const float* __restrict__ x, const std::int32_t* __restrict__ labels, std::int64_t n,
               std::int64_t d, std::int64_t k, double* __restrict__ sums,
               unsigned long long* __restrict__ counts) {
  extern __shared__ double smem[];
  double* acc = sums;
  unsigned long long* cnt = counts;
  if constexpr (Shared) {
    acc = smem;
    cnt = reinterpret_cast<unsigned long long*>(smem + k * d);
    for (std::int64_t e = threadIdx.x; e < k * d + k; e += blockDim.x) smem[e] = 0.0;  // zero bits: 0ull too
    __syncthreads();
  }
  const std::int64_t total = n * d;
  const std::int64_t stride = static_cast<std::int64_t>(gridDim.x) * blockDim.x;
  for (std::int64_t e = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; e < total; e += stride) {
    const std::int64_t row = e / d;
    const std::int64_t j = e - row * d;
    const std::int64_t label = labels[row];
    atomicAdd(&acc[label * d + j], static_cast<double>(x[e]));
    if (j == 0) atomicAdd(&cnt[label], 1ull);
  }
  if constexpr (Shared) {
    __syncthreads();
    // Zeros are skipped: adding +0.0 or 0 to the zeroed outputs changes nothing.
    for (std::int64_t e = threadIdx.x; e < k * d; e += blockDim.x)
      if (acc[e] != 0.0) atomicAdd(&sums[e], acc[e]);
    for (std::int64_t e = threadIdx.x; e < k; e += blockDim.x)
      if (cnt[e] != 0) atomicAdd(&counts[e], cnt[e]);
  }
}

const char* last_launch_error() {
  const cudaError_t e = cudaGetLastError();
  return e == cudaSuccess ? nullptr : cudaGetErrorString(e);
}

}  // namespace

const char* kmeans_assign_probe() {
  cudaFuncAttributes attr{};
  const cudaError_t e = cudaFuncGetAttributes(&attr, assign_fused);
  cudaGetLastError();  // not sticky; keep it out of the next launch's check
  return e == cudaSuccess ? nullptr : cudaGetErrorString(e);
}

KMeansPath kmeans_assign_path(std::int64_t d, std::int64_t /*k*/, KMeansPath requested) {
  if (d > kFusedMaxD) return KMeansPath::Gemm;
  return requested == KMeansPath::Auto ? KMeansPath::Fused : requested;
}

std::size_t kmeans_assign_scratch_bytes(std::int64_t n, std::int64_t d, std::int64_t k, KMeansPath path) {
  if (n < 1 || d < 1 || k < 1 || kmeans_assign_path(d, k, path) != KMeansPath::Gemm) return 0;
  const auto norms = align_up(static_cast<std::size_t>(k) * sizeof(float));
  return norms + static_cast<std::size_t>(gemm_rows(n, k)) * static_cast<std::size_t>(k) * sizeof(float);
}

const char* launch_kmeans_assign(const float* x, const float* centroids, std::int64_t n, std::int64_t d,
                                 std::int64_t k, std::int32_t* labels, double* sums, std::int64_t* counts,
                                 double* inertia, void* scratch, std::size_t scratch_bytes, cublasHandle_t blas,
                                 cudaStream_t stream, KMeansPath path) {
  // Shape: labels are int32 and cuBLAS dimensions int (d, k <= 2^30 also
  // keeps the kernels' int loop counters clear of overflow); k*d*8 bytes and
  // n*d elements must fit int64; the fused grid is at most 2^31-1 blocks.
  if (n < 0 || d < 1 || k < 1 || d > kMaxDim || k > kMaxDim)
    return "kmeans_assign: needs n >= 0, 1 <= d <= 2^30, 1 <= k <= 2^30";
  if (k > INT64_MAX / 8 / d || (n > 0 && d > INT64_MAX / n) || n / kThreads >= INT_MAX)
    return "kmeans_assign: n*d or k*d too large";
  if (centroids == nullptr || sums == nullptr || counts == nullptr || inertia == nullptr ||
      (n > 0 && (x == nullptr || labels == nullptr)))
    return "kmeans_assign: null buffer";
  path = kmeans_assign_path(d, k, path);
  const std::size_t need = kmeans_assign_scratch_bytes(n, d, k, path);
  if (scratch_bytes < need || (need > 0 && scratch == nullptr)) return "kmeans_assign: scratch buffer too small";
  if (path == KMeansPath::Gemm && n > 0 && blas == nullptr) return "kmeans_assign: the gemm path needs cuBLAS";

  // Outputs are overwritten, like every backend's: zero then accumulate.
  cudaError_t e = cudaMemsetAsync(sums, 0, static_cast<std::size_t>(k * d) * sizeof(double), stream);
  if (e == cudaSuccess) e = cudaMemsetAsync(counts, 0, static_cast<std::size_t>(k) * sizeof(std::int64_t), stream);
  if (e == cudaSuccess) e = cudaMemsetAsync(inertia, 0, sizeof(double), stream);
  if (e != cudaSuccess) return cudaGetErrorString(e);
  if (n == 0) return nullptr;

  const int di = static_cast<int>(d), ki = static_cast<int>(k);
  if (path == KMeansPath::Fused) {
    if (fused_fixed_fits(d)) {
      e = launch_fused_fixed(x, centroids, n, d, ki, labels, inertia, stream);
    } else {
      const auto blocks = static_cast<unsigned>((n + kThreads - 1) / kThreads);
      assign_fused<<<blocks, kThreads, 0, stream>>>(x, centroids, n, di, ki, labels, inertia);
      e = cudaGetLastError();
    }
    if (e != cudaSuccess) return cudaGetErrorString(e);
  } else {
    auto* norms = static_cast<float*>(scratch);
    auto* dot = reinterpret_cast<float*>(static_cast<char*>(scratch) + align_up(k * sizeof(float)));
    centroid_norms<<<static_cast<unsigned>((k * 32 + kThreads - 1) / kThreads), kThreads, 0, stream>>>(
        centroids, di, ki, norms);
    if (const char* err = last_launch_error()) return err;
    const cuda::Cublas& lib = cuda::cublas();  // loaded by the handle's creation already
    cublasStatus_t st = lib.set_stream(blas, stream);
    if (st != CUBLAS_STATUS_SUCCESS) return lib.status_string(st);
    const std::int64_t rows = gemm_rows(n, k);
    const float one = 1.0f, zero = 0.0f;
    for (std::int64_t r0 = 0; r0 < n; r0 += rows) {
      const std::int64_t m = std::min(rows, n - r0);
      const float* xb = x + r0 * d;
      // Column-major view: dot (k x m, ld k) = C^T' (k x d) * X_b^T (d x m),
      // i.e. row-major dot[q][kk] = x_q . c_kk.
      st = lib.sgemm(blas, CUBLAS_OP_T, CUBLAS_OP_N, ki, static_cast<int>(m), di, &one, centroids, di, xb, di,
                       &zero, dot, ki);
      if (st != CUBLAS_STATUS_SUCCESS) return lib.status_string(st);
      // The next block's sgemm overwrites dot after this kernel: same stream, in order.
      assign_from_dots<<<static_cast<unsigned>((m * 32 + kThreads - 1) / kThreads), kThreads, 0, stream>>>(
          dot, norms, xb, centroids, m, di, ki, labels + r0, inertia);
      if (const char* err = last_launch_error()) return err;
    }
  }

  int dev = 0, sms = 1;
  if ((e = cudaGetDevice(&dev)) != cudaSuccess) return cudaGetErrorString(e);
  if ((e = cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev)) != cudaSuccess)
    return cudaGetErrorString(e);
  const std::int64_t total = n * d;
  const std::size_t shared = static_cast<std::size_t>(k * d + k) * sizeof(double);
  const std::int64_t wanted = (total + kThreads - 1) / kThreads;
  static_assert(sizeof(unsigned long long) == sizeof(std::int64_t));
  auto* ucounts = reinterpret_cast<unsigned long long*>(counts);
  if (shared <= kSharedAccBytes) {
    // Few blocks: each flushes k*(d+1) atomics at the end.
    const auto blocks = static_cast<unsigned>(std::min<std::int64_t>(wanted, 2ll * sms));
    accumulate<true><<<blocks, kThreads, shared, stream>>>(x, labels, n, d, k, sums, ucounts);
  } else {
    const auto blocks = static_cast<unsigned>(std::min<std::int64_t>(wanted, 8ll * sms));
    accumulate<false><<<blocks, kThreads, 0, stream>>>(x, labels, n, d, k, sums, ucounts);
  }
  return last_launch_error();
}

}  // namespace accel::cuda
