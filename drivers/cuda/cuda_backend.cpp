// The CUDA backend: one device per GPU the CUDA runtime reports. Buffers are
// cudaMalloc'd (the host reaches them only through write/read); launches run
// kernels_cuda/ on one stream per device. Each launch is a WorkQueue task
// that enqueues the kernels and records a CUDA event after them, without
// waiting: the next launch is enqueued while this one runs, so the GPU
// does not idle between launches. A second thread waits for each event in
// order; the launch's Event is that wait, and carries the CUDA error, if
// any, as DeviceError.
//
// Discovery asks the runtime only: with no driver (cudaErrorInsufficientDriver)
// or no GPU (cudaErrorNoDevice) it reports zero devices and why.
#include "cublas_loader.hpp"
#include <cuda_runtime_api.h>

#include <cstdint>
#include <cstdio>
#include <functional>
#include <memory>
#include <stdexcept>
#include <string>
#include <variant>

#include "accel/kernel_buffers.hpp"
#include "accel/registry.hpp"
#include "accel/error.hpp"
#include "accel/work_queue.hpp"
#include "csr_kernel_rows.cuh"
#include "kmeans_assign.cuh"
#include "topk_histogram.cuh"

namespace accel {
namespace {

void check(cudaError_t e, const std::string& what) {
  if (e != cudaSuccess) throw DeviceError(what + ": " + cudaGetErrorString(e));
}

std::string pointer_text(const void* p) {
  char s[32];
  std::snprintf(s, sizeof s, "%p", p);
  return s;
}

// A device's copy engine: a non-blocking stream of its own, beside the
// launches' stream, driven by a host thread that waits for each copy (an
// Event is a host future).
class CudaCopies {
 public:
  explicit CudaCopies(int ordinal) : ordinal_(ordinal) {}
  ~CudaCopies() {
    queue_.reset();  // drained before its stream goes
    if (stream_ && cudaSetDevice(ordinal_) == cudaSuccess) cudaStreamDestroy(stream_);
  }
  // Runs fn(stream) on the copy thread, then waits for the stream.
  Event submit(std::function<void(cudaStream_t)> fn, const char* what) {
    return queue_->submit([this, fn = std::move(fn), what] {
      check(cudaSetDevice(ordinal_), "cudaSetDevice");
      if (stream_ == nullptr) check(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking), "copy stream");
      fn(stream_);
      check(cudaStreamSynchronize(stream_), what);
    });
  }

 private:
  int ordinal_;
  cudaStream_t stream_ = nullptr;  // made on the copy thread at its first copy
  std::unique_ptr<WorkQueue> queue_ = std::make_unique<WorkQueue>();
};

class CudaBuffer final : public Buffer {
 public:
  // copies: the device's copy engine (write_async, read_async).
  CudaBuffer(int ordinal, std::size_t bytes, CudaCopies& copies) : ordinal_(ordinal), bytes_(bytes), copies_(copies) {
    check(cudaSetDevice(ordinal_), "cudaSetDevice");
    check(cudaMalloc(&ptr_, bytes == 0 ? 1 : bytes), "cudaMalloc of " + std::to_string(bytes) + " bytes");
    owned_ = true;
  }
  // Over memory someone else allocated on this GPU and frees (wrap_device).
  CudaBuffer(int ordinal, void* ptr, std::size_t bytes, CudaCopies& copies)
      : ordinal_(ordinal), bytes_(bytes), copies_(copies), ptr_(ptr) {}
  ~CudaBuffer() override {
    // No throwing from a destructor; a failure here leaks the allocation.
    if (owned_ && cudaSetDevice(ordinal_) == cudaSuccess) cudaFree(ptr_);
  }
  CudaBuffer(const CudaBuffer&) = delete;
  CudaBuffer& operator=(const CudaBuffer&) = delete;

