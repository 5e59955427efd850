// Buffers in host memory: the CPU device's memory (shared with the host) and
// the backing store of emulated devices (which hide it behind write/read).
#pragma once

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <mutex>

#include "accel/device.hpp"

namespace accel {

class HostBuffer final : public Buffer {
 public:
  // Owns `bytes` of 64-byte aligned memory. `owner`: the device that made
  // it, which alone may launch on it (check_buffers).
  HostBuffer(std::size_t bytes, bool shared_with_host, const Device* owner = nullptr);
  // Borrows memory the caller keeps alive (no copy).
  HostBuffer(void* external, std::size_t bytes, const Device* owner = nullptr);
  const Device* owner() const { return owner_; }

  std::size_t size() const override { return bytes_; }
  void write(const void* src, std::size_t bytes, std::size_t offset = 0) override;
  void read(void* dst, std::size_t bytes, std::size_t offset = 0) const override;
  // On the host's copy thread (one per process), beside the launches.
  Event write_async(const void* src, std::size_t bytes, std::size_t offset = 0) override;
  Event read_async(void* dst, std::size_t bytes, std::size_t offset = 0) const override;
  void* host_ptr() override { return shared_ ? data_ : nullptr; }

  // The driver's own view, whether or not the host may see it.
  void* data() { return data_; }

  // What a driver derives from the contents once and keeps while the buffer
  // lives (the cpu's dense copy of a CSR matrix's frequent columns), and
  // how many bytes from the start have not changed since it was kept:
  // write() and changed_from() lower that, and a driver derives again what
  // depends on the rest. Borrowed memory is not watched otherwise: like any
  // buffer in use by a launch, it must not change while launches read it.
  std::shared_ptr<const void> derived() const;
  std::size_t unchanged() const;
  void keep_derived(std::shared_ptr<const void> d);
  void changed_from(std::size_t offset) override;

 private:
  mutable std::mutex derived_mu_;
  std::shared_ptr<const void> derived_;
  std::size_t unchanged_ = SIZE_MAX;
  struct Free { void operator()(void* p) const { std::free(p); } };
  std::unique_ptr<void, Free> owned_;
  void* data_ = nullptr;
  std::size_t bytes_ = 0;
  bool shared_ = true;
  const Device* owner_ = nullptr;
};

// Whether `b` is a host buffer `device` made: the owner test of
// check_buffers (kernel_buffers.hpp) for the host-memory backends.
inline bool host_buffer_of(const Device* device, const Buffer& b) {
  auto* hb = dynamic_cast<const HostBuffer*>(&b);
  return hb != nullptr && hb->owner() == device;
}

// The driver-side pointer of a buffer the host runtime allocated on a host
// memory device; throws DeviceError for a buffer from another device.
template <class T>
T* device_ptr(Buffer* b) {
  if (b == nullptr) return nullptr;
  auto* hb = dynamic_cast<HostBuffer*>(b);
  if (hb == nullptr) throw std::invalid_argument("buffer belongs to another device");
  return static_cast<T*>(hb->data());
}

}  // namespace accel
