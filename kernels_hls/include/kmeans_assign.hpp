// kmeans_assign for FPGAs (Vitis HLS, C++14). The same source runs natively
// in the fpga-emu device and is synthesised by scripts/build_bitstreams.sh.
#ifndef ACCEL_HLS_KMEANS_ASSIGN_HPP
#define ACCEL_HLS_KMEANS_ASSIGN_HPP

// On-chip capacity: centroids (float) and partial sums (double) live in
// URAM, K*D*12 bytes = 3 MiB at these bounds, well inside an Alveo U250.
#define KMEANS_MAX_K 256
#define KMEANS_MAX_D 1024
// Centroids compared per step; also the width of the argmin tree.
#define KMEANS_KPAR 8
// Lanes of the distance adder tree over dimensions.
#define KMEANS_DPAR 16

extern "C" void kmeans_assign(const float* x, const float* centroids, int n, int d, int k, int* labels,
                              double* sums, long long* counts, double* inertia);

#endif
