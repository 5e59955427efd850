#include "accel/host_buffer.hpp"

#include "accel/work_queue.hpp"

#include <algorithm>
#include <new>
#include <stdexcept>
#include <string>

namespace accel {

HostBuffer::HostBuffer(std::size_t bytes, bool shared_with_host, const Device* owner)
    : bytes_(bytes), shared_(shared_with_host), owner_(owner) {
  const std::size_t rounded = (bytes + 63) / 64 * 64;
  data_ = std::aligned_alloc(64, rounded == 0 ? 64 : rounded);
  if (data_ == nullptr) throw std::bad_alloc();
  owned_.reset(data_);
}

HostBuffer::HostBuffer(void* external, std::size_t bytes, const Device* owner)
    : data_(external), bytes_(bytes), shared_(true), owner_(owner) {}

static void check_range(std::size_t bytes, std::size_t offset, std::size_t size) {
  if (offset > size || bytes > size - offset)
    throw std::out_of_range("buffer access [" + std::to_string(offset) + ", +" + std::to_string(bytes) +
                            ") beyond its " + std::to_string(size) + " bytes");
}

void HostBuffer::write(const void* src, std::size_t bytes, std::size_t offset) {
  check_range(bytes, offset, bytes_);
  changed_from(offset);
  if (bytes) std::memcpy(static_cast<char*>(data_) + offset, src, bytes);
}

std::shared_ptr<const void> HostBuffer::derived() const {
  std::lock_guard lock(derived_mu_);
  return derived_;
}

std::size_t HostBuffer::unchanged() const {
  std::lock_guard lock(derived_mu_);
  return unchanged_;
}

void HostBuffer::keep_derived(std::shared_ptr<const void> d) {
  std::lock_guard lock(derived_mu_);
  derived_ = std::move(d);
  unchanged_ = SIZE_MAX;
}

void HostBuffer::changed_from(std::size_t offset) {
  std::lock_guard lock(derived_mu_);
  unchanged_ = std::min(unchanged_, offset);
}

void HostBuffer::read(void* dst, std::size_t bytes, std::size_t offset) const {
  check_range(bytes, offset, bytes_);
  if (bytes) std::memcpy(dst, static_cast<const char*>(data_) + offset, bytes);
}

// One copy thread for every host-memory device: a copy engine's part.
static WorkQueue& host_copies() {
  static WorkQueue q;
  return q;
}

Event HostBuffer::write_async(const void* src, std::size_t bytes, std::size_t offset) {
  return write_on(host_copies(), *this, src, bytes, offset);
}

Event HostBuffer::read_async(void* dst, std::size_t bytes, std::size_t offset) const {
  return read_on(host_copies(), *this, dst, bytes, offset);
}

}  // namespace accel
