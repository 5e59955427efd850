// kmeans_assign in OpenCL C (contract in host/include/accel/kernels.hpp), as
// four kernels the driver enqueues in order. No atomics and a fixed
// summation order, so a launch's sums are the same on every run:
//   kmeans_centroid_norms ||c_k||^2;
//   kmeans_assign         one work-item per KMEANS_ROWS rows, centroids two
//                         at a time: their nearest centroids (||c||^2 - 2 x.c
//                         in float, 16-lane vectors, ties to the lower index;
//                         the cpu's sgemm path scores the same way) and the
//                         distance to it again in double;
//   kmeans_assign_sums    one work-item per (chunk of rows, dimension): the
//                         chunk's per-cluster sums of that dimension, and for
//                         dimension 0 the chunk's counts and inertia;
//   kmeans_assign_reduce  one work-item per output: the chunks added in order.
// Needs cl_khr_fp64 (the sums and the inertia are double).
#pragma OPENCL EXTENSION cl_khr_fp64 : enable

// Rows per work-item in kmeans_assign: each centroid vector loaded once
// serves them all (the centroids are re-read for every row group, so this
// divides that traffic by KMEANS_ROWS).
#define KMEANS_ROWS 4

float hsum16(float16 v) {
  const float8 a = v.lo + v.hi;
  const float4 b = a.lo + a.hi;
  const float2 c = b.lo + b.hi;
  return c.x + c.y;
}

// Scores of rows x[0..rows) (stride d) against centroids c0 and c1:
// ||c||^2 - 2 x.c, the squared distance less ||x||^2, which is the same for
// every centroid (one multiply-add per value instead of a subtraction and
// one). Two centroids at once: each row vector loaded serves both. The dot
// products run in 16 lanes of explicit vectors, then the tail: a CPU
// runtime (PoCL) keeps each work-item's loop in SIMD registers instead of
// gathering across work-items.
void scores(__global const float* x, int rows, int d, __global const float* c0, __global const float* c1,
             float n0, float n1, float* out0, float* out1) {
  float16 a0[KMEANS_ROWS], a1[KMEANS_ROWS];
  for (int r = 0; r < KMEANS_ROWS; ++r) a0[r] = a1[r] = (float16)(0.0f);
  int j = 0;
  for (; j + 16 <= d; j += 16) {
    const float16 v0 = vload16(0, c0 + j), v1 = vload16(0, c1 + j);
    for (int r = 0; r < rows; ++r) {
      const float16 xv = vload16(0, x + (long)r * d + j);
      a0[r] = fma(xv, v0, a0[r]);
      a1[r] = fma(xv, v1, a1[r]);
    }
  }
  for (int r = 0; r < rows; ++r) {
    float s0 = hsum16(a0[r]), s1 = hsum16(a1[r]);
    for (int jj = j; jj < d; ++jj) {
      s0 += x[(long)r * d + jj] * c0[jj];
      s1 += x[(long)r * d + jj] * c1[jj];
    }
    out0[r] = n0 - 2.0f * s0;
    out1[r] = n1 - 2.0f * s1;
  }
}

// ||c_k||^2 for every centroid, once per launch.
__kernel void kmeans_centroid_norms(__global const float* c, int d, int k, __global float* norms) {
  const int kk = get_global_id(0);
  if (kk >= k) return;
  float s = 0.0f;
  for (int j = 0; j < d; ++j) s += c[(long)kk * d + j] * c[(long)kk * d + j];
  norms[kk] = s;
}

__kernel void kmeans_assign(__global const float* x, __global const float* c, __global const float* norms, long n,
                            int d, int k, __global int* labels, __global double* dist) {
  const long i0 = get_global_id(0) * KMEANS_ROWS;
  if (i0 >= n) return;
  const int rows = (int)min((long)KMEANS_ROWS, n - i0);
  __global const float* xi = x + i0 * d;
  float best[KMEANS_ROWS], s[KMEANS_ROWS], s1[KMEANS_ROWS];
  int arg[KMEANS_ROWS];
  for (int r = 0; r < KMEANS_ROWS; ++r) {
    best[r] = INFINITY;
    arg[r] = 0;
  }
  for (int kk = 0; kk < k; kk += 2) {
    const int k1 = min(kk + 1, k - 1);  // an odd k's last centroid: scored twice, counted once
    scores(xi, rows, d, c + (long)kk * d, c + (long)k1 * d, norms[kk], norms[k1], s, s1);
    for (int r = 0; r < rows; ++r) {
      if (s[r] < best[r]) {  // ties to the lower index
        best[r] = s[r];
        arg[r] = kk;
      }
      if (k1 > kk && s1[r] < best[r]) {
        best[r] = s1[r];
        arg[r] = k1;
      }
    }
  }
  for (int r = 0; r < rows; ++r) {
    labels[i0 + r] = arg[r];
    __global const float* ca = c + (long)arg[r] * d;
    double e = 0.0;
    for (int j = 0; j < d; ++j) {
      const double t = (double)xi[(long)r * d + j] - (double)ca[j];
      e += t * t;
    }
    dist[i0 + r] = e;
  }
}

__kernel void kmeans_assign_sums(__global const float* x, __global const int* labels, __global const double* dist,
                                 long n, int d, int k, long rows_per_chunk, __global double* part_sums,
                                 __global long* part_counts, __global double* part_inertia) {
  const int j = get_global_id(0);
  const long chunk = get_global_id(1);
  if (j >= d) return;
  const long begin = chunk * rows_per_chunk;
  const long end = min(n, begin + rows_per_chunk);
  __global double* s = part_sums + chunk * (long)k * d;
  for (int kk = 0; kk < k; ++kk) s[(long)kk * d + j] = 0.0;
  for (long i = begin; i < end; ++i) s[(long)labels[i] * d + j] += (double)x[i * d + j];
  if (j != 0) return;
  __global long* cnt = part_counts + chunk * (long)k;
  for (int kk = 0; kk < k; ++kk) cnt[kk] = 0;
  double in = 0.0;
  for (long i = begin; i < end; ++i) {
    cnt[labels[i]] += 1;
    in += dist[i];
  }
  part_inertia[chunk] = in;
}

__kernel void kmeans_assign_reduce(__global const double* part_sums, __global const long* part_counts,
                                   __global const double* part_inertia, long chunks, int d, int k,
                                   __global double* sums, __global long* counts, __global double* inertia) {
  const long t = get_global_id(0);
  const long kd = (long)k * d;
  if (t < kd) {
    double s = 0.0;
    for (long ch = 0; ch < chunks; ++ch) s += part_sums[ch * kd + t];
    sums[t] = s;
  } else if (t < kd + k) {
    const long kk = t - kd;
    long s = 0;
    for (long ch = 0; ch < chunks; ++ch) s += part_counts[ch * k + kk];
    counts[kk] = s;
  } else if (t == kd + k) {
    double s = 0.0;
    for (long ch = 0; ch < chunks; ++ch) s += part_inertia[ch];
    inertia[0] = s;
  }
}
