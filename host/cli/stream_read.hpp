// One streaming read of a float array, the reference the top-k benchmark
// and `accel calibrate` state their times against.
#pragma once

#include <cstddef>

namespace accel::cli {

// Reads x[0, n) once on OpenMP's threads and returns the seconds it took.
// Four independent vector sums per thread: one float sum (what `omp simd
// reduction` compiled to here) is a chain of dependent adds, and would
// measure that chain's latency instead of the memory.
double stream_read_seconds(const float* x, std::size_t n);

}  // namespace accel::cli
