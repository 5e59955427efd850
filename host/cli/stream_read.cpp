#include "stream_read.hpp"

#include <omp.h>

#include <chrono>
#include <cstring>

namespace accel::cli {

double stream_read_seconds(const float* x, std::size_t n) {
  typedef float v8f __attribute__((vector_size(32)));
  constexpr std::size_t kStep = 32;  // floats per iteration: four vectors
  volatile float sink = 0;
  const auto t0 = std::chrono::steady_clock::now();
  float s = 0;
#pragma omp parallel reduction(+ : s)
  {
    const std::size_t t = omp_get_thread_num(), nt = omp_get_num_threads();
    const std::size_t steps = n / kStep, lo = steps * t / nt * kStep, hi = steps * (t + 1) / nt * kStep;
    v8f a0 = v8f{}, a1 = v8f{}, a2 = v8f{}, a3 = v8f{};
    for (std::size_t i = lo; i < hi; i += kStep) {
      v8f v;
      std::memcpy(&v, x + i, sizeof v);
      a0 += v;
      std::memcpy(&v, x + i + 8, sizeof v);
      a1 += v;
      std::memcpy(&v, x + i + 16, sizeof v);
      a2 += v;
      std::memcpy(&v, x + i + 24, sizeof v);
      a3 += v;
    }
    const v8f a = (a0 + a1) + (a2 + a3);
    for (int q = 0; q < 8; ++q) s += a[q];
    if (t == nt - 1)
      for (std::size_t i = steps * kStep; i < n; ++i) s += x[i];
  }
  sink = s;
  (void)sink;
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

}  // namespace accel::cli
