#pragma once

#include <cstdint>

#include "accel/kernels.hpp"

namespace accel::cpu {

// The kernel function over a tile of dot products: for a < qa, b < tb,
// out[a*ld + b] = K(dots[a*tb + b]) with the norms su[a] (queries) and sv[b]
// (targets) for RBF, in double from the products. Built with
// -ffast-math, the one way glibc's vector exp and tanh (libmvec) are used:
// inputs are finite (the readers refuse NaN and Inf). Serial: callers run it
// per tile inside their parallel region.
template <class T>  // float or double dot products
void kernel_tile(KernelType type, const T* dots, std::int64_t qa, std::int64_t tb, const double* su,
                 const double* sv, double gamma, double coef0, int degree, float* out, std::int64_t ld);

}  // namespace accel::cpu
