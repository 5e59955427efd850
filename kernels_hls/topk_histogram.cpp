// L2 kernel topk_histogram (contract in host/include/accel/kernels.hpp).
// Values stream in through m_axi once; each is binned by the bits of |x|
// into one of TOPK_COPIES histogram copies (round robin, to break the
// read-modify-write dependency on a repeated bin), and summed into the
// moments. The copies are merged while writing back.
#include "topk_histogram.hpp"

#include "l1/float_bits.hpp"

extern "C" void topk_histogram(const float* data, long long n, unsigned lo, unsigned hi, int shift, int bins,
                               unsigned long long* hist, double* moments, unsigned long long* outside, int collect,
                               long long* candidates, unsigned long long* candidate_count, long long capacity,
                               int collect_values, float* candidate_values) {
#pragma HLS INTERFACE m_axi port = data offset = slave bundle = gmem0 max_read_burst_length = 256 depth = 1048576
#pragma HLS INTERFACE m_axi port = hist offset = slave bundle = gmem1 depth = 65536
#pragma HLS INTERFACE m_axi port = moments offset = slave bundle = gmem1 depth = 3
#pragma HLS INTERFACE m_axi port = outside offset = slave bundle = gmem1 depth = 3
#pragma HLS INTERFACE m_axi port = candidates offset = slave bundle = gmem2 depth = 65536
#pragma HLS INTERFACE m_axi port = candidate_count offset = slave bundle = gmem1 depth = 1
#pragma HLS INTERFACE m_axi port = candidate_values offset = slave bundle = gmem3 depth = 65536
#pragma HLS INTERFACE s_axilite port = collect_values
#pragma HLS INTERFACE s_axilite port = collect
#pragma HLS INTERFACE s_axilite port = capacity
#pragma HLS INTERFACE s_axilite port = n
#pragma HLS INTERFACE s_axilite port = lo
#pragma HLS INTERFACE s_axilite port = hi
#pragma HLS INTERFACE s_axilite port = shift
#pragma HLS INTERFACE s_axilite port = bins
#pragma HLS INTERFACE s_axilite port = return

  static unsigned h[TOPK_COPIES][TOPK_MAX_BINS];
#pragma HLS ARRAY_PARTITION variable = h complete dim = 1
#pragma HLS BIND_STORAGE variable = h type = ram_2p impl = bram

clear:
  for (int b = 0; b < bins; ++b) {
#pragma HLS PIPELINE II = 1
    for (int c = 0; c < TOPK_COPIES; ++c) {
#pragma HLS UNROLL
      h[c][b] = 0;
    }
  }

  double sum = 0.0, sumsq = 0.0;
  float maxabs = 0.0f;
  unsigned long long below = 0, above = 0, nonfinite = 0, found = 0;
stream:
  for (long long i = 0; i < n; ++i) {
#pragma HLS PIPELINE II = 1
#pragma HLS DEPENDENCE variable = h inter false
    const float v = data[i];
    const unsigned u = accel_hls::abs_bits(v);
    const int copy = static_cast<int>(i % TOPK_COPIES);
    if (u >= accel_hls::kInfBits) {
      ++nonfinite;
    } else {
      sum += v;
      sumsq += static_cast<double>(v) * v;
      const float a = accel_hls::from_bits(u);
      maxabs = a > maxabs ? a : maxabs;
      if (u < lo) {
        ++below;
      } else {
        // The upper tail is written out as it streams by (a burst writer on
        // its own bundle), so no second pass is needed to find its members.
        if (collect) {
          if (static_cast<long long>(found) < capacity) {
            candidates[found] = i;
            if (collect_values) candidate_values[found] = v;
          }
          ++found;
        }
        if (u >= hi) {
          ++above;
        } else {
          h[copy][(u - lo) >> shift] += 1;
        }
      }
    }
  }

write_back:
  for (int b = 0; b < bins; ++b) {
#pragma HLS PIPELINE II = 1
    unsigned long long total = 0;
    for (int c = 0; c < TOPK_COPIES; ++c) {
#pragma HLS UNROLL
      total += h[c][b];
    }
    hist[b] = total;
  }
  moments[0] = sum;
  moments[1] = sumsq;
  moments[2] = maxabs;
  outside[0] = below;
  outside[1] = above;
  outside[2] = nonfinite;
  if (collect) candidate_count[0] = found;
}
