// The CPU backend: always present. Memory is the host's, so buffers are
// shared (host_ptr() works) and wrap_host() avoids copying the input.
#include <hwloc.h>
#include <unistd.h>
#include <omp.h>

#include <variant>

#include "accel/registry.hpp"
#include "accel/error.hpp"
#include "accel/host_buffer.hpp"
#include "accel/kernel_buffers.hpp"
#include "accel/work_queue.hpp"
#include "csr_kernel_rows.hpp"
#include "kmeans_assign.hpp"
#include "topk_histogram.hpp"

namespace accel {
namespace {

std::string simd_level() {
  __builtin_cpu_init();
  if (__builtin_cpu_supports("avx512f")) return "avx512";
  if (__builtin_cpu_supports("avx2")) return "avx2";
  if (__builtin_cpu_supports("avx")) return "avx";
  if (__builtin_cpu_supports("sse4.2")) return "sse4.2";
  return "baseline";
}

DeviceInfo probe() {
  DeviceInfo info;
  info.name = "cpu";
  info.family = "cpu";
  info.type = "cpu";
  info.auto_priority = 10;
  info.kernels = {KernelId::KMeansAssign, KernelId::TopKHistogram, KernelId::CsrKernelRows};
  hwloc_topology_t topo;
  int cores = 0, pus = 0;
  std::string model;
  if (hwloc_topology_init(&topo) == 0 && hwloc_topology_load(topo) == 0) {
    cores = hwloc_get_nbobjs_by_type(topo, HWLOC_OBJ_CORE);
    pus = hwloc_get_nbobjs_by_type(topo, HWLOC_OBJ_PU);
    if (hwloc_obj_t pkg = hwloc_get_obj_by_type(topo, HWLOC_OBJ_PACKAGE, 0))
      if (const char* m = hwloc_obj_get_info_by_name(pkg, "CPUModel")) model = m;
    hwloc_topology_destroy(topo);
  }
  // The kernel's view of RAM: hwloc sums NUMA nodes, which some VMs report
  // only partly.
  info.memory_bytes = static_cast<std::size_t>(sysconf(_SC_PHYS_PAGES)) * static_cast<std::size_t>(sysconf(_SC_PAGESIZE));
  info.compute_units = omp_get_max_threads();
  info.description = (model.empty() ? std::string("host CPU") : model) + ", " + std::to_string(cores) +
                     " cores / " + std::to_string(pus) + " threads, " + simd_level() + ", OpenMP " +
                     std::to_string(info.compute_units) + " threads";
  return info;
}

class CpuDevice final : public Device {
 public:
  CpuDevice() : info_(probe()) {}
  const DeviceInfo& info() const override { return info_; }
  std::unique_ptr<Buffer> allocate(std::size_t bytes) override {
    return std::make_unique<HostBuffer>(bytes, /*shared_with_host=*/true, this);
  }
  std::unique_ptr<Buffer> wrap_host(void* ptr, std::size_t bytes) override {
    return std::make_unique<HostBuffer>(ptr, bytes, this);
  }
  Event enqueue(const KernelArgs& args, std::vector<Event> after) override {
    return queue_.submit([this, args] { execute(args); }, std::move(after));
  }
  void run_now(const KernelArgs& args) override {
    queue_.run_here([this, &args] { execute(args); });
  }
  // kmeans_assign keeps its pruning bounds (cpu::KMeansBoundsLayout); a
  // zero header makes the first launch assign every row.
  std::unique_ptr<Buffer> create_state(const KernelArgs& shape) override {
    const auto* a = std::get_if<KMeansAssignArgs>(&shape);
    if (a == nullptr || a->n < 1 || a->d < 1 || a->k < 1) return nullptr;
    auto state = allocate(cpu::kmeans_bounds_layout(a->n, a->d, a->k).bytes);
    const std::int64_t zero[8] = {};
    state->write(zero, sizeof zero);
    return state;
  }

 private:
  void execute(const KernelArgs& args) const {
    check_buffers(info_.name, args, [this](const Buffer& b) { return host_buffer_of(this, b); });
    std::visit([](const auto& a) { run(a); }, args);
  }
  template <class Args>
  static void run(const Args& a) {
    throw_unsupported("cpu", a);
  }
  static void run(const KMeansAssignArgs& a) {
    if (a.state) {
      if (a.state->size() < cpu::kmeans_bounds_layout(a.n, a.d, a.k).bytes)
        throw DeviceError("cpu kmeans_assign: buffer 'state' was not made by create_state for n=" +
                          std::to_string(a.n) + ", d=" + std::to_string(a.d) + ", k=" + std::to_string(a.k));
      return cpu::kmeans_assign_bounds(device_ptr<const float>(a.x), a.n, a.d, device_ptr<const float>(a.centroids),
                                       a.k, device_ptr<std::int32_t>(a.labels), device_ptr<double>(a.sums),
                                       device_ptr<std::int64_t>(a.counts), device_ptr<double>(a.inertia),
                                       device_ptr<std::byte>(a.state));
    }
    cpu::kmeans_assign(device_ptr<const float>(a.x), a.n, a.d, device_ptr<const float>(a.centroids), a.k,
                       device_ptr<std::int32_t>(a.labels), device_ptr<double>(a.sums),
                       device_ptr<std::int64_t>(a.counts), device_ptr<double>(a.inertia));
  }
  static void run(const TopKHistogramArgs& a) {
    if (auto why = check_histogram_args(a, 0); !why.empty()) throw DeviceError("cpu topk_histogram: " + why);
    cpu::topk_histogram(device_ptr<const float>(a.data), a.n, a.lo, a.hi, a.shift, a.bins,
                        device_ptr<std::uint64_t>(a.hist), device_ptr<double>(a.moments),
                        device_ptr<std::uint64_t>(a.outside), device_ptr<std::int64_t>(a.candidates),
                        device_ptr<std::uint64_t>(a.candidate_count), a.capacity, a.want_moments,
                        device_ptr<float>(a.candidate_values));
  }
  static void run(const CsrKernelRowsArgs& a) {
    const cpu::CsrView x{device_ptr<const std::int64_t>(a.row_ptr), device_ptr<const std::int32_t>(a.col_idx),
                         device_ptr<const float>(a.values), device_ptr<const double>(a.sq_norms), a.n, a.cols,
                         dynamic_cast<HostBuffer*>(a.values)};
    cpu::csr_kernel_rows(x, device_ptr<const std::int32_t>(a.queries), a.q, device_ptr<const std::int32_t>(a.active),
                         a.m, a.type, a.gamma, a.coef0, a.degree, device_ptr<float>(a.out), cpu::CsrDotPath::Auto,
                         a.exact);
  }
  DeviceInfo info_;
  WorkQueue queue_;
};

class CpuBackend final : public Backend {
 public:
  std::string name() const override { return "cpu"; }
  std::vector<std::unique_ptr<Device>> discover() override {
    std::vector<std::unique_ptr<Device>> out;
    out.push_back(std::make_unique<CpuDevice>());
    return out;
  }
};

}  // namespace

ACCEL_REGISTER_BACKEND(10, CpuBackend, "cpu", false);

}  // namespace accel