  std::size_t size() const override { return bytes_; }
  void write(const void* src, std::size_t bytes, std::size_t offset = 0) override {
    check_range(bytes, offset);
    if (bytes == 0) return;
    check(cudaSetDevice(ordinal_), "cudaSetDevice");
    check(cudaMemcpy(static_cast<char*>(ptr_) + offset, src, bytes, cudaMemcpyHostToDevice), "cudaMemcpy to device");
  }
  void read(void* dst, std::size_t bytes, std::size_t offset = 0) const override {
    check_range(bytes, offset);
    if (bytes == 0) return;
    check(cudaSetDevice(ordinal_), "cudaSetDevice");
    check(cudaMemcpy(dst, static_cast<const char*>(ptr_) + offset, bytes, cudaMemcpyDeviceToHost),
          "cudaMemcpy from device");
  }

  // cudaMemcpyAsync on the copy stream; from pageable host memory the
  // driver stages it, and the launches' stream runs on meanwhile.
  Event write_async(const void* src, std::size_t bytes, std::size_t offset = 0) override {
    return copies_.submit(
        [this, src, bytes, offset](cudaStream_t s) {
          check_range(bytes, offset);
          if (bytes)
            check(cudaMemcpyAsync(static_cast<char*>(ptr_) + offset, src, bytes, cudaMemcpyHostToDevice, s),
                  "cudaMemcpyAsync to device");
        },
        "copy to device");
  }
  Event read_async(void* dst, std::size_t bytes, std::size_t offset = 0) const override {
    return copies_.submit(
        [this, dst, bytes, offset](cudaStream_t s) {
          check_range(bytes, offset);
          if (bytes)
            check(cudaMemcpyAsync(dst, static_cast<const char*>(ptr_) + offset, bytes, cudaMemcpyDeviceToHost, s),
                  "cudaMemcpyAsync from device");
        },
        "copy from device");
  }
  void read_strided(void* dst, std::size_t width, std::size_t offset, std::size_t pitch,
                    std::size_t rows) const override {
    if (rows == 0 || width == 0) return;
    check_range((rows - 1) * pitch + width, offset);
    check(cudaSetDevice(ordinal_), "cudaSetDevice");
    check(cudaMemcpy2D(dst, width, static_cast<const char*>(ptr_) + offset, pitch, width, rows,
                       cudaMemcpyDeviceToHost),
          "cudaMemcpy2D from device");
  }
  int ordinal() const { return ordinal_; }
  void* data() const { return ptr_; }

 private:
  void check_range(std::size_t bytes, std::size_t offset) const {
    if (offset > bytes_ || bytes > bytes_ - offset)
      throw std::out_of_range("buffer access [" + std::to_string(offset) + ", +" + std::to_string(bytes) +
                              ") beyond its " + std::to_string(bytes_) + " bytes");
  }
  int ordinal_;
  std::size_t bytes_;
  CudaCopies& copies_;
  void* ptr_ = nullptr;
  bool owned_ = false;
};

class CudaDevice final : public Device {
 public:
  CudaDevice(int ordinal, DeviceInfo info)
      : ordinal_(ordinal), info_(std::move(info)), queue_(std::make_unique<WorkQueue>()),
        copies_(std::make_unique<CudaCopies>(ordinal)) {}
  ~CudaDevice() override {
    queue_.reset();  // drain: nothing may still use the stream, handle or scratch
    waits_.reset();  // after the launches: each wait follows its launch
    copies_.reset();
    if (cudaSetDevice(ordinal_) != cudaSuccess) return;
    if (scratch_) cudaFree(scratch_);
    if (dense_) cudaFree(dense_);
    if (blas_) cuda::cublas().destroy(blas_);
    if (stream_) cudaStreamDestroy(stream_);
  }

