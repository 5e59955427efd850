// L1 primitive: squared Euclidean distance of two on-chip vectors, P lanes
// of multiply-add in parallel then an adder tree, so the loop pipelines at
// II=1 over d/P steps despite the float adder's latency.
#ifndef ACCEL_HLS_L1_SQ_DISTANCE_HPP
#define ACCEL_HLS_L1_SQ_DISTANCE_HPP

namespace accel_hls {

template <int P, int MAXD>
float sq_distance(const float a[MAXD], const float b[MAXD], int d) {
#pragma HLS INLINE
  float lane[P];
#pragma HLS ARRAY_PARTITION variable = lane complete
  for (int p = 0; p < P; ++p) {
#pragma HLS UNROLL
    lane[p] = 0.0f;
  }
steps:
  for (int j0 = 0; j0 < MAXD; j0 += P) {
#pragma HLS PIPELINE II = 1
    if (j0 >= d) break;
    for (int p = 0; p < P; ++p) {
#pragma HLS UNROLL
      const int j = j0 + p;
      const float t = j < d ? a[j] - b[j] : 0.0f;
      lane[p] += t * t;
    }
  }
  for (int width = P / 2; width >= 1; width /= 2) {
#pragma HLS UNROLL
    for (int p = 0; p < width; ++p) {
#pragma HLS UNROLL
      lane[p] = lane[2 * p] + lane[2 * p + 1];
    }
  }
  return lane[0];
}

}  // namespace accel_hls

#endif
