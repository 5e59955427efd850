// opencl: every OpenCL platform and device the ICD loader finds (PoCL's CPU
// device on these machines; AMD and Intel GPUs, Intel FPGAs elsewhere).
// Device memory is the device's (explicit write/read); the three kernels
// are kernels_opencl/*.cl, built at first use per device and kept by the
// source's hash (program_cache.hpp); launches run in order on one queue.
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <variant>

#include "accel/error.hpp"
#include "accel/kernel_buffers.hpp"
#include "accel/registry.hpp"
#include "accel/work_queue.hpp"
#include "cl_api.hpp"
#include "opencl_kernels.hpp"
#include "program_cache.hpp"

namespace accel {
namespace {

using namespace opencl;

class OpenClDevice;
const std::string& owner_name(const OpenClDevice& d);  // its name, for messages

std::string mib(std::uint64_t bytes) {
  char b[48];
  std::snprintf(b, sizeof b, "%.1f MiB", static_cast<double>(bytes) / 1048576.0);
  return b;
}

class OpenClBuffer final : public Buffer {
 public:
  // q: the launches' queue (write/read wait behind them); copy_q and
  // copies: the device's copy queue and the host thread that drives it.
  OpenClBuffer(const OpenClDevice& owner, cl_context ctx, cl_command_queue q, cl_command_queue copy_q,
               WorkQueue& copies, std::size_t bytes)
      : owner_(owner), queue_(q), copy_queue_(copy_q), copies_(copies), bytes_(bytes) {
    cl_int err = CL_SUCCESS;
    // OpenCL refuses 0-byte buffers; a 1-byte one stands in.
    mem_ = clCreateBuffer(ctx, CL_MEM_READ_WRITE, bytes == 0 ? 1 : bytes, nullptr, &err);
    check(err, owner_name(owner) + ": a buffer of " + std::to_string(bytes) + " bytes");
  }
  ~OpenClBuffer() override { clReleaseMemObject(mem_); }
  std::size_t size() const override { return bytes_; }
  void write(const void* src, std::size_t bytes, std::size_t offset) override {
    check_range(bytes, offset, "write");
    if (bytes) check(clEnqueueWriteBuffer(queue_, mem_, CL_TRUE, offset, bytes, src, 0, nullptr, nullptr), "write");
  }
  void read(void* dst, std::size_t bytes, std::size_t offset) const override {
    check_range(bytes, offset, "read");
    if (bytes) check(clEnqueueReadBuffer(queue_, mem_, CL_TRUE, offset, bytes, dst, 0, nullptr, nullptr), "read");
  }
  // On a queue of their own, so they run beside the launches: the caller
  // orders them (Device::launch's `after`, a read after its launch's Event).
  // A bad range, like a failed copy, is the Event's error.
  Event write_async(const void* src, std::size_t bytes, std::size_t offset) override {
    return copies_.submit([this, src, bytes, offset] {
      check_range(bytes, offset, "write");
      if (bytes)
        check(clEnqueueWriteBuffer(copy_queue_, mem_, CL_TRUE, offset, bytes, src, 0, nullptr, nullptr), "write");
    });
  }
  Event read_async(void* dst, std::size_t bytes, std::size_t offset) const override {
    return copies_.submit([this, dst, bytes, offset] {
      check_range(bytes, offset, "read");
      if (bytes)
        check(clEnqueueReadBuffer(copy_queue_, mem_, CL_TRUE, offset, bytes, dst, 0, nullptr, nullptr), "read");
    });
  }
  cl_mem mem() const { return mem_; }
  const OpenClDevice& owner() const { return owner_; }

