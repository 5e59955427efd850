// L1 primitive: IEEE-754 single-precision bit views without type punning
// through pointers (a union-free memcpy that HLS maps to wires).
#ifndef ACCEL_HLS_L1_FLOAT_BITS_HPP
#define ACCEL_HLS_L1_FLOAT_BITS_HPP

#include <cstring>

namespace accel_hls {

static const unsigned kInfBits = 0x7f800000u;

// Bits of |v|: for non-negative floats the integer order is the float order.
inline unsigned abs_bits(float v) {
#pragma HLS INLINE
  unsigned u;
  std::memcpy(&u, &v, sizeof u);
  return u & 0x7fffffffu;
}

inline float from_bits(unsigned u) {
#pragma HLS INLINE
  float v;
  std::memcpy(&v, &u, sizeof v);
  return v;
}

}  // namespace accel_hls

#endif
