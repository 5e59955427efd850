// L1 primitive: argmin over N candidates as a balanced comparison tree
// (log2 N levels of comparators instead of an N-deep chain). Ties go to the
// lower index, the rule every backend follows.
#ifndef ACCEL_HLS_L1_ARGMIN_TREE_HPP
#define ACCEL_HLS_L1_ARGMIN_TREE_HPP

namespace accel_hls {

template <int N>
void argmin_tree(const float dist[N], const int idx[N], float& best, int& arg) {
#pragma HLS INLINE
  float d[N];
  int a[N];
#pragma HLS ARRAY_PARTITION variable = d complete
#pragma HLS ARRAY_PARTITION variable = a complete
  for (int i = 0; i < N; ++i) {
#pragma HLS UNROLL
    d[i] = dist[i];
    a[i] = idx[i];
  }
  for (int width = N / 2; width >= 1; width /= 2) {
#pragma HLS UNROLL
    for (int i = 0; i < width; ++i) {
#pragma HLS UNROLL
      // The left operand always holds the lower index.
      const bool right = d[2 * i + 1] < d[2 * i];
      d[i] = right ? d[2 * i + 1] : d[2 * i];
      a[i] = right ? a[2 * i + 1] : a[2 * i];
    }
  }
  best = d[0];
  arg = a[0];
}

}  // namespace accel_hls

#endif
