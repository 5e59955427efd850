// Little-endian field access for the wire formats of the transport. Every
// format we put on the network is written and read through these, so a
// message has the same bytes whatever the host's byte order.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

namespace accel::transport::wire {

template <class T>
void put(std::vector<std::byte>& out, T v) {
  for (std::size_t i = 0; i < sizeof(T); ++i)
    out.push_back(static_cast<std::byte>((static_cast<std::uint64_t>(v) >> (8 * i)) & 0xff));
}

// Reads a T at `at`; the caller has checked the bounds.
template <class T>
T get(std::span<const std::byte> in, std::size_t at) {
  std::uint64_t v = 0;
  for (std::size_t i = 0; i < sizeof(T); ++i)
    v |= static_cast<std::uint64_t>(std::to_integer<std::uint8_t>(in[at + i])) << (8 * i);
  return static_cast<T>(v);
}

}  // namespace accel::transport::wire
