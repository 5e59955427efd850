// csr_kernel_rows for FPGAs (Vitis HLS, C++14). The same source runs natively
// in the fpga-emu device and is synthesised by scripts/build_bitstreams.sh.
#ifndef ACCEL_HLS_CSR_KERNEL_ROWS_HPP
#define ACCEL_HLS_CSR_KERNEL_ROWS_HPP

// Width of the on-chip dense copy of a query row (doubles in URAM: 512 KiB
// at 65536 columns). Wider matrices stay on the host's devices.
#define CSR_MAX_COLS 65536
// Multiply-adds issued per cycle along an active row (the gathers from the
// on-chip row are independent, so the partitioned buffer serves them).
#define CSR_LANES 8
// Queries served by one pass over the active rows: each streamed row is
// gathered against this many on-chip query copies, so a many-query launch
// (the batched SVM solver asks for hundreds of rows) reads the active rows
// q / CSR_QUERY_GROUP times instead of q times. 4 x 512 KiB of URAM.
#define CSR_QUERY_GROUP 4

// Kernel codes: KernelType in host/include/accel/kernels.hpp.
#define CSR_LINEAR 0
#define CSR_POLY 1
#define CSR_RBF 2
#define CSR_SIGMOID 3

extern "C" void csr_kernel_rows(const long long* row_ptr, const int* col_idx, const float* values,
                                const double* sq_norms, const int* queries, const int* active, float* out, int q,
                                int m, int cols, int type, double gamma, double coef0, int degree);

#endif
