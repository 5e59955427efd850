#include "kernel_tile.hpp"


#include <algorithm>
#include <cmath>

#include "csr_kernel_rows.hpp"

namespace accel::cpu {
namespace {

// The kernel function of a value must not depend on where the value sits
// in a tile: the vector exp/tanh (libmvec) and the scalar one of a loop's
// remainder can differ in the last bit, which made the same K(x_q, x_t)
// differ between launches of different widths (a distributed SVM member's
// rows against the coordinator's, single-node against both). So every
// value goes through the vector loop: in blocks of kLanes, the last one
// padded.
constexpr std::int64_t kLanes = 16;

template <class F>
void by_blocks(std::int64_t tb, float* o, F&& f) {
  std::int64_t b0 = 0;
  for (; b0 + kLanes <= tb; b0 += kLanes) f(b0, o + b0);
  if (b0 < tb) {
    float pad[kLanes];
    f(b0, pad);  // reads past tb are clamped by the caller's index function
    std::copy(pad, pad + (tb - b0), o + b0);
  }
}

}  // namespace

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
        by_blocks(tb, o, [&](std::int64_t b0, float* dst) {
          double x[kLanes];
          for (std::int64_t l = 0; l < kLanes; ++l) {
            const std::int64_t b = std::min(b0 + l, tb - 1);
            x[l] = -gamma * std::max(0.0, s + sv[b] - 2.0 * double(d[b]));
          }
#pragma omp simd
          for (std::int64_t l = 0; l < kLanes; ++l) dst[l] = static_cast<float>(std::exp(x[l]));
        });
        break;
      }
      case KernelType::Sigmoid:
        by_blocks(tb, o, [&](std::int64_t b0, float* dst) {
          double x[kLanes];
          for (std::int64_t l = 0; l < kLanes; ++l) x[l] = gamma * double(d[std::min(b0 + l, tb - 1)]) + coef0;
#pragma omp simd
          for (std::int64_t l = 0; l < kLanes; ++l) dst[l] = static_cast<float>(std::tanh(x[l]));
        });
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