 private:
  void check_range(std::size_t bytes, std::size_t offset, const char* what) const {
    if (offset > bytes_ || bytes > bytes_ - offset)
      throw DeviceError(std::string("opencl buffer ") + what + " of " + std::to_string(bytes) + " bytes at " +
                        std::to_string(offset) + " exceeds its " + std::to_string(bytes_) + " bytes");
  }
  const OpenClDevice& owner_;
  cl_command_queue queue_, copy_queue_;
  WorkQueue& copies_;
  cl_mem mem_ = nullptr;
  std::size_t bytes_;
};

class OpenClDevice final : public Device {
 public:
  OpenClDevice(cl_platform_id platform, cl_device_id dev, int index) : dev_(dev) {
    cl_int err = CL_SUCCESS;
    ctx_ = clCreateContext(nullptr, 1, &dev_, nullptr, nullptr, &err);
    check(err, "clCreateContext");
    queue_ = clCreateCommandQueue(ctx_, dev_, 0, &err);
    check(err, "clCreateCommandQueue");
    copy_queue_ = clCreateCommandQueue(ctx_, dev_, 0, &err);
    check(err, "clCreateCommandQueue (copies)");
    info_ = describe(platform, dev_, index);
    cl_ulong local = 0;
    check(clGetDeviceInfo(dev_, CL_DEVICE_LOCAL_MEM_SIZE, sizeof local, &local, nullptr), "local memory size");
    local_bytes_ = static_cast<std::size_t>(local);
    cl_ulong alloc = 0;
    check(clGetDeviceInfo(dev_, CL_DEVICE_MAX_MEM_ALLOC_SIZE, sizeof alloc, &alloc, nullptr), "largest allocation");
    max_alloc_ = static_cast<std::size_t>(alloc);
  }
  ~OpenClDevice() override {
    queue_work_.reset();  // no launch or copy outlives the queue it enqueues on
    copy_work_.reset();
    programs_.clear();
    for (auto& s : scratch_)
      if (s.mem) clReleaseMemObject(s.mem);
    clReleaseCommandQueue(queue_);
    clReleaseCommandQueue(copy_queue_);
    clReleaseContext(ctx_);
  }
  const DeviceInfo& info() const override { return info_; }
  std::unique_ptr<Buffer> allocate(std::size_t bytes) override {
    // Said before the runtime is asked: some answer a buffer too large for
    // the device only at its first use, or not at all.
    if (bytes > max_alloc_ || bytes > info_.memory_bytes)
      throw DeviceError(info_.name + ": not enough device memory for a buffer of " + mib(bytes) +
                        " (it allocates at most " + mib(std::min<std::uint64_t>(max_alloc_, info_.memory_bytes)) +
                        " at once)");
    return std::make_unique<OpenClBuffer>(*this, ctx_, queue_, copy_queue_, *copy_work_, bytes);
  }
  Event enqueue(const KernelArgs& args, std::vector<Event> after) override {
    return queue_work_->submit([this, args] {
      if (supports(kernel_of(args)))
        check_buffers(info_.name, args, [this](const Buffer& b) {
          auto* ob = dynamic_cast<const OpenClBuffer*>(&b);
          return ob != nullptr && &ob->owner() == this;
        });
      std::visit([this](const auto& a) { run(a); }, args);
    }, std::move(after));
  }

 private:
  template <class Args>
  void run(const Args& a) {
    throw_unsupported(info_.name, a);
  }
  void run(const KMeansAssignArgs& a);
  void run(const CsrKernelRowsArgs& a);
  void run(const TopKHistogramArgs& a);

  // A buffer of this device, checked already (check_buffers in launch).
  static cl_mem mem_of(Buffer* b) { return static_cast<OpenClBuffer*>(b)->mem(); }
  // Driver-owned scratch of at least `bytes`, kept between launches.
  cl_mem scratch(int slot, std::size_t bytes);
  cl_kernel kernel(const char* source_name, const char* name) {
    return programs_.kernel(ctx_, dev_, info_.name, source_name, name);
  }
  void enqueue_kernel(cl_kernel k, std::initializer_list<std::size_t> global,
                      std::initializer_list<std::size_t> local = {}) {
    std::size_t g[3] = {}, l[3] = {};
    std::size_t dims = 0;
    for (auto v : global) g[dims++] = v;
    std::size_t ld = 0;
    for (auto v : local) l[ld++] = v;
    check(clEnqueueNDRangeKernel(queue_, k, static_cast<cl_uint>(dims), nullptr, g, ld ? l : nullptr, 0, nullptr,
                                 nullptr),
          "clEnqueueNDRangeKernel");
  }

