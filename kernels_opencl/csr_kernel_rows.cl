// csr_kernel_rows in OpenCL C (contract in host/include/accel/kernels.hpp):
// one work-item per (query a, active row b), the sparse dot product by
// merging the two rows' sorted column indices, accumulated in double (as
// every backend but the cpu's many-query sgemm path), then LIBSVM's kernel
// function. Needs cl_khr_fp64.
#pragma OPENCL EXTENSION cl_khr_fp64 : enable

double sparse_dot(__global const long* row_ptr, __global const int* col, __global const float* val, long u,
                  long v) {
  long p = row_ptr[u], pe = row_ptr[u + 1], r = row_ptr[v], re = row_ptr[v + 1];
  double s = 0.0;
  while (p < pe && r < re) {
    const int cp = col[p], cr = col[r];
    if (cp == cr) {
      s += (double)val[p] * (double)val[r];
      ++p;
      ++r;
    } else if (cp < cr) {
      ++p;
    } else {
      ++r;
    }
  }
  return s;
}

// LIBSVM's powi: x^degree by squaring, degree >= 0.
double powi(double base, int times) {
  double tmp = base, ret = 1.0;
  for (int t = times; t > 0; t /= 2) {
    if (t % 2 == 1) ret *= tmp;
    tmp = tmp * tmp;
  }
  return ret;
}

// LIBSVM's kernel function of a dot product.
double kernel_value(double dot, double nu, double nv, int type, double gamma, double coef0, int degree) {
  if (type == 0) return dot;
  if (type == 1) return powi(gamma * dot + coef0, degree);
  if (type == 2) return exp(-gamma * max(0.0, nu + nv - 2.0 * dot));  // as the cpu: rounding never makes it > 1
  return tanh(gamma * dot + coef0);
}

// kernel_value of 16 dot products against 16 queries (norms nu) at once:
// exp and tanh of the runtime's vector library run in SIMD lanes, where a
// scalar call per value would take most of a launch on PoCL.
double16 kernel_values16(double16 dot, double16 nu, double nv, int type, double gamma, double coef0, int degree) {
  if (type == 0) return dot;
  if (type == 1) {
    double16 base = gamma * dot + coef0, ret = (double16)(1.0);
    for (int t = degree; t > 0; t /= 2) {
      if (t % 2 == 1) ret *= base;
      base = base * base;
    }
    return ret;
  }
  if (type == 2) return exp(-gamma * fmax(nu + nv - 2.0 * dot, 0.0));
  return tanh(gamma * dot + coef0);
}

// csr_kernel_rows_tiled: the merge's values without its branches, for
// data narrow enough that QUERY_TILE dense query rows fit in local memory.
// Without `exact` the products are summed in float, as the cpu's sgemm path
// sums them, in four chains (twice the lanes of a double, no conversion, and
// four multiply-adds in flight); with it, in double in the merge's order.
// A work-group takes QUERY_TILE queries and scatters their rows into
// `dense`, column-major (dense[col * QUERY_TILE + t]); each work-item then
// walks its own row's non-zeros once for all of them, one QUERY_TILE-lane
// multiply-add per non-zero. In double, the products and their order are
// the merge's (the queries' zeros add exact zeros, and a float product is
// exact in double), so the values are the same to the bit. The global size is
// padded to whole groups; padding items pass the barriers and write
// nothing.
#define QUERY_TILE 16  // 16 x 784 columns (Fashion-MNIST): 50 KB
#define TILE_GROUP 64
__kernel __attribute__((reqd_work_group_size(TILE_GROUP, 1, 1)))
void csr_kernel_rows_tiled(__global const long* row_ptr, __global const int* col, __global const float* val,
                           __global const double* sq_norms, __global const int* queries,
                           __global const int* active, __global float* out, long q, long m, int cols, int type,
                           double gamma, double coef0, int degree, int exact, __local float* dense) {
  __local double qnorms[QUERY_TILE];  // the queries' squared norms (0 past the last)
  const long b = get_global_id(0), a0 = get_global_id(1) * QUERY_TILE;
  const int lid = get_local_id(0);
  const int nq = (int)min((long)QUERY_TILE, q - a0);
  for (int j = lid; j < cols * QUERY_TILE; j += TILE_GROUP) dense[j] = 0.0f;
  if (lid < QUERY_TILE) qnorms[lid] = lid < nq ? sq_norms[queries[a0 + lid]] : 0.0;
  barrier(CLK_LOCAL_MEM_FENCE);
  for (int t = 0; t < nq; ++t) {
    const long u = queries[a0 + t];
    for (long p = row_ptr[u] + lid; p < row_ptr[u + 1]; p += TILE_GROUP) dense[col[p] * QUERY_TILE + t] = val[p];
  }
  barrier(CLK_LOCAL_MEM_FENCE);
  if (b >= m) return;
  const long v = active[b];
  double16 dots;
  if (exact) {
    dots = (double16)(0.0);
    for (long r = row_ptr[v]; r < row_ptr[v + 1]; ++r)
      dots = fma(convert_double16(vload16(col[r], dense)), (double16)((double)val[r]), dots);
  } else {
    // Four sums: one chain of multiply-adds waits on each one's latency.
    float16 s0 = (float16)(0.0f), s1 = s0, s2 = s0, s3 = s0;
    long r = row_ptr[v];
    const long re = row_ptr[v + 1];
    for (; r + 4 <= re; r += 4) {
      s0 = fma(vload16(col[r], dense), (float16)(val[r]), s0);
      s1 = fma(vload16(col[r + 1], dense), (float16)(val[r + 1]), s1);
      s2 = fma(vload16(col[r + 2], dense), (float16)(val[r + 2]), s2);
      s3 = fma(vload16(col[r + 3], dense), (float16)(val[r + 3]), s3);
    }
    for (; r < re; ++r) s0 = fma(vload16(col[r], dense), (float16)(val[r]), s0);
    dots = convert_double16((s0 + s1) + (s2 + s3));
  }
  float values[QUERY_TILE];
  vstore16(convert_float16(kernel_values16(dots, vload16(0, qnorms), sq_norms[v], type, gamma, coef0, degree)), 0,
           values);
  for (int t = 0; t < nq; ++t) out[(a0 + t) * m + b] = values[t];
}

__kernel void csr_kernel_rows(__global const long* row_ptr, __global const int* col, __global const float* val,
                              __global const double* sq_norms, __global const int* queries,
                              __global const int* active, __global float* out, long q, long m, int type,
                              double gamma, double coef0, int degree) {
  const long b = get_global_id(0), a = get_global_id(1);
  if (a >= q || b >= m) return;
  const long u = queries[a], v = active[b];
  const double dot = sparse_dot(row_ptr, col, val, u, v);
  out[a * m + b] = (float)kernel_value(dot, sq_norms[u], sq_norms[v], type, gamma, coef0, degree);
}
