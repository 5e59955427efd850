// The XRT backend: Alveo-class FPGAs through XRT's native C++ API
// (xrt::device, xrt::xclbin, xrt::kernel, xrt::bo, xrt::run). Each card is
// one device; discovery loads the xclbin the bitstream manifest lists for the
// card's platform and opens the kmeans_assign kernel (kernels_hls/, argument
// order of its extern "C" top function).
//
// Buffers: an xrt::bo must live in the memory bank its kernel argument is
// connected to, which only the kernel knows (kernel.group_id(arg)). So a
// buffer starts as host staging memory and gets its bo on first use by a
// launch, in that argument's bank; after that write() copies into the bo's
// host mapping and syncs to the device, read() syncs from the device first.
//
// Discovery never throws: Debian's libxrt throws from enumerate_devices()
// unless XILINX_XRT points at an install whose lib/ holds libxrt_core.so.2;
// that, no card, or no matching bitstream are reported through why_none().
//
// Bitstream manifest: <dir>/manifest.json, <dir> from $ACCEL_BITSTREAMS or
// else ACCEL_BITSTREAMS_DIR (set at build time). Written by
// scripts/build_bitstreams.sh:
//   {
//     "bitstreams": [
//       {
//         "platform": "xilinx_u250_gen3x16_xdma_4_1_202210_1",  // v++ --platform
//         "device":   "xilinx_u250_gen3x16_xdma_shell_4_1",     // optional: the name XRT
//                                                               // reports for the card
//         "target":   "hw",                                     // hw | hw_emu | sw_emu
//         "xclbin":   "xilinx_u250_gen3x16_xdma_4_1_202210_1/hw/accel.xclbin",
//                                                               // relative to <dir>, or absolute
//         "kernels":  ["kmeans_assign"]                          // top functions inside
//       }
//     ]
//   }
// A card takes the entries of the wanted target ($XCL_EMULATION_MODE, else
// "hw") that hold kmeans_assign, trying first those whose "device" or
// "platform" equals the card's name (xrt::info::device::name), then those
// whose platform starts with that name less "_shell" (XRT reports the shell's
// VBNV, e.g. xilinx_u250_gen3x16_xdma_shell_4_1, for platform
// xilinx_u250_gen3x16_xdma_4_1_202210_1). The first that loads wins; XRT
// itself refuses an xclbin built for another shell.
#include <xrt/xrt_bo.h>
#include <xrt/xrt_device.h>
#include <xrt/xrt_kernel.h>
#include <experimental/xrt_system.h>

#include <algorithm>
#include <climits>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <optional>
#include <nlohmann/json.hpp>
#include <stdexcept>
#include <string>
#include <variant>
#include <vector>

#include "accel/kernel_buffers.hpp"
#include "accel/registry.hpp"
#include "accel/error.hpp"
#include "accel/work_queue.hpp"
#include "csr_kernel_rows.hpp"
#include "kmeans_assign.hpp"
#include "topk_histogram.hpp"

#ifndef ACCEL_BITSTREAMS_DIR
#define ACCEL_BITSTREAMS_DIR "bitstreams"
#endif

namespace accel {
namespace {

namespace fs = std::filesystem;

constexpr const char* kKernel = "kmeans_assign";
// Argument positions of kmeans_assign(x, centroids, n, d, k, labels, sums, counts, inertia).
enum Arg { kX = 0, kCentroids = 1, kLabels = 5, kSums = 6, kCounts = 7, kInertia = 8 };
// csr_kernel_rows, when the bitstream holds it too (kernels_hls/csr_kernel_rows.cpp):
// (row_ptr, col_idx, values, sq_norms, queries, active, out, q, m, cols, type, gamma, coef0, degree).
constexpr const char* kCsrKernel = "csr_kernel_rows";
enum CsrArg { kRowPtr = 0, kColIdx = 1, kValues = 2, kNorms = 3, kQueries = 4, kActive = 5, kOut = 6 };

class XrtBuffer final : public Buffer {
 public:
  // copies: the device's copy thread (write_async: memcpy and bo sync
  // beside the launches).
  XrtBuffer(xrt::device dev, std::size_t bytes, const void* owner, WorkQueue& copies)
      : dev_(std::move(dev)), bytes_(bytes), staging_(bytes), owner_(owner), copies_(copies) {}
  Event write_async(const void* src, std::size_t bytes, std::size_t offset = 0) override {
    return write_on(copies_, *this, src, bytes, offset);
  }
  Event read_async(void* dst, std::size_t bytes, std::size_t offset = 0) const override {
    return read_on(copies_, *this, dst, bytes, offset);
  }

