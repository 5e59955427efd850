// kmeans_assign in OpenCL C (contract in host/include/accel/kernels.hpp), as
// three kernels the driver enqueues in order. No atomics and a fixed
// summation order, so a launch's sums are the same on every run:
//   kmeans_assign         one work-item per row: its nearest centroid (float
//                         distances summed over d in order, ties to the lower
//                         index) and that distance again in double;
//   kmeans_assign_sums    one work-item per (chunk of rows, dimension): the
//                         chunk's per-cluster sums of that dimension, and for
//                         dimension 0 the chunk's counts and inertia;
//   kmeans_assign_reduce  one work-item per output: the chunks added in order.
// Needs cl_khr_fp64 (the sums and the inertia are double).
#pragma OPENCL EXTENSION cl_khr_fp64 : enable

__kernel void kmeans_assign(__global const float* x, __global const float* c, long n, int d, int k,
                            __global int* labels, __global double* dist) {
  const long i = get_global_id(0);
  if (i >= n) return;
  __global const float* xi = x + i * d;
  float best = INFINITY;
  int arg = 0;
  for (int kk = 0; kk < k; ++kk) {
    __global const float* ck = c + (long)kk * d;
    float s = 0.0f;
    for (int j = 0; j < d; ++j) {
      const float t = xi[j] - ck[j];
      s += t * t;
    }
    if (s < best) {
      best = s;
      arg = kk;
    }
  }
  labels[i] = arg;
  __global const float* ca = c + (long)arg * d;
  double e = 0.0;
  for (int j = 0; j < d; ++j) {
    const double t = (double)xi[j] - (double)ca[j];
    e += t * t;
  }
  dist[i] = e;
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
