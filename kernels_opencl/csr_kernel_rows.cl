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

__kernel void csr_kernel_rows(__global const long* row_ptr, __global const int* col, __global const float* val,
                              __global const double* sq_norms, __global const int* queries,
                              __global const int* active, __global float* out, long q, long m, int type,
                              double gamma, double coef0, int degree) {
  const long b = get_global_id(0), a = get_global_id(1);
  if (a >= q || b >= m) return;
  const long u = queries[a], v = active[b];
  const double dot = sparse_dot(row_ptr, col, val, u, v);
  double r;
  if (type == 0) r = dot;
  else if (type == 1) r = powi(gamma * dot + coef0, degree);
  else if (type == 2) r = exp(-gamma * (sq_norms[u] + sq_norms[v] - 2.0 * dot));
  else r = tanh(gamma * dot + coef0);
  out[a * m + b] = (float)r;
}
