// kmeans_assign in OpenCL C (contract in host/include/accel/kernels.hpp), as
// four kernels the driver enqueues in order. No atomics and a fixed
// summation order, so a launch's sums are the same on every run:
//   kmeans_centroid_norms ||c_k||^2;
//   kmeans_assign         one work-item per KMEANS_ROWS rows, KMEANS_CENTS
//                         centroids at a time: their nearest centroids (||c||^2 - 2 x.c
//                         in float, 16-lane vectors, ties to the lower index;
//                         the cpu's sgemm path scores the same way); a row
//                         whose runner-up lies within the scores' rounding
//                         bound of the best is labelled by distance in
//                         double, as the cpu settles near ties, so both give
//                         the same labels; and the distance to it in double;
//   kmeans_assign_sums    one work-item per (chunk of rows, dimension): the
//                         chunk's per-cluster sums of that dimension, and for
//                         dimension 0 the chunk's counts and inertia;
//   kmeans_assign_reduce  one work-item per output: the chunks added in order.
// Needs cl_khr_fp64 (the sums and the inertia are double).
#pragma OPENCL EXTENSION cl_khr_fp64 : enable

// Rows per work-item in kmeans_assign: each centroid vector loaded once
// serves them all (the centroids are re-read for every row group, so this
// divides that traffic by KMEANS_ROWS); centroids per pass: each row
// vector loaded serves them all. 4 x 4 16-lane accumulators, 4 centroid
// vectors and a row take 21 of AVX-512's 32 vector registers (other
// shapes that fit, 8 x 2, 8 x 3 and 6 x 4, run no faster on PoCL).
#define KMEANS_ROWS 4
#define KMEANS_CENTS 4

float hsum16(float16 v) {
  const float8 a = v.lo + v.hi;
  const float4 b = a.lo + a.hi;
  const float2 c = b.lo + b.hi;
  return c.x + c.y;
}

