#include "kernel_tile.hpp"


#include <algorithm>
#include <cmath>

#include "csr_kernel_rows.hpp"

namespace accel::cpu {

template <class T>
void kernel_tile(KernelType type, const T* dots, std::int64_t qa, std::int64_t tb, const double* su,
                 const double* sv, double gamma, double coef0, int degree, float* out, std::int64_t ld) {
  for (std::int64_t a = 0; a < qa; ++a) {
    const T* d = dots + a * tb;
    float* o = out + a * ld;
    switch (type) {
      case KernelType::Linear:
        for (std::int64_t b = 0; b < tb; ++b) o[b] = static_cast<float>(d[b]);
        break;
      case KernelType::Rbf: {
        const double s = su[a];
#pragma omp simd
        for (std::int64_t b = 0; b < tb; ++b)
          o[b] = static_cast<float>(std::exp(-gamma * std::max(0.0, s + sv[b] - 2.0 * double(d[b]))));
        break;
      }
      case KernelType::Sigmoid:
#pragma omp simd
        for (std::int64_t b = 0; b < tb; ++b) o[b] = static_cast<float>(std::tanh(gamma * double(d[b]) + coef0));
        break;
      case KernelType::Polynomial:
        for (std::int64_t b = 0; b < tb; ++b)
          o[b] = static_cast<float>(kernel_value(type, d[b], 0, 0, gamma, coef0, degree));
        break;
    }
  }
}

template void kernel_tile<float>(KernelType, const float*, std::int64_t, std::int64_t, const double*, const double*,
                                 double, double, int, float*, std::int64_t);
template void kernel_tile<double>(KernelType, const double*, std::int64_t, std::int64_t, const double*,
                                  const double*, double, double, int, float*, std::int64_t);

}  // namespace accel::cpu