  const DeviceInfo& info() const override { return info_; }
  std::unique_ptr<Buffer> allocate(std::size_t bytes) override {
    return std::make_unique<CudaBuffer>(ordinal_, bytes, *copies_);
  }
  std::unique_ptr<Buffer> wrap_device(void* ptr, std::size_t bytes) override {
    cudaPointerAttributes attr{};
    if (cudaPointerGetAttributes(&attr, ptr) != cudaSuccess) {
      cudaGetLastError();
      throw DeviceError(info_.name + ": " + pointer_text(ptr) + " is not CUDA memory");
    }
    if (attr.type != cudaMemoryTypeDevice && attr.type != cudaMemoryTypeManaged)
      throw DeviceError(info_.name + ": " + pointer_text(ptr) + " is not device memory");
    if (attr.device != ordinal_)
      throw DeviceError(info_.name + ": " + pointer_text(ptr) + " is memory of cuda:" + std::to_string(attr.device));
    return std::make_unique<CudaBuffer>(ordinal_, ptr, bytes, *copies_);
  }
  Event enqueue(const KernelArgs& args, std::vector<Event> after) override {
    auto done = std::make_shared<cudaEvent_t>(nullptr);  // recorded after the launch's kernels
    Event queued = queue_->submit([this, args, done] {
      if (supports(kernel_of(args)))
        check_buffers(info_.name, args, [this](const Buffer& b) {
          auto* cb = dynamic_cast<const CudaBuffer*>(&b);
          return cb != nullptr && cb->ordinal() == ordinal_;
        });
      std::visit([this](const auto& a) { run(a); }, args);
      check(cudaEventCreateWithFlags(done.get(), cudaEventDisableTiming), info_.name + ": cudaEventCreate");
      check(cudaEventRecord(*done, stream_), info_.name + ": cudaEventRecord");
    }, std::move(after));
    // Waited on the waiter's thread (a failed launch rethrows from `queued`
    // and records nothing).
    return waits_->submit([this, done] {
      check(cudaSetDevice(ordinal_), "cudaSetDevice");
      const cudaError_t e = cudaEventSynchronize(*done);
      cudaEventDestroy(*done);
      check(e, info_.name + ": launch");
    }, {std::move(queued)});
  }

 private:
  // Runs on the queue's thread: the CUDA current device is per thread.
  template <class Args>
  void run(const Args& a) {
    throw_unsupported(info_.name, a);
  }
  void run(const KMeansAssignArgs& a) {
    const std::string where = info_.name + " kmeans_assign";
    if (a.n < 0 || a.d < 1 || a.k < 1 || a.d > cuda::kMaxDim || a.k > cuda::kMaxDim || a.n > INT64_MAX / 8 / a.d ||
        a.k > INT64_MAX / 8 / a.d)
      throw DeviceError(where + ": n=" + std::to_string(a.n) + " d=" + std::to_string(a.d) +
                        " k=" + std::to_string(a.k) + " outside n >= 0, 1 <= d, k <= 2^30");
    auto* x = mine(a.x);
    auto* c = mine(a.centroids);
    auto* labels = mine(a.labels);
    auto* sums = mine(a.sums);
    auto* counts = mine(a.counts);
    auto* inertia = mine(a.inertia);

    check(cudaSetDevice(ordinal_), where + ": cudaSetDevice");
    ensure_context(where);
    grow_scratch(cuda::kmeans_assign_scratch_bytes(a.n, a.d, a.k), where);
    if (const char* err = cuda::launch_kmeans_assign(
            static_cast<const float*>(x), static_cast<const float*>(c), a.n, a.d, a.k,
            static_cast<std::int32_t*>(labels), static_cast<double*>(sums), static_cast<std::int64_t*>(counts),
            static_cast<double*>(inertia), scratch_, scratch_bytes_, blas_, stream_))
      throw DeviceError(where + ": " + err);
  }

