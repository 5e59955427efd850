// Sixteen points a vector for the cpu k-means loops: the transposes of
// narrow rows (d = 1..4) that the wide and the masked loops share.
#pragma once

#include <cstring>

namespace accel::cpu::detail {

typedef float v16f __attribute__((vector_size(64)));

// Sixteen rows of D <= 4 floats at p (16 * D consecutive floats) into
// xs[j], element j of every row, in order: two or three two-source
// shuffles an element (lanes gathered one at a time take an insert each).
template <int D>
inline void narrow16(const float* p, v16f* xs) {
  static_assert(D >= 1 && D <= 4);
  v16f a[D];
  for (int h = 0; h < D; ++h) std::memcpy(&a[h], p + 16 * h, sizeof a[h]);
  if constexpr (D == 1) {
    xs[0] = a[0];
  } else if constexpr (D == 2) {
    xs[0] = __builtin_shufflevector(a[0], a[1], 0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30);
    xs[1] = __builtin_shufflevector(a[0], a[1], 1, 3, 5, 7, 9, 11, 13, 15, 17, 19, 21, 23, 25, 27, 29, 31);
  } else if constexpr (D == 3) {
    // Point q's element j is float 3q + j: from the first two vectors
    // while it lies there, then from the third.
    const v16f s0 = __builtin_shufflevector(a[0], a[1], 0, 3, 6, 9, 12, 15, 18, 21, 24, 27, 30, 0, 0, 0, 0, 0);
    const v16f s1 = __builtin_shufflevector(a[0], a[1], 1, 4, 7, 10, 13, 16, 19, 22, 25, 28, 31, 0, 0, 0, 0, 0);
    const v16f s2 = __builtin_shufflevector(a[0], a[1], 2, 5, 8, 11, 14, 17, 20, 23, 26, 29, 0, 0, 0, 0, 0, 0);
    xs[0] = __builtin_shufflevector(s0, a[2], 0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 17, 20, 23, 26, 29);
    xs[1] = __builtin_shufflevector(s1, a[2], 0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 18, 21, 24, 27, 30);
    xs[2] = __builtin_shufflevector(s2, a[2], 0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 16, 19, 22, 25, 28, 31);
  } else {
    // Elements 0 and 1 (t), 2 and 3 (u) of points 0-7, then of 8-15.
    const v16f t0 = __builtin_shufflevector(a[0], a[1], 0, 4, 8, 12, 16, 20, 24, 28, 1, 5, 9, 13, 17, 21, 25, 29);
    const v16f u0 = __builtin_shufflevector(a[0], a[1], 2, 6, 10, 14, 18, 22, 26, 30, 3, 7, 11, 15, 19, 23, 27, 31);
    const v16f t1 = __builtin_shufflevector(a[2], a[3], 0, 4, 8, 12, 16, 20, 24, 28, 1, 5, 9, 13, 17, 21, 25, 29);
    const v16f u1 = __builtin_shufflevector(a[2], a[3], 2, 6, 10, 14, 18, 22, 26, 30, 3, 7, 11, 15, 19, 23, 27, 31);
    xs[0] = __builtin_shufflevector(t0, t1, 0, 1, 2, 3, 4, 5, 6, 7, 16, 17, 18, 19, 20, 21, 22, 23);
    xs[1] = __builtin_shufflevector(t0, t1, 8, 9, 10, 11, 12, 13, 14, 15, 24, 25, 26, 27, 28, 29, 30, 31);
    xs[2] = __builtin_shufflevector(u0, u1, 0, 1, 2, 3, 4, 5, 6, 7, 16, 17, 18, 19, 20, 21, 22, 23);
    xs[3] = __builtin_shufflevector(u0, u1, 8, 9, 10, 11, 12, 13, 14, 15, 24, 25, 26, 27, 28, 29, 30, 31);
  }
}

}  // namespace accel::cpu::detail
