// fpga-emu: the FPGA programming model without an FPGA. Runs the exact
// kernels_hls sources, compiled natively, with the semantics of the XRT
// driver: device memory the host cannot address (explicit write/read, like
// xrt::bo sync), one kernel invocation per launch, launches in order.
#include <climits>
#include <mutex>
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

// The HLS kernel's on-chip arrays (kernels_hls/include/kmeans_assign.hpp).
constexpr KernelLimits kLimits{KMEANS_MAX_K, KMEANS_MAX_D};

class FpgaEmuDevice final : public Device {
 public:
  FpgaEmuDevice() {
    info_.name = "fpga-emu";
    info_.family = "fpga-emu";
    info_.type = "accelerator";
    info_.on_host_cores = true;  // an emulator: named, never in all or auto
    info_.description = "kernels_hls compiled natively (emulation of an XRT device)";
    info_.memory_bytes = 0;  // host memory, no fixed card size
    info_.compute_units = 1;
    info_.kernels = {KernelId::KMeansAssign, KernelId::TopKHistogram, KernelId::CsrKernelRows};
    info_.limits = describe(kLimits);  // csr_kernel_rows' CSR_MAX_COLS is larger and checked per launch
    info_.kmeans_max_k = kLimits.kmeans_k;
    info_.kmeans_max_d = kLimits.kmeans_d;
  }
  const DeviceInfo& info() const override { return info_; }
  std::string cannot_run(const KernelArgs& shape) const override { return exceeds(shape, kLimits); }
  std::unique_ptr<Buffer> allocate(std::size_t bytes) override {
    return std::make_unique<HostBuffer>(bytes, /*shared_with_host=*/false, this);
  }
  Event enqueue(const KernelArgs& args, std::vector<Event> after) override {
    return queue_.submit([this, args] {
      if (supports(kernel_of(args)))
        check_buffers(info_.name, args, [this](const Buffer& b) { return host_buffer_of(this, b); });
      std::visit([](const auto& a) { run(a); }, args);
    }, std::move(after));
  }

 private:
  template <class Args>
  static void run(const Args& a) {
    throw_unsupported("fpga-emu", a);
  }
  static void run(const KMeansAssignArgs& a) {
    if (a.k < 1 || a.k > KMEANS_MAX_K || a.d < 1 || a.d > KMEANS_MAX_D || a.n < 0 || a.n > INT_MAX)
      throw DeviceError("fpga-emu kmeans_assign: n=" + std::to_string(a.n) + " d=" + std::to_string(a.d) +
                        " k=" + std::to_string(a.k) + " outside the kernel's bounds (k <= " +
                        std::to_string(KMEANS_MAX_K) + ", d <= " + std::to_string(KMEANS_MAX_D) + ")");
    static_assert(sizeof(long long) == sizeof(std::int64_t));
    // The kernel's on-chip arrays are static (one compute unit): one launch at a time.
    static std::mutex compute_unit;
    std::lock_guard lock(compute_unit);
    ::kmeans_assign(device_ptr<const float>(a.x), device_ptr<const float>(a.centroids), static_cast<int>(a.n),
                    static_cast<int>(a.d), static_cast<int>(a.k), device_ptr<int>(a.labels),
                    device_ptr<double>(a.sums), reinterpret_cast<long long*>(device_ptr<std::int64_t>(a.counts)),
                    device_ptr<double>(a.inertia));
  }
  static void run(const TopKHistogramArgs& a) {
    if (auto why = check_histogram_args(a, TOPK_MAX_BINS); !why.empty())
      throw DeviceError("fpga-emu topk_histogram: " + why);
    static_assert(sizeof(unsigned long long) == sizeof(std::uint64_t));
    static std::mutex compute_unit;  // static on-chip histogram: one launch at a time
    std::lock_guard lock(compute_unit);
    ::topk_histogram(device_ptr<const float>(a.data), a.n, a.lo, a.hi, a.shift, static_cast<int>(a.bins),
                     reinterpret_cast<unsigned long long*>(device_ptr<std::uint64_t>(a.hist)),
                     device_ptr<double>(a.moments),
                     reinterpret_cast<unsigned long long*>(device_ptr<std::uint64_t>(a.outside)),
                     a.candidates != nullptr ? 1 : 0,
                     reinterpret_cast<long long*>(device_ptr<std::int64_t>(a.candidates)),
                     reinterpret_cast<unsigned long long*>(device_ptr<std::uint64_t>(a.candidate_count)), a.capacity,
                     a.candidate_values != nullptr ? 1 : 0, device_ptr<float>(a.candidate_values));
  }
  static void run(const CsrKernelRowsArgs& a) {
    if (a.cols > CSR_MAX_COLS || a.q < 0 || a.m < 0 || a.n < 0 || a.n > INT_MAX || a.q * a.m > INT_MAX)
      throw DeviceError("fpga-emu csr_kernel_rows: n=" + std::to_string(a.n) + " cols=" + std::to_string(a.cols) +
                        " q=" + std::to_string(a.q) + " m=" + std::to_string(a.m) +
                        " outside the kernel's bounds (cols <= " + std::to_string(CSR_MAX_COLS) + ")");
    static std::mutex compute_unit;  // the dense query buffer is one static array
    std::lock_guard lock(compute_unit);
    ::csr_kernel_rows(reinterpret_cast<const long long*>(device_ptr<const std::int64_t>(a.row_ptr)),
                      device_ptr<const int>(a.col_idx), device_ptr<const float>(a.values),
                      device_ptr<const double>(a.sq_norms), device_ptr<const int>(a.queries),
                      device_ptr<const int>(a.active), device_ptr<float>(a.out), static_cast<int>(a.q),
                      static_cast<int>(a.m), static_cast<int>(a.cols), static_cast<int>(a.type), a.gamma, a.coef0,
                      a.degree);
  }
  DeviceInfo info_;
  WorkQueue queue_;
};

class FpgaEmuBackend final : public Backend {
 public:
  std::string name() const override { return "fpga-emu"; }
  std::vector<std::unique_ptr<Device>> discover() override {
    std::vector<std::unique_ptr<Device>> out;
    out.push_back(std::make_unique<FpgaEmuDevice>());
    return out;
  }
};

}  // namespace

ACCEL_REGISTER_BACKEND(20, FpgaEmuBackend, "fpga-emu", false);

}  // namespace accel