  std::size_t size() const override { return bytes_; }
  void write(const void* src, std::size_t bytes, std::size_t offset = 0) override {
    check_range(bytes, offset);
    if (bytes == 0) return;
    std::lock_guard lock(mu_);
    if (!bound_) {
      std::memcpy(staging_.data() + offset, src, bytes);
      return;
    }
    guarded("write", [&] {
      std::memcpy(bo_.map<char*>() + offset, src, bytes);
      bo_.sync(XCL_BO_SYNC_BO_TO_DEVICE, bytes, offset);
    });
  }
  void read(void* dst, std::size_t bytes, std::size_t offset = 0) const override {
    check_range(bytes, offset);
    if (bytes == 0) return;
    std::lock_guard lock(mu_);
    if (!bound_) {
      std::memcpy(dst, staging_.data() + offset, bytes);
      return;
    }
    guarded("read", [&] {
      bo_.sync(XCL_BO_SYNC_BO_FROM_DEVICE, bytes, offset);
      std::memcpy(dst, bo_.map<const char*>() + offset, bytes);
    });
  }

  // The bo in memory group `group`, made on first use and filled with the
  // buffer's contents (moved over if an earlier launch put it elsewhere).
  xrt::bo bind(xrt::memory_group group) {
    std::lock_guard lock(mu_);
    if (bound_ && group_ == group) return bo_;
    xrt::bo fresh(dev_, bytes_ == 0 ? 64 : bytes_, group);  // XRT refuses empty bos
    char* m = fresh.map<char*>();
    if (bound_) {
      bo_.sync(XCL_BO_SYNC_BO_FROM_DEVICE);
      std::memcpy(m, bo_.map<const char*>(), bytes_);
    } else {
      std::memcpy(m, staging_.data(), bytes_);
      std::vector<char>().swap(staging_);  // the bo holds the contents from now on
    }
    fresh.sync(XCL_BO_SYNC_BO_TO_DEVICE);
    bo_ = std::move(fresh);
    group_ = group;
    bound_ = true;
    return bo_;
  }
  const void* owner() const { return owner_; }

 private:
  void check_range(std::size_t bytes, std::size_t offset) const {
    if (offset > bytes_ || bytes > bytes_ - offset)
      throw std::out_of_range("buffer access [" + std::to_string(offset) + ", +" + std::to_string(bytes) +
                              ") beyond its " + std::to_string(bytes_) + " bytes");
  }
  template <class F>
  static void guarded(const char* what, F&& f) {
    try {
      f();
    } catch (const std::exception& e) {
      throw DeviceError(std::string("xrt buffer ") + what + ": " + e.what());
    }
  }

  mutable std::mutex mu_;
  xrt::device dev_;
  std::size_t bytes_;
  std::vector<char> staging_;
  mutable xrt::bo bo_;  // sync() is not const; the handle is
  xrt::memory_group group_ = 0;
  bool bound_ = false;
  const void* owner_;
  WorkQueue& copies_;
};

// The HLS kernel's on-chip arrays (kernels_hls/include/kmeans_assign.hpp).
constexpr KernelLimits kLimits{KMEANS_MAX_K, KMEANS_MAX_D};

class XrtDevice final : public Device {
 public:
  // `kernel` is empty when no bitstream could be loaded: the device is
  // listed (with the reason in its description) but runs nothing.
  XrtDevice(xrt::device dev, std::optional<xrt::kernel> kernel, std::optional<xrt::kernel> topk,
            std::optional<xrt::kernel> csr_kernel, DeviceInfo info)
      : dev_(std::move(dev)),
        kernel_(std::move(kernel)),
        topk_(std::move(topk)),
        csr_kernel_(std::move(csr_kernel)),
        info_(std::move(info)) {}

  const DeviceInfo& info() const override { return info_; }
  std::string cannot_run(const KernelArgs& shape) const override { return exceeds(shape, kLimits); }
  std::unique_ptr<Buffer> allocate(std::size_t bytes) override {
    return std::make_unique<XrtBuffer>(dev_, bytes, this, copies_);
  }
  Event enqueue(const KernelArgs& args, std::vector<Event> after) override {
    return queue_.submit([this, args] {
      if (supports(kernel_of(args)))
        check_buffers(info_.name, args, [this](const Buffer& b) {
          auto* xb = dynamic_cast<const XrtBuffer*>(&b);
          return xb != nullptr && xb->owner() == this;
        });
      std::visit([this](const auto& a) { run(a); }, args);
    }, std::move(after));
  }

