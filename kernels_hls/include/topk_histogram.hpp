// topk_histogram for FPGAs (Vitis HLS, C++14): one streamed pass over the
// data, histogram of |x| bits in BRAM, moments in the same pass.
#ifndef ACCEL_HLS_TOPK_HISTOGRAM_HPP
#define ACCEL_HLS_TOPK_HISTOGRAM_HPP

// BRAM histogram: 64 Ki bins of 32-bit counters (256 KiB, 64 BRAM36 pairs).
#define TOPK_MAX_BINS 65536
// Copies of the histogram updated round-robin: consecutive values that hit
// one bin land in different copies, so the read-modify-write pipelines at II=1.
#define TOPK_COPIES 4

// collect != 0: indices of finite values with bits(|x|) >= lo go to
// candidates (up to capacity, in order), their total to candidate_count[0];
// collect_values != 0: their values to candidate_values, in the same order.
extern "C" void topk_histogram(const float* data, long long n, unsigned lo, unsigned hi, int shift, int bins,
                               unsigned long long* hist, double* moments, unsigned long long* outside, int collect,
                               long long* candidates, unsigned long long* candidate_count, long long capacity,
                               int collect_values, float* candidate_values);

#endif