  void run(const TopKHistogramArgs& a) {
    const std::string where = info_.name + " topk_histogram";
    if (auto why = check_histogram_args(a, 0); !why.empty()) throw DeviceError(where + ": " + why);
    auto* data = mine(a.data);
    auto* hist = mine(a.hist);
    auto* moments = mine(a.moments);
    auto* outside = mine(a.outside);
    void* cand = a.candidates ? mine(a.candidates) : nullptr;
    void* count = a.candidates ? mine(a.candidate_count) : nullptr;
    void* values = a.candidates ? mine(a.candidate_values) : nullptr;
    check(cudaSetDevice(ordinal_), where + ": cudaSetDevice");
    ensure_context(where);
    grow_scratch(cuda::topk_histogram_scratch_bytes(), where);
    if (const char* err = cuda::launch_topk_histogram(
            static_cast<const float*>(data), a.n, a.lo, a.hi, a.shift, a.bins,
            static_cast<unsigned long long*>(hist), static_cast<double*>(moments),
            static_cast<unsigned long long*>(outside), static_cast<long long*>(cand),
            static_cast<unsigned long long*>(count), a.capacity, static_cast<float*>(values), scratch_, scratch_bytes_,
            stream_))
      throw DeviceError(where + ": " + err);
  }

  void run(const CsrKernelRowsArgs& a) {
    const std::string where = info_.name + " csr_kernel_rows";
    if (a.n < 0 || a.q < 0 || a.m < 0 || a.cols < 0 || a.nnz < 0 || a.n > INT32_MAX || a.cols > INT32_MAX)
      throw DeviceError(where + ": n=" + std::to_string(a.n) + " q=" + std::to_string(a.q) + " m=" +
                        std::to_string(a.m) + " cols=" + std::to_string(a.cols) + " out of range");
    auto* row_ptr = mine(a.row_ptr);
    auto* col_idx = mine(a.col_idx);
    auto* values = mine(a.values);
    auto* norms = mine(a.sq_norms);
    auto* queries = mine(a.queries);
    auto* active = mine(a.active);
    auto* out = mine(a.out);
    check(cudaSetDevice(ordinal_), where + ": cudaSetDevice");
    if (stream_ == nullptr) check(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking), where + ": stream");
    const std::size_t need = cuda::csr_kernel_rows_scratch_bytes(a.cols);
    if (need > dense_bytes_) {
      check(cudaStreamSynchronize(stream_), where + ": waiting to grow the scratch");  // earlier launches use it
      if (dense_) cudaFree(dense_);
      dense_ = nullptr;
      dense_bytes_ = 0;
      check(cudaMalloc(&dense_, need), where + ": cudaMalloc of " + std::to_string(need) + " scratch bytes");
      // The kernel keeps the dense query buffer zero between launches; it starts zero here.
      check(cudaMemsetAsync(dense_, 0, need, stream_), where + ": cudaMemsetAsync");
      dense_bytes_ = need;
    }
    if (const char* err = cuda::launch_csr_kernel_rows(
            static_cast<const std::int64_t*>(row_ptr), static_cast<const std::int32_t*>(col_idx),
            static_cast<const float*>(values), static_cast<const double*>(norms),
            static_cast<const std::int32_t*>(queries), a.q, static_cast<const std::int32_t*>(active), a.m, a.cols,
            static_cast<int>(a.type), a.gamma, a.coef0, a.degree, static_cast<float*>(out),
            static_cast<double*>(dense_), dense_bytes_, stream_))
      throw DeviceError(where + ": " + err);
  }

  // The launches' scratch, at least `need` bytes (kmeans_assign's distance
  // tiles, topk_histogram's per-block moments).
  void grow_scratch(std::size_t need, const std::string& where) {
    if (need <= scratch_bytes_) return;
    // Earlier launches may still use it: they finish first.
    check(cudaStreamSynchronize(stream_), where + ": waiting to grow the scratch");
    if (scratch_) cudaFree(scratch_);
    scratch_ = nullptr;
    scratch_bytes_ = 0;
    check(cudaMalloc(&scratch_, need), where + ": cudaMalloc of " + std::to_string(need) + " scratch bytes");
    scratch_bytes_ = need;
  }

  // One of this device's buffers, checked already (check_buffers in launch).
  void* mine(Buffer* b) const { return b ? static_cast<CudaBuffer*>(b)->data() : nullptr; }