 private:
  template <class Args>
  void run(const Args& a) {
    throw_unsupported(info_.name, a);
  }
  void run(const KMeansAssignArgs& a) {
    const std::string where = info_.name + " kmeans_assign";
    if (!kernel_) throw DeviceError(where + ": no bitstream loaded on this card");
    if (a.k < 1 || a.k > KMEANS_MAX_K || a.d < 1 || a.d > KMEANS_MAX_D || a.n < 0 || a.n > INT_MAX)
      throw DeviceError(where + ": n=" + std::to_string(a.n) + " d=" + std::to_string(a.d) +
                        " k=" + std::to_string(a.k) + " outside the kernel's bounds (k <= " +
                        std::to_string(KMEANS_MAX_K) + ", d <= " + std::to_string(KMEANS_MAX_D) + ")");
    auto* x = mine(a.x);
    auto* c = mine(a.centroids);
    auto* labels = mine(a.labels);
    auto* sums = mine(a.sums);
    auto* counts = mine(a.counts);
    auto* inertia = mine(a.inertia);
    run_and_wait(where, *kernel_, [&](xrt::kernel& kernel, const auto& bank) {
      return kernel(x->bind(bank(kX)), c->bind(bank(kCentroids)), static_cast<int>(a.n),
                    static_cast<int>(a.d), static_cast<int>(a.k), labels->bind(bank(kLabels)),
                    sums->bind(bank(kSums)), counts->bind(bank(kCounts)), inertia->bind(bank(kInertia)));
    });
  }

  // topk_histogram(data, n, lo, hi, shift, bins, hist, moments, outside, collect, candidates,
  //                candidate_count, capacity, collect_values, candidate_values): argument positions of its buffers.
  enum TopKArg { kData = 0, kHist = 6, kMoments = 7, kOutside = 8, kCand = 10, kCandCount = 11, kCandValues = 14 };

  void run(const TopKHistogramArgs& a) {
    const std::string where = info_.name + " topk_histogram";
    if (!topk_) throw DeviceError(where + ": the loaded bitstream has no topk_histogram");
    if (auto why = check_histogram_args(a, TOPK_MAX_BINS); !why.empty()) throw DeviceError(where + ": " + why);
    auto* data = mine(a.data);
    auto* hist = mine(a.hist);
    auto* moments = mine(a.moments);
    auto* outside = mine(a.outside);
    run_and_wait(where, *topk_, [&](xrt::kernel& kernel, const auto& bank) {
      // Without candidates the kernel never touches its candidate ports; they
      // still need a bo, so the histogram buffer stands in (collect = 0).
      XrtBuffer* cand = a.candidates ? mine(a.candidates) : hist;
      XrtBuffer* count = a.candidates ? mine(a.candidate_count) : outside;
      XrtBuffer* values = a.candidate_values ? mine(a.candidate_values) : moments;
      return kernel(data->bind(bank(kData)), static_cast<long long>(a.n), a.lo, a.hi, a.shift,
                    static_cast<int>(a.bins), hist->bind(bank(kHist)), moments->bind(bank(kMoments)),
                    outside->bind(bank(kOutside)), a.candidates ? 1 : 0, cand->bind(bank(kCand)),
                    count->bind(bank(kCandCount)), static_cast<long long>(a.capacity),
                    a.candidate_values ? 1 : 0, values->bind(bank(kCandValues)));
    });
  }

  void run(const CsrKernelRowsArgs& a) {
    const std::string where = info_.name + " csr_kernel_rows";
    if (!csr_kernel_) throw DeviceError(where + ": the loaded bitstream has no csr_kernel_rows");
    if (a.cols > CSR_MAX_COLS || a.q < 0 || a.m < 0 || a.n < 0 || a.nnz < 0 || a.n > INT_MAX || a.q * a.m > INT_MAX)
      throw DeviceError(where + ": n=" + std::to_string(a.n) + " cols=" + std::to_string(a.cols) + " q=" +
                        std::to_string(a.q) + " m=" + std::to_string(a.m) + " outside the kernel's bounds (cols <= " +
                        std::to_string(CSR_MAX_COLS) + ")");
    auto* row_ptr = mine(a.row_ptr);
    auto* col_idx = mine(a.col_idx);
    auto* values = mine(a.values);
    auto* norms = mine(a.sq_norms);
    auto* queries = mine(a.queries);
    auto* active = mine(a.active);
    auto* out = mine(a.out);
    run_and_wait(where, *csr_kernel_, [&](xrt::kernel& kernel, const auto& bank) {
      return kernel(row_ptr->bind(bank(kRowPtr)), col_idx->bind(bank(kColIdx)), values->bind(bank(kValues)),
                    norms->bind(bank(kNorms)), queries->bind(bank(kQueries)), active->bind(bank(kActive)),
                    out->bind(bank(kOut)), static_cast<int>(a.q), static_cast<int>(a.m),
                    static_cast<int>(a.cols), static_cast<int>(a.type), a.gamma, a.coef0, a.degree);
    });
  }

