#include <algorithm>
#include <exception>

#include "accel/device.hpp"

namespace accel {

std::string to_string(KernelId id) {
  switch (id) {
    case KernelId::KMeansAssign: return "kmeans_assign";
    case KernelId::CsrKernelRows: return "csr_kernel_rows";
    case KernelId::TopKHistogram: return "topk_histogram";
  }
  return "unknown";
}

std::string check_histogram_args(const TopKHistogramArgs& a, std::int64_t max_bins) {
  if (a.n < 0) return "n < 0";
  if (a.bins < 1 || (max_bins > 0 && a.bins > max_bins))
    return "bins = " + std::to_string(a.bins) + " outside [1, " + std::to_string(max_bins) + "]";
  if (a.shift < 0 || a.shift > 31) return "shift = " + std::to_string(a.shift) + " outside [0, 31]";
  if (a.lo > a.hi || a.hi > 0x7f800000u) return "bit range [lo, hi) is not within [0, +inf)";
  if (a.hi > a.lo && static_cast<std::int64_t>((a.hi - 1 - a.lo) >> a.shift) >= a.bins)
    return "range [lo, hi) >> shift needs more than " + std::to_string(a.bins) + " bins";
  if ((a.candidates == nullptr) != (a.candidate_count == nullptr) || a.capacity < 0)
    return "candidates and candidate_count go together, with capacity >= 0";
  if (a.candidate_values != nullptr && a.candidates == nullptr) return "candidate_values need candidates";
  return {};
}

void wait_all(const std::vector<Event>& events) {
  std::exception_ptr first;
  for (const Event& e : events) try {
      e.wait();
    } catch (...) {
      if (!first) first = std::current_exception();
    }
  if (first) std::rethrow_exception(first);
}

Event Buffer::write_async(const void* src, std::size_t bytes, std::size_t offset) {
  write(src, bytes, offset);
  return {};
}

Event Buffer::read_async(void* dst, std::size_t bytes, std::size_t offset) const {
  read(dst, bytes, offset);
  return {};
}

void Buffer::read_strided(void* dst, std::size_t width, std::size_t offset, std::size_t pitch,
                          std::size_t rows) const {
  for (std::size_t r = 0; r < rows; ++r) read(static_cast<char*>(dst) + r * width, width, offset + r * pitch);
}

bool Device::supports(KernelId id) const {
  const auto& ks = info().kernels;
  return std::find(ks.begin(), ks.end(), id) != ks.end();
}

}  // namespace accel