// Scores of the rows at x (stride d; a group of fewer than KMEANS_ROWS
// rows, the last, repeats its last row: `rows`) against KMEANS_CENTS
// centroids from c (stride d; `cents` of them real, the rest repeat the
// last): ||c||^2 - 2 x.c, the squared distance less ||x||^2, which is the
// same for every centroid (one multiply-add per value instead of a
// subtraction and one). The dot products run in 16 lanes of explicit
// vectors, then the tail: a CPU runtime (PoCL) keeps each work-item's loop
// in SIMD registers instead of gathering across work-items. The loops over
// rows and centroids have constant trip counts, so the accumulators are
// registers (with `rows` as the bound they lived on the stack, a load and
// a store per multiply-add).
void scores(__global const float* x, int rows, int d, __global const float* c, int cents,
            __global const float* norms, float out[KMEANS_CENTS][KMEANS_ROWS]) {
  __global const float* xr[KMEANS_ROWS];
  __global const float* cr[KMEANS_CENTS];
#pragma unroll
  for (int r = 0; r < KMEANS_ROWS; ++r) xr[r] = x + (long)min(r, rows - 1) * d;
#pragma unroll
  for (int t = 0; t < KMEANS_CENTS; ++t) cr[t] = c + (long)min(t, cents - 1) * d;
  float16 acc[KMEANS_CENTS][KMEANS_ROWS];
#pragma unroll
  for (int t = 0; t < KMEANS_CENTS; ++t)
#pragma unroll
    for (int r = 0; r < KMEANS_ROWS; ++r) acc[t][r] = (float16)(0.0f);
  int j = 0;
  for (; j + 16 <= d; j += 16) {
    float16 cv[KMEANS_CENTS];
#pragma unroll
    for (int t = 0; t < KMEANS_CENTS; ++t) cv[t] = vload16(0, cr[t] + j);
#pragma unroll
    for (int r = 0; r < KMEANS_ROWS; ++r) {
      const float16 xv = vload16(0, xr[r] + j);
#pragma unroll
      for (int t = 0; t < KMEANS_CENTS; ++t) acc[t][r] = fma(xv, cv[t], acc[t][r]);
    }
  }
#pragma unroll
  for (int t = 0; t < KMEANS_CENTS; ++t) {
    const float n = norms[min(t, cents - 1)];
#pragma unroll
    for (int r = 0; r < KMEANS_ROWS; ++r) {
      float s = hsum16(acc[t][r]);
      for (int jj = j; jj < d; ++jj) s += xr[r][jj] * cr[t][jj];
      out[t][r] = n - 2.0f * s;
    }
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

// The nearest centroid by distance in double, the lowest index on an exact
// tie: for the few rows whose float scores cannot tell. Eight doubles a
// step: a scalar loop over every centroid slows the whole launch on PoCL.
int nearest_exactly(__global const float* xr, int d, __global const float* c, int k) {
  int arg = 0;
  double best = INFINITY;
  for (int kk = 0; kk < k; ++kk) {
    __global const float* cc = c + (long)kk * d;
    double8 acc = (double8)(0.0);
    int j = 0;
    for (; j + 8 <= d; j += 8) {
      const double8 t = convert_double8(vload8(0, xr + j)) - convert_double8(vload8(0, cc + j));
      acc = fma(t, t, acc);
    }
    const double4 h = acc.lo + acc.hi;
    const double2 q = h.lo + h.hi;
    double e = q.x + q.y;
    for (; j < d; ++j) {
      const double t = (double)xr[j] - (double)cc[j];
      e += t * t;
    }
    if (e < best) {
      best = e;
      arg = kk;
    }
  }
  return arg;
}

// How far apart two float scores ||c||^2 - 2 x.c may be from their exact
// values' order: each is within (d + 2) 2^-24 (||c||^2 + 2 |x| |c|) of its
// exact value (Higham's bound for the dot product in any order, the norm's
// own, one rounding for the difference), twice that between two; taken
// with the largest centroid norm, in double, with a margin.
float tie_bound(__global const float* xr, int d, float nmax) {
  double8 acc = (double8)(0.0);
  int j = 0;
  for (; j + 8 <= d; j += 8) {
    const double8 v = convert_double8(vload8(0, xr + j));
    acc = fma(v, v, acc);
  }
  const double4 h = acc.lo + acc.hi;
  const double2 q = h.lo + h.hi;
  double x2 = q.x + q.y;
  for (; j < d; ++j) x2 += (double)xr[j] * (double)xr[j];
  const double gamma = 2.0 * (double)(d + 2) * 0x1p-24;
  return (float)(gamma * ((double)nmax + 2.0 * sqrt(x2) * sqrt((double)nmax)) * (1.0 + 1e-6));
}

__kernel void kmeans_assign(__global const float* x, __global const float* c, __global const float* norms, long n,
                            int d, int k, __global int* labels, __global double* dist) {
  const long i0 = get_global_id(0) * KMEANS_ROWS;
  if (i0 >= n) return;
  const int rows = (int)min((long)KMEANS_ROWS, n - i0);
  __global const float* xi = x + i0 * d;
  float best[KMEANS_ROWS], second[KMEANS_ROWS], s[KMEANS_CENTS][KMEANS_ROWS];
  int arg[KMEANS_ROWS];
#pragma unroll
  for (int r = 0; r < KMEANS_ROWS; ++r) {
    best[r] = INFINITY;
    second[r] = INFINITY;
    arg[r] = 0;
  }
  for (int kk = 0; kk < k; kk += KMEANS_CENTS) {
    const int cents = min(KMEANS_CENTS, k - kk);  // the last pass may score its last centroid again: counted once
    scores(xi, rows, d, c + (long)kk * d, cents, norms + kk, s);
#pragma unroll
    for (int t = 0; t < KMEANS_CENTS; ++t)
#pragma unroll
      for (int r = 0; r < KMEANS_ROWS; ++r) {
        if (t >= cents) continue;
        const float v = s[t][r];
        if (v < best[r]) {  // in index order: ties to the lower index
          second[r] = best[r];
          best[r] = v;
          arg[r] = kk + t;
        } else if (v < second[r]) {
          second[r] = v;
        }
      }
  }
  float nmax = 0.0f;
  for (int kk = 0; kk < k; ++kk) nmax = fmax(nmax, norms[kk]);
  for (int r = 0; r < rows; ++r) {
    __global const float* xr = xi + (long)r * d;
    if (second[r] - best[r] <= tie_bound(xr, d, nmax)) arg[r] = nearest_exactly(xr, d, c, k);
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