  static DeviceInfo describe(cl_platform_id platform, cl_device_id dev, int index);

  cl_device_id dev_;
  cl_context ctx_ = nullptr;
  cl_command_queue queue_ = nullptr, copy_queue_ = nullptr;
  DeviceInfo info_;
  std::size_t local_bytes_ = 0;  // CL_DEVICE_LOCAL_MEM_SIZE
  std::size_t max_alloc_ = 0;    // CL_DEVICE_MAX_MEM_ALLOC_SIZE
  ProgramCache programs_;
  struct Scratch {
    cl_mem mem = nullptr;
    std::size_t bytes = 0;
  };
  std::vector<Scratch> scratch_{8};
  std::unique_ptr<WorkQueue> queue_work_ = std::make_unique<WorkQueue>();
  std::unique_ptr<WorkQueue> copy_work_ = std::make_unique<WorkQueue>();
};

const std::string& owner_name(const OpenClDevice& d) { return d.info().name; }

cl_mem OpenClDevice::scratch(int slot, std::size_t bytes) {
  Scratch& s = scratch_.at(static_cast<std::size_t>(slot));
  if (s.bytes >= bytes && s.mem) return s.mem;
  if (s.mem) clReleaseMemObject(s.mem);
  cl_int err = CL_SUCCESS;
  s.mem = clCreateBuffer(ctx_, CL_MEM_READ_WRITE, std::max<std::size_t>(bytes, 1), nullptr, &err);
  check(err, info_.name + ": scratch of " + std::to_string(bytes) + " bytes");
  s.bytes = bytes;
  return s.mem;
}

DeviceInfo OpenClDevice::describe(cl_platform_id platform, cl_device_id dev, int index) {
  DeviceInfo info;
  info.name = "opencl:" + std::to_string(index);
  info.family = "opencl";
  const cl_device_type t = device_value<cl_device_type>(dev, CL_DEVICE_TYPE);
  info.type = (t & CL_DEVICE_TYPE_GPU) ? "gpu" : (t & CL_DEVICE_TYPE_ACCELERATOR) ? "accelerator" : "cpu";
  // A CPU runtime (PoCL) computes on the cores the cpu device uses: it
  // joins "all" and "auto" only when named.
  info.on_host_cores = info.type == "cpu";
  info.auto_priority = info.type == "gpu" ? 25 : info.type == "accelerator" ? 15 : 0;
  info.memory_bytes = device_value<cl_ulong>(dev, CL_DEVICE_GLOBAL_MEM_SIZE);
  info.compute_units = static_cast<int>(device_value<cl_uint>(dev, CL_DEVICE_MAX_COMPUTE_UNITS));
  info.description = platform_string(platform, CL_PLATFORM_NAME) + ": " + device_string(dev, CL_DEVICE_NAME) +
                     " (" + info.type + ", " + device_string(dev, CL_DEVICE_VERSION) + ")";
  const std::string ext = device_string(dev, CL_DEVICE_EXTENSIONS);
  const bool fp64 = ext.find("cl_khr_fp64") != std::string::npos;
  const bool atomics64 = ext.find("cl_khr_int64_base_atomics") != std::string::npos;
  // Every kernel sums in double; the histogram counts with 64-bit atomics.
  if (fp64) info.kernels = {KernelId::KMeansAssign, KernelId::CsrKernelRows};
  if (fp64 && atomics64) info.kernels.push_back(KernelId::TopKHistogram);
  if (!fp64) info.description += "; no cl_khr_fp64: no kernels";
  return info;
}

// Chunks of rows for the sums: enough to keep the device busy, few enough
// that their partial sums stay within 64 MiB.
constexpr std::size_t kKMeansRows = 4;   // KMEANS_ROWS in kmeans_assign.cl
constexpr std::size_t kQueryTile = 16;   // QUERY_TILE in csr_kernel_rows.cl
constexpr std::size_t kTileGroup = 64;   // TILE_GROUP

std::int64_t sum_chunks(std::int64_t n, std::int64_t d, std::int64_t k) {
  const std::int64_t by_rows = std::max<std::int64_t>(1, (n + 1023) / 1024);
  const std::int64_t by_memory = std::max<std::int64_t>(1, (std::int64_t{64} << 20) / (k * d * 8 + k * 8 + 8));
  return std::min(by_rows, by_memory);
}

void OpenClDevice::run(const KMeansAssignArgs& a) {
  if (a.n < 0 || a.d < 1 || a.k < 1 || a.d > INT32_MAX || a.k > INT32_MAX)
    throw DeviceError(info_.name + " kmeans_assign: n=" + std::to_string(a.n) + " d=" + std::to_string(a.d) +
                      " k=" + std::to_string(a.k) + " is not a problem");
  const auto n = static_cast<std::size_t>(a.n), d = static_cast<std::size_t>(a.d), k = static_cast<std::size_t>(a.k);
  cl_mem x = mem_of(a.x), c = mem_of(a.centroids);
  cl_mem labels = mem_of(a.labels), sums = mem_of(a.sums);
  cl_mem counts = mem_of(a.counts), inertia = mem_of(a.inertia);
  const std::int64_t chunks = sum_chunks(a.n, a.d, a.k);
  const std::int64_t per_chunk = a.n == 0 ? 1 : (a.n + chunks - 1) / chunks;
  cl_mem dist = scratch(0, n * 8), part_sums = scratch(1, chunks * k * d * 8);
  cl_mem part_counts = scratch(2, chunks * k * 8), part_inertia = scratch(3, chunks * 8);
  const cl_int di = static_cast<cl_int>(a.d), ki = static_cast<cl_int>(a.k);
  const cl_long nl = a.n, pl = per_chunk, cl = chunks;
  if (a.n > 0) {
    cl_mem norms = scratch(4, k * 4);
    cl_kernel nk = kernel("kmeans_assign", "kmeans_centroid_norms");
    set_args(nk, c, di, ki, norms);
    enqueue_kernel(nk, {k});
    cl_kernel assign = kernel("kmeans_assign", "kmeans_assign");
    set_args(assign, x, c, norms, nl, di, ki, labels, dist);
    enqueue_kernel(assign, {(n + kKMeansRows - 1) / kKMeansRows});
  }
  cl_kernel part = kernel("kmeans_assign", "kmeans_assign_sums");
  set_args(part, x, labels, dist, nl, di, ki, pl, part_sums, part_counts, part_inertia);
  enqueue_kernel(part, {d, static_cast<std::size_t>(chunks)});
  cl_kernel reduce = kernel("kmeans_assign", "kmeans_assign_reduce");
  set_args(reduce, part_sums, part_counts, part_inertia, cl, di, ki, sums, counts, inertia);
  enqueue_kernel(reduce, {k * d + k + 1});
  check(clFinish(queue_), "clFinish");
}

void OpenClDevice::run(const CsrKernelRowsArgs& a) {
  if (a.n < 0 || a.nnz < 0 || a.q < 0 || a.m < 0 || a.degree < 0)
    throw DeviceError(info_.name + " csr_kernel_rows: negative size or degree");
  const auto q = static_cast<std::size_t>(a.q), m = static_cast<std::size_t>(a.m);
  cl_mem row_ptr = mem_of(a.row_ptr), col = mem_of(a.col_idx);
  cl_mem val = mem_of(a.values), sq = mem_of(a.sq_norms);
  cl_mem queries = mem_of(a.queries), active = mem_of(a.active);
  cl_mem out = mem_of(a.out);
  if (q == 0 || m == 0) return;
  const cl_long ql = a.q, ml = a.m;
  const cl_int type = static_cast<cl_int>(a.type), degree = a.degree;
  const cl_double gamma = a.gamma, coef0 = a.coef0;
  const std::size_t tile_bytes = static_cast<std::size_t>(std::max<std::int64_t>(a.cols, 1)) * kQueryTile * 4;
  if (a.cols <= INT32_MAX / static_cast<std::int64_t>(kQueryTile) && tile_bytes <= local_bytes_) {
    // The queries' rows in local memory: no merge.
    cl_kernel k = kernel("csr_kernel_rows", "csr_kernel_rows_tiled");
    const cl_int cols = static_cast<cl_int>(a.cols);
    const cl_int exact = a.exact ? 1 : 0;
    set_args(k, row_ptr, col, val, sq, queries, active, out, ql, ml, cols, type, gamma, coef0, degree, exact);
    check(clSetKernelArg(k, 15, tile_bytes, nullptr), "clSetKernelArg (local tile)");
    enqueue_kernel(k, {(m + kTileGroup - 1) / kTileGroup * kTileGroup, (q + kQueryTile - 1) / kQueryTile},
                   {kTileGroup, 1});
  } else {
    cl_kernel k = kernel("csr_kernel_rows", "csr_kernel_rows");
    set_args(k, row_ptr, col, val, sq, queries, active, out, ql, ml, type, gamma, coef0, degree);
    enqueue_kernel(k, {m, q});
  }
  check(clFinish(queue_), "clFinish");
}

void OpenClDevice::run(const TopKHistogramArgs& a) {
  constexpr std::int64_t kMaxBins = std::int64_t{1} << 24;
  if (auto why = check_histogram_args(a, kMaxBins); !why.empty()) throw DeviceError(info_.name + " topk_histogram: " + why);
  const auto n = static_cast<std::size_t>(a.n), bins = static_cast<std::size_t>(a.bins);
  cl_mem data = mem_of(a.data), hist = mem_of(a.hist);
  cl_mem moments = mem_of(a.moments), outside = mem_of(a.outside);
  const bool collect = a.candidates != nullptr;
  cl_mem cand = collect ? mem_of(a.candidates) : nullptr;
  cl_mem count = collect ? mem_of(a.candidate_count) : nullptr;
  // CPU devices: a private histogram per work-item (topk_histogram_private),
  // in slices of about 1M values, a few per compute unit; others: global
  // atomics, contiguous slices of at least 4096 values, groups of 64.
  const bool own = info_.type == "cpu" && bins <= (local_bytes_ / 4) && bins <= INT32_MAX &&
                   n / std::max<std::size_t>(1, 4 * static_cast<std::size_t>(info_.compute_units)) < (1ull << 32);
  const std::size_t local = own ? 1 : 64;
  const std::size_t items = own ? std::max<std::size_t>(4 * static_cast<std::size_t>(std::max(1, info_.compute_units)),
                                                        (n + (1 << 20) - 1) >> 20)
                                : std::max<std::size_t>(local, (n + 4095) / 4096 / local * local + local);
  const cl_long per_item = static_cast<cl_long>((n + items - 1) / items);
  const std::size_t groups = items / local;
  cl_mem group_moments = scratch(4, groups * 3 * 8);
  if (!collect) cand = count = scratch(5, 8);  // unused by the kernel, but set
  const bool values = a.candidate_values != nullptr;
  cl_mem cand_values = values ? mem_of(a.candidate_values) : scratch(5, 8);
  const cl_ulong zero = 0;
  check(clEnqueueFillBuffer(queue_, hist, &zero, 8, 0, bins * 8, 0, nullptr, nullptr), "fill hist");
  check(clEnqueueFillBuffer(queue_, outside, &zero, 8, 0, 24, 0, nullptr, nullptr), "fill outside");
  check(clEnqueueFillBuffer(queue_, count, &zero, 8, 0, 8, 0, nullptr, nullptr), "fill count");
  cl_kernel k = kernel("topk_histogram", own ? "topk_histogram_private" : "topk_histogram");
  const cl_long nl = a.n, cap = a.capacity;
  const cl_uint lo = a.lo, hi = a.hi;
  const cl_int shift = a.shift, coll = collect ? 1 : 0, coll_values = values ? 1 : 0;
  set_args(k, data, nl, lo, hi, shift, hist, outside, coll, cand, count, cap, coll_values, cand_values, per_item,
           group_moments);
  if (own) {
    check(clSetKernelArg(k, 15, bins * sizeof(cl_uint), nullptr), "clSetKernelArg(own histogram)");
    const cl_int nb = static_cast<cl_int>(bins);
    check(clSetKernelArg(k, 16, sizeof nb, &nb), "clSetKernelArg(bins)");
  } else {
    check(clSetKernelArg(k, 15, 3 * local * sizeof(cl_double), nullptr), "clSetKernelArg(scratch)");
  }
  enqueue_kernel(k, {items}, {local});
  // The groups' moments, added here in group order: a few doubles per group.
  std::vector<double> gm(groups * 3);
  check(clEnqueueReadBuffer(queue_, group_moments, CL_TRUE, 0, gm.size() * 8, gm.data(), 0, nullptr, nullptr),
        "read moments");
  double m[3] = {0, 0, 0};
  for (std::size_t g = 0; g < groups; ++g) {
    m[0] += gm[3 * g];
    m[1] += gm[3 * g + 1];
    m[2] = std::max(m[2], gm[3 * g + 2]);
  }
  check(clEnqueueWriteBuffer(queue_, moments, CL_TRUE, 0, 24, m, 0, nullptr, nullptr), "write moments");
  check(clFinish(queue_), "clFinish");
}

class OpenClBackend final : public Backend {
 public:
  std::string name() const override { return "opencl"; }
  std::vector<std::unique_ptr<Device>> discover() override {
    std::vector<std::unique_ptr<Device>> out;
    cl_uint np = 0;
    const cl_int err = clGetPlatformIDs(0, nullptr, &np);
    if (err != CL_SUCCESS || np == 0) {
      const char* vendors = std::getenv("OCL_ICD_VENDORS");
      why_ = err == CL_SUCCESS || err == CL_PLATFORM_NOT_FOUND_KHR
                 ? std::string("no OpenCL platform (the ICD loader found no vendor in ") +
                       (vendors ? vendors : "/etc/OpenCL/vendors") + "; e.g. apt-get install pocl-opencl-icd)"
                 : "clGetPlatformIDs failed: " + error_name(err);
      return out;
    }
    std::vector<cl_platform_id> platforms(np);
    clGetPlatformIDs(np, platforms.data(), nullptr);
    int index = 0;
    for (cl_platform_id p : platforms) {
      cl_uint nd = 0;
      if (clGetDeviceIDs(p, CL_DEVICE_TYPE_ALL, 0, nullptr, &nd) != CL_SUCCESS || nd == 0) continue;
      std::vector<cl_device_id> devs(nd);
      clGetDeviceIDs(p, CL_DEVICE_TYPE_ALL, nd, devs.data(), nullptr);
      for (cl_device_id d : devs) out.push_back(std::make_unique<OpenClDevice>(p, d, index++));
    }
    if (out.empty()) why_ = "OpenCL platforms without devices";
    return out;
  }
  std::string why_none() const override { return why_; }

 private:
  std::string why_;
};

}  // namespace

ACCEL_REGISTER_BACKEND(40, OpenClBackend, "opencl", true);

}  // namespace accel
