#include "accel/kernel_buffers.hpp"

#include <limits>

#include "accel/error.hpp"

namespace accel {
namespace {

// count * each, or a DeviceError when count is negative or the product overflows.
std::size_t bytes_of(const char* kernel, const char* what, std::int64_t count, std::size_t each) {
  if (count < 0) throw DeviceError(std::string(kernel) + ": " + what + " = " + std::to_string(count) + " < 0");
  const auto c = static_cast<unsigned long long>(count);
  if (c > std::numeric_limits<std::size_t>::max() / each)
    throw DeviceError(std::string(kernel) + ": " + what + " = " + std::to_string(count) + " overflows a buffer size");
  return static_cast<std::size_t>(c) * each;
}

std::int64_t product(const char* kernel, const char* what, std::int64_t a, std::int64_t b) {
  if (a < 0 || b < 0) throw DeviceError(std::string(kernel) + ": negative " + what);
  if (a != 0 && b > std::numeric_limits<std::int64_t>::max() / a)
    throw DeviceError(std::string(kernel) + ": " + what + " overflows");
  return a * b;
}

std::vector<BufferArg> args_of(const KMeansAssignArgs& a) {
  const char* k = "kmeans_assign";
  const std::int64_t nd = product(k, "n x d", a.n, a.d), kd = product(k, "k x d", a.k, a.d);
  std::vector<BufferArg> v = {{"x", a.x, bytes_of(k, "n x d", nd, 4)},
                              {"centroids", a.centroids, bytes_of(k, "k x d", kd, 4)},
                              {"labels", a.labels, bytes_of(k, "n", a.n, 4)},
                              {"sums", a.sums, bytes_of(k, "k x d", kd, 8)},
                              {"counts", a.counts, bytes_of(k, "k", a.k, 8)},
                              {"inertia", a.inertia, 8}};
  if (a.state) v.push_back({"state", a.state, 0});  // its size is the device's to check: only it knows the layout
  return v;
}

std::vector<BufferArg> args_of(const CsrKernelRowsArgs& a) {
  const char* k = "csr_kernel_rows";
  std::vector<BufferArg> v = {{"row_ptr", a.row_ptr, bytes_of(k, "n + 1", a.n < 0 ? a.n : a.n + 1, 8)},
                              {"col_idx", a.col_idx, bytes_of(k, "nnz", a.nnz, 4)},
                              {"values", a.values, bytes_of(k, "nnz", a.nnz, 4)},
                              {"queries", a.queries, bytes_of(k, "q", a.q, 4)},
                              {"active", a.active, bytes_of(k, "m", a.m, 4)},
                              {"sq_norms", a.sq_norms, bytes_of(k, "n", a.n, 8)},
                              {"out", a.out, bytes_of(k, "q x m", product(k, "q x m", a.q, a.m), 4)}};
  return v;
}

std::vector<BufferArg> args_of(const TopKHistogramArgs& a) {
  const char* k = "topk_histogram";
  std::vector<BufferArg> v = {{"data", a.data, bytes_of(k, "n", a.n, 4)},
                              {"hist", a.hist, bytes_of(k, "bins", a.bins, 8)},
                              {"moments", a.moments, 24},
                              {"outside", a.outside, 24}};
  if (a.candidates) {
    v.push_back({"candidates", a.candidates, bytes_of(k, "capacity", a.capacity, 8)});
    v.push_back({"candidate_count", a.candidate_count, 8});
    if (a.candidate_values) v.push_back({"candidate_values", a.candidate_values, bytes_of(k, "capacity", a.capacity, 4)});
  }
  return v;
}

}  // namespace

std::vector<BufferArg> buffer_args(const KernelArgs& args) {
  return std::visit([](const auto& a) { return args_of(a); }, args);
}

void check_buffers(const std::string& device, const KernelArgs& args, const std::function<bool(const Buffer&)>& mine) {
  const std::string where = device + " " + to_string(kernel_of(args));
  for (const BufferArg& b : buffer_args(args)) {
    if (b.buffer == nullptr) throw DeviceError(where + ": buffer '" + b.name + "' is missing");
    if (!mine(*b.buffer)) throw DeviceError(where + ": buffer '" + b.name + "' was not allocated on " + device);
    if (b.buffer->size() < b.bytes)
      throw DeviceError(where + ": buffer '" + b.name + "' holds " + std::to_string(b.buffer->size()) +
                        " bytes, needs " + std::to_string(b.bytes));
  }
}

std::string exceeds(const KernelArgs& shape, const KernelLimits& l) {
  const auto* a = std::get_if<KMeansAssignArgs>(&shape);
  if (a == nullptr || ((l.kmeans_k == 0 || a->k <= l.kmeans_k) && (l.kmeans_d == 0 || a->d <= l.kmeans_d))) return {};
  return "kmeans_assign with k=" + std::to_string(a->k) + ", d=" + std::to_string(a->d) + " exceeds " + describe(l);
}

std::string describe(const KernelLimits& l) {
  if (l.kmeans_k == 0 && l.kmeans_d == 0) return {};
  std::string out = "kmeans_assign:";
  if (l.kmeans_k) out += " k <= " + std::to_string(l.kmeans_k);
  if (l.kmeans_k && l.kmeans_d) out += ",";
  if (l.kmeans_d) out += " d <= " + std::to_string(l.kmeans_d);
  return out;
}

}  // namespace accel
