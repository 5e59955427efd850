// L2 kernel: K(x_q, x_i) for every query q and active row i (contract in
// host/include/accel/kernels.hpp). Queries are taken CSR_QUERY_GROUP at a
// time: each is scattered into its own on-chip dense buffer; every active row
// is then streamed through m_axi once per group and its dot products with
// all the group's queries gathered from those buffers, CSR_LANES non-zeros
// per cycle into separate double accumulators (no loop-carried add chain),
// summed by a small tree. The buffers are cleared again by re-walking the
// query rows, so a launch costs nothing per column it does not touch.
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
#pragma HLS INTERFACE m_axi port = queries offset = slave bundle = gmem0 depth = 512
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

  // Static: on a device these are fixed URAM blocks. Zero at load (static
  // storage) and kept zero between launches by the clear loop below.
  static double dense[CSR_QUERY_GROUP][CSR_MAX_COLS];
#pragma HLS BIND_STORAGE variable = dense type = ram_2p impl = uram
#pragma HLS ARRAY_PARTITION variable = dense complete dim = 1
#pragma HLS ARRAY_PARTITION variable = dense cyclic factor = CSR_LANES dim = 2
  (void)cols;  // bounded by the host against CSR_MAX_COLS

groups_loop:
  for (int a0 = 0; a0 < q; a0 += CSR_QUERY_GROUP) {
    const int g = q - a0 < CSR_QUERY_GROUP ? q - a0 : CSR_QUERY_GROUP;
    double sq_u[CSR_QUERY_GROUP];
#pragma HLS ARRAY_PARTITION variable = sq_u complete
  scatter_group:
    for (int j = 0; j < g; ++j) {
      const int u = queries[a0 + j];
      sq_u[j] = sq_norms[u];
    scatter:
      for (long long k = row_ptr[u]; k < row_ptr[u + 1]; ++k) {
#pragma HLS PIPELINE II = 1
        dense[j][col_idx[k]] = values[k];
      }
    }

  rows:
    for (int b = 0; b < m; ++b) {
      const int v = active[b];
      const long long lo = row_ptr[v], hi = row_ptr[v + 1];
      double acc[CSR_QUERY_GROUP][CSR_LANES];
#pragma HLS ARRAY_PARTITION variable = acc complete dim = 0
      for (int j = 0; j < CSR_QUERY_GROUP; ++j) {
#pragma HLS UNROLL
        for (int l = 0; l < CSR_LANES; ++l) {
#pragma HLS UNROLL
          acc[j][l] = 0.0;
        }
      }
    gather:
      for (long long k = lo; k < hi; k += CSR_LANES) {
#pragma HLS PIPELINE II = 1
        for (int l = 0; l < CSR_LANES; ++l) {
#pragma HLS UNROLL
          if (k + l < hi) {
            const double x = static_cast<double>(values[k + l]);
            const int c = col_idx[k + l];
            for (int j = 0; j < CSR_QUERY_GROUP; ++j) {
#pragma HLS UNROLL
              acc[j][l] += x * dense[j][c];  // rows past g hold zeros: their sums are unused
            }
          }
        }
      }
      const double sq_v = sq_norms[v];
    finish:
      for (int j = 0; j < g; ++j) {
        double dot = 0.0;
        for (int l = 0; l < CSR_LANES; ++l) {
#pragma HLS UNROLL
          dot += acc[j][l];
        }
        out[static_cast<long long>(a0 + j) * m + b] =
            static_cast<float>(apply_kernel(type, dot, sq_u[j], sq_v, gamma, coef0, degree));
      }
    }

  clear_group:
    for (int j = 0; j < g; ++j) {
      const int u = queries[a0 + j];
    clear:
      for (long long k = row_ptr[u]; k < row_ptr[u + 1]; ++k) {
#pragma HLS PIPELINE II = 1
        dense[j][col_idx[k]] = 0.0;
      }
    }
  }
}