  // Stream and cuBLAS handle, made on first launch (cuBLAS init is slow and
  // takes memory, which discovery should not pay).
  void ensure_context(const std::string& where) {
    if (stream_ == nullptr) check(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking), where + ": stream");
    if (blas_ == nullptr) {
      const cuda::Cublas* lib;
      try {
        lib = &cuda::cublas();
      } catch (const std::exception& e) {
        throw DeviceError(where + ": " + e.what());
      }
      const cublasStatus_t st = lib->create(&blas_);
      if (st != CUBLAS_STATUS_SUCCESS) {
        blas_ = nullptr;
        throw DeviceError(where + ": cublasCreate: " + lib->status_string(st));
      }
      // FP32 sgemm, no TF32 tensor ops: labels must agree with the other backends.
      lib->set_math_mode(blas_, CUBLAS_DEFAULT_MATH);
    }
  }

  int ordinal_;
  DeviceInfo info_;
  cudaStream_t stream_ = nullptr;
  cublasHandle_t blas_ = nullptr;
  void* scratch_ = nullptr;
  std::size_t scratch_bytes_ = 0;
  void* dense_ = nullptr;  // csr_kernel_rows' dense query row, kept all zero between launches
  std::size_t dense_bytes_ = 0;
  std::unique_ptr<WorkQueue> queue_;  // reset first in the destructor
  std::unique_ptr<WorkQueue> waits_ = std::make_unique<WorkQueue>();  // each launch's end, in order
  std::unique_ptr<CudaCopies> copies_;  // the copy engine (Buffer::write_async)
};

class CudaBackend final : public Backend {
 public:
  std::string name() const override { return "cuda"; }
  std::vector<std::unique_ptr<Device>> discover() override {
    std::vector<std::unique_ptr<Device>> out;
    why_.clear();
    int count = 0;
    const cudaError_t e = cudaGetDeviceCount(&count);
    if (e != cudaSuccess) {
      cudaGetLastError();  // clear it for later calls
      why_ = std::string("cuda: ") + cudaGetErrorString(e);
      return out;
    }
    if (count == 0) {
      why_ = "cuda: no CUDA devices";
      return out;
    }
    std::string skipped;
    for (int i = 0; i < count; ++i) {
      cudaDeviceProp p{};
      if (const cudaError_t pe = cudaGetDeviceProperties(&p, i); pe != cudaSuccess) {
        cudaGetLastError();
        skipped += "cuda:" + std::to_string(i) + ": " + cudaGetErrorString(pe) + "; ";
        continue;
      }
      DeviceInfo info;
      info.name = "cuda:" + std::to_string(i);
      info.family = "cuda";
      info.type = "gpu";
      info.auto_priority = 30;
      info.memory_bytes = p.totalGlobalMem;
      info.compute_units = p.multiProcessorCount;
      info.description = std::string(p.name) + ", compute capability " + std::to_string(p.major) + "." +
                         std::to_string(p.minor) + ", " + std::to_string(p.multiProcessorCount) + " SMs, " +
                         std::to_string(p.totalGlobalMem >> 20) + " MiB";
      // Only list the kernel when this binary carries code the GPU can run
      // (the fatbin's architectures, double atomicAdd needs sm_60+).
      const char* no_image = cudaSetDevice(i) == cudaSuccess ? cuda::kmeans_assign_probe() : "cudaSetDevice failed";
      if (no_image == nullptr)
        info.kernels = {KernelId::KMeansAssign, KernelId::TopKHistogram, KernelId::CsrKernelRows};
      else
        info.description += std::string(" (kernels unavailable: ") + no_image + ")";
      out.push_back(std::make_unique<CudaDevice>(i, std::move(info)));
    }
    if (out.empty()) why_ = "cuda: " + skipped;
    return out;
  }
  std::string why_none() const override { return why_; }

 private:
  std::string why_;
};

}  // namespace

ACCEL_REGISTER_BACKEND(30, CudaBackend, "cuda", true);

}  // namespace accel