  // Starts one run of `kernel` (start(kernel, bank) binds the arguments,
  // bank(arg) being the memory group the argument is connected to) and
  // waits for it; every failure becomes a DeviceError naming `where`.
  // Results stay on the card until a buffer's read() syncs them back.
  template <class Start>
  static void run_and_wait(const std::string& where, xrt::kernel& kernel, const Start& start) {
    try {
      auto bank = [&kernel](int arg) { return static_cast<xrt::memory_group>(kernel.group_id(arg)); };
      xrt::run r = start(kernel, bank);
      const ert_cmd_state state = r.wait();
      if (state != ERT_CMD_STATE_COMPLETED)
        throw DeviceError(where + ": run ended in ERT state " + std::to_string(static_cast<int>(state)));
    } catch (const DeviceError&) {
      throw;
    } catch (const std::exception& e) {
      throw DeviceError(where + ": " + e.what());
    }
  }

  // One of this device's buffers, checked already (check_buffers in launch).
  XrtBuffer* mine(Buffer* b) const { return static_cast<XrtBuffer*>(b); }


  xrt::device dev_;
  std::optional<xrt::kernel> kernel_;  // 2.13's xrt::kernel has no operator bool
  std::optional<xrt::kernel> topk_;    // when the xclbin holds topk_histogram
  std::optional<xrt::kernel> csr_kernel_;
  DeviceInfo info_;
  WorkQueue copies_;  // the copy thread (Buffer::write_async)
  WorkQueue queue_;   // declared last: destroyed (drained) before the handles above
};

struct ManifestEntry {
  std::string platform, device, target;
  fs::path xclbin;
  std::vector<std::string> kernels;
};

fs::path bitstreams_dir() {
  if (const char* env = std::getenv("ACCEL_BITSTREAMS"); env != nullptr && *env != '\0') return env;
  return ACCEL_BITSTREAMS_DIR;
}

// The manifest's entries; throws with a readable message on a missing or malformed file.
std::vector<ManifestEntry> read_manifest(const fs::path& dir) {
  const fs::path file = dir / "manifest.json";
  std::ifstream in(file);
  if (!in) throw std::runtime_error("no bitstream manifest at " + file.string());
  std::vector<ManifestEntry> out;
  try {
    const nlohmann::json j = nlohmann::json::parse(in);
    for (const auto& b : j.at("bitstreams")) {
      ManifestEntry e;
      e.platform = b.at("platform").get<std::string>();
      e.device = b.value("device", std::string());
      e.target = b.value("target", std::string("hw"));
      e.xclbin = b.at("xclbin").get<std::string>();
      if (e.xclbin.is_relative()) e.xclbin = dir / e.xclbin;
      e.kernels = b.value("kernels", std::vector<std::string>());
      out.push_back(std::move(e));
    }
  } catch (const nlohmann::json::exception& e) {
    throw std::runtime_error(file.string() + ": " + e.what());
  }
  return out;
}

// Entries worth trying on a card named `name`, best match first.
std::vector<const ManifestEntry*> candidates(const std::vector<ManifestEntry>& all, const std::string& name,
                                             const std::string& target) {
  std::string stem = name;  // shell VBNV -> platform prefix
  if (auto p = stem.find("_shell"); p != std::string::npos) stem.erase(p, 6);
  std::vector<const ManifestEntry*> exact, prefix;
  for (const auto& e : all) {
    if (e.target != target) continue;
    if (std::find(e.kernels.begin(), e.kernels.end(), kKernel) == e.kernels.end()) continue;
    if (e.device == name || e.platform == name)
      exact.push_back(&e);
    else if (!stem.empty() && e.platform.rfind(stem, 0) == 0)
      prefix.push_back(&e);
  }
  exact.insert(exact.end(), prefix.begin(), prefix.end());
  return exact;
}

// A device's kernels, from the first candidate xclbin that loads.
struct LoadedKernels {
  std::optional<xrt::kernel> kmeans, topk, csr;
  std::string loaded_from, why_not;
};

LoadedKernels load_kernels(xrt::device& dev, const std::vector<const ManifestEntry*>& cands) {
  LoadedKernels k;
  for (const ManifestEntry* e : cands) {
    try {
      const xrt::uuid id = dev.load_xclbin(e->xclbin.string());
      k.kmeans.emplace(dev, id, kKernel);
      if (std::find(e->kernels.begin(), e->kernels.end(), "topk_histogram") != e->kernels.end())
        k.topk.emplace(dev, id, "topk_histogram");
      if (std::find(e->kernels.begin(), e->kernels.end(), kCsrKernel) != e->kernels.end()) k.csr.emplace(dev, id, kCsrKernel);
      k.loaded_from = e->xclbin.filename().string() + " (" + e->platform + ")";
      k.why_not.clear();
      return k;
    } catch (const std::exception& ex) {
      k.why_not += (k.why_not.empty() ? "" : "; ") + e->xclbin.string() + ": " + ex.what();
    }
  }
  return k;
}

// What every FPGA reports before its bitstream is known.
DeviceInfo fpga_info(const std::string& label, const std::string& name, const std::string& bdf) {
  DeviceInfo info;
  info.name = label;
  info.family = "fpga";
  info.type = "accelerator";
  info.auto_priority = 20;
  info.description = name + " at " + bdf;
  info.compute_units = 1;
  info.limits = describe(kLimits);
  info.kmeans_max_k = kLimits.kmeans_k;
  info.kmeans_max_d = kLimits.kmeans_d;
  return info;
}

// The bitstreams' manifest as read for this discovery: its entries, or why
// it could not be read; and the target (hw, or an emulation mode).
struct Manifest {
  std::vector<ManifestEntry> entries;
  std::string error, target;
  Manifest() {
    const char* mode = std::getenv("XCL_EMULATION_MODE");
    target = mode != nullptr && *mode != '\0' ? mode : "hw";
    try {
      entries = read_manifest(bitstreams_dir());
    } catch (const std::exception& e) {
      error = e.what();
    }
  }
};

class XrtBackend final : public Backend {
 public:
  std::string name() const override { return "xrt"; }
  std::vector<std::unique_ptr<Device>> discover() override {
    std::vector<std::unique_ptr<Device>> out;
    why_.clear();
    const unsigned count = enumerate();
    if (count == 0) return out;
    const Manifest manifest;
    std::vector<std::string> notes;
    for (unsigned i = 0; i < count; ++i) {
      const std::string label = "fpga:" + std::to_string(i);
      try {
        out.push_back(open(i, label, manifest, notes));
      } catch (const std::exception& e) {
        notes.push_back(label + ": " + e.what());
      }
    }
    for (const auto& n : notes) why_ += (why_.empty() ? "xrt: " : "; ") + n;
    return out;
  }
  std::string why_none() const override { return why_; }

