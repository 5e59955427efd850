// The one codec of what accel puts on the network or on disk: the
// engine's and the workloads' messages, snapshots and checkpoints, and the
// transport's frames (accel/transport/wire.hpp). Fixed-size values are
// little-endian whatever the host's byte order; arrays are length-prefixed.
// Every read is bounded by what the caller allows and by what the payload
// holds: a short or oversized payload throws InputError (a network error
// is bad input).
#pragma once

#include <algorithm>
#include <bit>
#include <cstdint>
#include <cstring>
#include <span>
#include <string>
#include <type_traits>
#include <vector>

#include "accel/error.hpp"

namespace accel {

using Bytes = std::vector<std::byte>;

namespace le {

// A number (or enum) at p, little-endian.
template <class T>
void store(std::byte* p, T v) {
  static_assert(std::is_arithmetic_v<T> || std::is_enum_v<T> || std::is_same_v<T, std::byte>);
  std::memcpy(p, &v, sizeof v);
  if constexpr (std::endian::native == std::endian::big) std::reverse(p, p + sizeof v);
}

template <class T>
T load(const std::byte* p) {
  static_assert(std::is_arithmetic_v<T> || std::is_enum_v<T> || std::is_same_v<T, std::byte>);
  std::byte b[sizeof(T)];
  std::memcpy(b, p, sizeof b);
  if constexpr (std::endian::native == std::endian::big) std::reverse(b, b + sizeof b);
  T v;
  std::memcpy(&v, b, sizeof v);
  return v;
}

}  // namespace le

class Out {
 public:
  template <class T>
  void put(T v) {
    b.resize(b.size() + sizeof v);
    le::store(b.data() + b.size() - sizeof v, v);
  }
  template <class T>
  void array(std::span<const T> v) {
    put<std::uint64_t>(v.size());
    if constexpr (sizeof(T) == 1 || std::endian::native == std::endian::little) {
      const auto* p = reinterpret_cast<const std::byte*>(v.data());
      grow(v.size() * sizeof(T));
      b.insert(b.end(), p, p + v.size() * sizeof(T));
    } else {
      for (const T& x : v) put(x);
    }
  }
  template <class T>
  void array(const std::vector<T>& v) {
    array(std::span<const T>(v));
  }
  void bytes(std::span<const std::byte> v) { array(v); }
  void text(const std::string& s) { bytes(std::as_bytes(std::span(s))); }
  Bytes b;

 private:
  // Before n more bytes: where they outgrow the buffer by more than its
  // doubling, a vector allocates exactly what they need, and the first
  // small field after a large array copies the whole payload again. Some
  // slack after them (up to 4 KiB: the fields that follow are tens of
  // bytes) avoids that second copy.
  void grow(std::size_t n) {
    const std::size_t slack = std::min<std::size_t>(n, 4096);
    if (b.size() + n > b.capacity()) b.reserve(std::max(2 * b.capacity(), b.size() + n + slack));
  }
};

class In {
 public:
  explicit In(std::span<const std::byte> s) : s_(s) {}
  template <class T>
  T get() {
    return le::load<T>(take(sizeof(T)));
  }
  template <class T>
  std::vector<T> array(std::uint64_t max) {
    const auto n = get<std::uint64_t>();
    if (n > max) throw InputError("message array of " + std::to_string(n) + " exceeds " + std::to_string(max));
    // Checked against the bytes that are there before allocating: a peer's
    // claim of a 1 GiB array in a short message costs nothing.
    if (n > left() / sizeof(T)) throw InputError("message payload truncated");
    if constexpr (sizeof(T) == 1) {
      // Built from the bytes, not zero-filled first: the large arrays are
      // byte arrays (a contribution's partial sums, a sparse step's pairs:
      // every round, every member).
      const auto* p = reinterpret_cast<const T*>(take(n));
      return std::vector<T>(p, p + n);
    } else {
      std::vector<T> v(n);
      if constexpr (std::endian::native == std::endian::little) {
        if (n) std::memcpy(v.data(), take(n * sizeof(T)), n * sizeof(T));  // the bytes may be unaligned for T
      } else {
        for (auto& x : v) x = get<T>();
      }
      return v;
    }
  }
  // An array of exactly n values.
  template <class T>
  std::vector<T> exactly(std::uint64_t n, const char* what) {
    auto v = array<T>(n);
    if (v.size() != n) throw InputError(std::string("message ") + what + " has " + std::to_string(v.size()) +
                                        " values, expected " + std::to_string(n));
    return v;
  }
  Bytes bytes(std::uint64_t max) { return array<std::byte>(max); }
  std::string text(std::uint64_t max) {
    const auto v = bytes(max);
    return std::string(reinterpret_cast<const char*>(v.data()), v.size());
  }
  std::size_t left() const { return s_.size() - pos_; }
  void end() const {
    if (pos_ != s_.size()) throw InputError("message has " + std::to_string(s_.size() - pos_) + " trailing bytes");
  }

 private:
  const std::byte* take(std::size_t n) {
    if (s_.size() - pos_ < n) throw InputError("message payload truncated");
    const auto* p = s_.data() + pos_;
    pos_ += n;
    return p;
  }
  std::span<const std::byte> s_;
  std::size_t pos_ = 0;
};

}  // namespace accel
