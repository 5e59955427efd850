// L2 kernel: K(x_q, x_i) for every query q and active row i (contract in
// host/include/accel/kernels.hpp). Each query row is scattered once into an
// on-chip dense buffer; every active row is then streamed through m_axi and
// its dot product gathered from that buffer, CSR_LANES products per cycle
// into separate double accumulators (no loop-carried add chain), summed by
// a small tree. The buffer is cleared again by re-walking the query row, so
// a launch costs nothing per column it does not touch.
#include "csr_kernel_rows.hpp"

#include <cmath>

static double apply_kernel(int type, double dot, double sq_u, double sq_v, double gamma, double coef0, int degree) {
  if (type == CSR_LINEAR) return dot;
  if (type == CSR_POLY) {
    double base = gamma * dot + coef0, r = 1.0;
    for (int t = degree; t > 0; t /= 2) {
#pragma HLS LOOP_TRIPCOUNT max = 8
      if (t % 2) r *= base;
      base *= base;
    }
    return r;
  }
  if (type == CSR_RBF) {
    double d2 = sq_u + sq_v - 2.0 * dot;
    return std::exp(-gamma * (d2 > 0.0 ? d2 : 0.0));
  }
  return std::tanh(gamma * dot + coef0);
}

extern "C" void csr_kernel_rows(const long long* row_ptr, const int* col_idx, const float* values,
                                const double* sq_norms, const int* queries, const int* active, float* out, int q,
                                int m, int cols, int type, double gamma, double coef0, int degree) {
#pragma HLS INTERFACE m_axi port = row_ptr offset = slave bundle = gmem0 depth = 65537
#pragma HLS INTERFACE m_axi port = col_idx offset = slave bundle = gmem1 max_read_burst_length = 64 depth = 1048576
#pragma HLS INTERFACE m_axi port = values offset = slave bundle = gmem2 max_read_burst_length = 64 depth = 1048576
#pragma HLS INTERFACE m_axi port = sq_norms offset = slave bundle = gmem0 depth = 65536
#pragma HLS INTERFACE m_axi port = queries offset = slave bundle = gmem0 depth = 64
#pragma HLS INTERFACE m_axi port = active offset = slave bundle = gmem0 depth = 65536
#pragma HLS INTERFACE m_axi port = out offset = slave bundle = gmem3 depth = 131072
#pragma HLS INTERFACE s_axilite port = q
#pragma HLS INTERFACE s_axilite port = m
#pragma HLS INTERFACE s_axilite port = cols
#pragma HLS INTERFACE s_axilite port = type
#pragma HLS INTERFACE s_axilite port = gamma
#pragma HLS INTERFACE s_axilite port = coef0
#pragma HLS INTERFACE s_axilite port = degree
#pragma HLS INTERFACE s_axilite port = return

  // Static: on a device this is a fixed URAM block. Zero at load (static
  // storage) and kept zero between launches by the clear loop below.
  static double dense[CSR_MAX_COLS];
#pragma HLS BIND_STORAGE variable = dense type = ram_2p impl = uram
#pragma HLS ARRAY_PARTITION variable = dense cyclic factor = CSR_LANES
  (void)cols;  // bounded by the host against CSR_MAX_COLS

queries_loop:
  for (int a = 0; a < q; ++a) {
    const int u = queries[a];
    const long long ulo = row_ptr[u], uhi = row_ptr[u + 1];
    const double sq_u = sq_norms[u];
  scatter:
    for (long long k = ulo; k < uhi; ++k) {
#pragma HLS PIPELINE II = 1
      dense[col_idx[k]] = values[k];
    }

  rows:
    for (int b = 0; b < m; ++b) {
      const int v = active[b];
      const long long lo = row_ptr[v], hi = row_ptr[v + 1];
      double acc[CSR_LANES];
#pragma HLS ARRAY_PARTITION variable = acc complete
      for (int l = 0; l < CSR_LANES; ++l) {
#pragma HLS UNROLL
        acc[l] = 0.0;
      }
    gather:
      for (long long k = lo; k < hi; k += CSR_LANES) {
#pragma HLS PIPELINE II = 1
        for (int l = 0; l < CSR_LANES; ++l) {
#pragma HLS UNROLL
          if (k + l < hi) acc[l] += static_cast<double>(values[k + l]) * dense[col_idx[k + l]];
        }
      }
      double dot = 0.0;
      for (int l = 0; l < CSR_LANES; ++l) {
#pragma HLS UNROLL
        dot += acc[l];
      }
      out[static_cast<long long>(a) * m + b] =
          static_cast<float>(apply_kernel(type, dot, sq_u, sq_norms[v], gamma, coef0, degree));
    }

  clear:
    for (long long k = ulo; k < uhi; ++k) {
#pragma HLS PIPELINE II = 1
      dense[col_idx[k]] = 0.0;
    }
  }
}