 private:
  // The FPGAs XRT sees (0, with why_ saying why, when it sees none).
  unsigned enumerate() {
    try {
      const unsigned count = xrt::system::enumerate_devices();
      if (count == 0) why_ = "xrt: no FPGA found";
      return count;
    } catch (const std::exception& e) {
      why_ = std::string("xrt: ") + e.what() + " (set XILINX_XRT to an XRT install whose lib/ holds libxrt_core.so.2)";
    } catch (...) {
      why_ = "xrt: device enumeration failed";
    }
    return 0;
  }

  // Device i with the kernels of the first bitstream for its platform that
  // loads; without one it is listed, running nothing, and notes say why.
  std::unique_ptr<Device> open(unsigned i, const std::string& label, const Manifest& manifest,
                               std::vector<std::string>& notes) {
    xrt::device dev(i);
    const auto name = dev.get_info<xrt::info::device::name>();
    DeviceInfo info = fpga_info(label, name, dev.get_info<xrt::info::device::bdf>());
    LoadedKernels k;
    k.why_not = manifest.error;
    if (manifest.error.empty()) {
      const auto cands = candidates(manifest.entries, name, manifest.target);
      if (cands.empty())
        k.why_not = "no " + manifest.target + " xclbin with " + kKernel + " for platform " + name + " in " +
                    (bitstreams_dir() / "manifest.json").string();
      else
        k = load_kernels(dev, cands);
    }
    if (k.kmeans) {
      info.description += ", " + k.loaded_from;
      info.kernels = {KernelId::KMeansAssign};
      if (k.topk) info.kernels.push_back(KernelId::TopKHistogram);
      if (k.csr) info.kernels.push_back(KernelId::CsrKernelRows);
    } else {
      info.description += " (no bitstream: " + k.why_not + ")";
      notes.push_back(label + ": " + k.why_not);
    }
    return std::make_unique<XrtDevice>(std::move(dev), std::move(k.kmeans), std::move(k.topk), std::move(k.csr),
                                       std::move(info));
  }

  std::string why_;
};

}  // namespace

ACCEL_REGISTER_BACKEND(35, XrtBackend, "fpga", true);

}  // namespace accel
