// The transport's wire formats read and write their fields through the one
// codec's little-endian access (accel/codec.hpp), so a message has the same
// bytes whatever the host's byte order.
#pragma once

#include <cstddef>
#include <span>
#include <vector>

#include "accel/codec.hpp"

namespace accel::transport::wire {

template <class T>
void put(std::vector<std::byte>& out, T v) {
  out.resize(out.size() + sizeof v);
  le::store(out.data() + out.size() - sizeof v, v);
}

// Reads a T at `at`; the caller has checked the bounds.
template <class T>
T get(std::span<const std::byte> in, std::size_t at) {
  return le::load<T>(in.data() + at);
}

}  // namespace accel::transport::wire
