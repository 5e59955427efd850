// L2 kernel: one Lloyd step over n streamed points (contract in
// host/include/accel/kernels.hpp). Centroids are loaded on chip once per
// launch; each point is read once through m_axi, compared with KMEANS_KPAR
// centroids per step through an argmin tree, and its row is added to
// on-chip double sums that are written back once at the end.
#include "kmeans_assign.hpp"

#include "l1/argmin_tree.hpp"
#include "l1/sq_distance.hpp"

extern "C" void kmeans_assign(const float* x, const float* centroids, int n, int d, int k, int* labels,
                              double* sums, long long* counts, double* inertia) {
#pragma HLS INTERFACE m_axi port = x offset = slave bundle = gmem0 max_read_burst_length = 64 depth = 65536
#pragma HLS INTERFACE m_axi port = centroids offset = slave bundle = gmem1 depth = 262144
#pragma HLS INTERFACE m_axi port = labels offset = slave bundle = gmem1 depth = 65536
#pragma HLS INTERFACE m_axi port = sums offset = slave bundle = gmem1 depth = 262144
#pragma HLS INTERFACE m_axi port = counts offset = slave bundle = gmem1 depth = 256
#pragma HLS INTERFACE m_axi port = inertia offset = slave bundle = gmem1 depth = 1
#pragma HLS INTERFACE s_axilite port = n
#pragma HLS INTERFACE s_axilite port = d
#pragma HLS INTERFACE s_axilite port = k
#pragma HLS INTERFACE s_axilite port = return

  // Static: on a device these are fixed URAM blocks, not a stack frame.
  static float c_local[KMEANS_MAX_K][KMEANS_MAX_D];
  static double s_local[KMEANS_MAX_K][KMEANS_MAX_D];
  static long long cnt_local[KMEANS_MAX_K];
#pragma HLS BIND_STORAGE variable = c_local type = ram_2p impl = uram
#pragma HLS BIND_STORAGE variable = s_local type = ram_2p impl = uram
#pragma HLS ARRAY_PARTITION variable = c_local cyclic factor = KMEANS_KPAR dim = 1
#pragma HLS ARRAY_PARTITION variable = c_local cyclic factor = KMEANS_DPAR dim = 2

load_centroids:
  for (int kk = 0; kk < k; ++kk) {
    for (int j = 0; j < d; ++j) {
#pragma HLS PIPELINE II = 1
      c_local[kk][j] = centroids[kk * d + j];
      s_local[kk][j] = 0.0;
    }
    cnt_local[kk] = 0;
  }

  double total = 0.0;
points:
  for (int i = 0; i < n; ++i) {
    float xi[KMEANS_MAX_D];
#pragma HLS ARRAY_PARTITION variable = xi cyclic factor = KMEANS_DPAR
  read_point:
    for (int j = 0; j < d; ++j) {
#pragma HLS PIPELINE II = 1
      xi[j] = x[static_cast<long long>(i) * d + j];
    }

    float best = 0.0f;
    int arg = 0;
  centroid_groups:
    for (int k0 = 0; k0 < k; k0 += KMEANS_KPAR) {
      float dist[KMEANS_KPAR];
      int idx[KMEANS_KPAR];
#pragma HLS ARRAY_PARTITION variable = dist complete
#pragma HLS ARRAY_PARTITION variable = idx complete
      for (int p = 0; p < KMEANS_KPAR; ++p) {
#pragma HLS UNROLL
        const int kk = k0 + p;
        idx[p] = kk;
        // Padding lanes past k can never win: +inf loses every comparison.
        dist[p] = kk < k ? accel_hls::sq_distance<KMEANS_DPAR, KMEANS_MAX_D>(xi, c_local[kk], d)
                         : __builtin_huge_valf();
      }
      float group_best;
      int group_arg;
      accel_hls::argmin_tree<KMEANS_KPAR>(dist, idx, group_best, group_arg);
      // Groups arrive in increasing index order: strict < keeps ties low.
      if (k0 == 0 || group_best < best) {
        best = group_best;
        arg = group_arg;
      }
    }

    labels[i] = arg;
    total += best;
    cnt_local[arg] += 1;
  accumulate:
    for (int j = 0; j < d; ++j) {
#pragma HLS PIPELINE II = 1
#pragma HLS DEPENDENCE variable = s_local inter false
      s_local[arg][j] += xi[j];
    }
  }

write_back:
  for (int kk = 0; kk < k; ++kk) {
    for (int j = 0; j < d; ++j) {
#pragma HLS PIPELINE II = 1
      sums[kk * d + j] = s_local[kk][j];
    }
    counts[kk] = cnt_local[kk];
  }
  inertia[0] = total;
}
