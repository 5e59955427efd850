// The device abstraction every backend implements: Backend -> Device -> Buffer,
// with asynchronous launches that return an Event (ggml's registry layering,
// XRT's explicit host<->device synchronisation).
#pragma once

#include <cstddef>
#include <chrono>
#include <cstdint>
#include <future>
#include <memory>
#include <string>
#include <vector>

#include "accel/kernels.hpp"

namespace accel {

// What a device says about itself; the registry's policy ("all", "auto",
// names) reads these facts and never a list of backends.
struct DeviceInfo {
  std::string name;         // unique within a process, e.g. "cpu", "cuda:0", "fpga-emu", "opencl:1"
  std::string family;       // what --device names every such device by: "cpu", "cuda", "fpga", "opencl", ...
  std::string type = "cpu";  // "cpu" | "gpu" | "accelerator" (OpenCL's device types)
  // Computes on the host's cores beside the cpu device (an emulator, an
  // OpenCL CPU runtime): it would only take cores from the cpu device, so
  // it joins "all" and "auto" only when named: sharing the cores, the two
  // together run slower than the cpu device alone.
  bool on_host_cores = false;
  int auto_priority = 0;    // "auto" takes the devices of the highest priority present
  std::string description;  // model, SIMD level, platform ...
  std::size_t memory_bytes = 0;
  int compute_units = 0;
  std::vector<KernelId> kernels;
  // The shapes its kernels refuse, for people (on-chip buffers bound them on
  // FPGAs): e.g. "kmeans_assign: k <= 256, d <= 1024"; empty: none.
  // Programs ask cannot_run().
  std::string limits;
  // The same bounds as numbers (0: none): kmeans_assign's k and d. A device
  // that refuses a shape within them is wrong (the conformance tests fail it).
  std::int64_t kmeans_max_k = 0, kmeans_max_d = 0;
};

// Completion of an asynchronous launch or copy. wait() rethrows the device's error;
// seconds() is how long the device spent on it (valid after wait()), like
// cudaEventElapsedTime, so the performance model sees device time even when
// several devices run at once.
class Event {
 public:
  Event() = default;
  Event(std::shared_future<void> f, std::shared_ptr<const double> seconds)
      : future_(std::move(f)), seconds_(std::move(seconds)) {}
  void wait() const {
    if (future_.valid()) future_.get();
  }
  bool ready() const {
    return !future_.valid() || future_.wait_for(std::chrono::seconds(0)) == std::future_status::ready;
  }
  double seconds() const { return seconds_ ? *seconds_ : 0.0; }

 private:
  std::shared_future<void> future_;
  std::shared_ptr<const double> seconds_;
};

// Waits for every event, then rethrows the first error among them (none is
// left running into memory the caller may free while unwinding).
void wait_all(const std::vector<Event>& events);

// Device memory. Backends whose memory the host can address directly return a
// pointer from host_ptr(); the others return nullptr and need write()/read().
class Buffer {
 public:
  virtual ~Buffer() = default;
  virtual std::size_t size() const = 0;
  virtual void write(const void* src, std::size_t bytes, std::size_t offset = 0) = 0;
  virtual void read(void* dst, std::size_t bytes, std::size_t offset = 0) const = 0;
  virtual void* host_ptr() { return nullptr; }
  // Asynchronous copies, beside the device's launches: they start now on
  // the device's copy queue (a CUDA stream, an OpenCL queue of their own,
  // a host thread) and the Event completes when the bytes have arrived.
  // src / dst must stay alive and unchanged until then. A launch that reads
  // what a copy writes names the copy's Event in Device::launch's `after`;
  // a read of a launch's output starts after that launch's Event. The
  // defaults copy at once and return a completed Event.
  virtual Event write_async(const void* src, std::size_t bytes, std::size_t offset = 0);
  virtual Event read_async(void* dst, std::size_t bytes, std::size_t offset = 0) const;
  // `rows` pieces of `width` bytes, the r-th from offset + r * pitch, packed
  // into dst: a sample of a large buffer in one copy (cudaMemcpy2D) instead
  // of one round trip a piece. The default reads piece by piece.
  virtual void read_strided(void* dst, std::size_t width, std::size_t offset, std::size_t pitch,
                            std::size_t rows) const;
  // The bytes from `offset` on changed in place: wrapped host memory that
  // its owner rewrote (wrap_host) between launches. What a driver derived
  // from the bytes before them stays valid; the rest is derived again.
  virtual void changed_from(std::size_t offset) { (void)offset; }
};

class Device {
 public:
  virtual ~Device() = default;
  virtual const DeviceInfo& info() const = 0;
  virtual std::unique_ptr<Buffer> allocate(std::size_t bytes) = 0;
  // A buffer over host memory the caller keeps alive, without a copy, for
  // devices that share host memory; nullptr where the device cannot.
  virtual std::unique_ptr<Buffer> wrap_host(void* /*ptr*/, std::size_t /*bytes*/) { return nullptr; }
  // A buffer over this device's memory that someone else allocated and
  // keeps alive (a CUDA tensor's storage), without a copy; nullptr where the
  // device has no such memory, DeviceError when ptr is not this device's.
  virtual std::unique_ptr<Buffer> wrap_device(void* /*ptr*/, std::size_t /*bytes*/) { return nullptr; }
  // Enqueues the kernel; launches on one device run in order, each after
  // the events in `after` (the copies that fill its inputs) complete.
  Event launch(const KernelArgs& args, std::vector<Event> after = {}) { return enqueue(args, std::move(after)); }
  // launch(args).wait(), which a host backend may run on the calling thread
  // when nothing else is queued: a caller that waits at once then skips the
  // hand-offs to the queue's thread and back.
  void launch_and_wait(const KernelArgs& args) { run_now(args); }
  // Why this device cannot run a launch of this shape (only the sizes in
  // `shape` are read); empty when it can.
  virtual std::string cannot_run(const KernelArgs& shape) const {
    (void)shape;
    return {};
  }
  // Private state a kernel keeps between launches over the same data, for
  // launches of this shape (only its sizes are read), in the device's own
  // layout (KMeansAssignArgs::state); nullptr where the device keeps none.
  virtual std::unique_ptr<Buffer> create_state(const KernelArgs& shape) {
    (void)shape;
    return nullptr;
  }

  bool supports(KernelId id) const;

 protected:
  // The backend's launch: the kernel runs after every event in `after`
  // (waited on its queue, so launches stay in order), and an error of one
  // of them is the launch's error.
  virtual Event enqueue(const KernelArgs& args, std::vector<Event> after) = 0;
  virtual void run_now(const KernelArgs& args) { enqueue(args, {}).wait(); }
};

class Backend {
 public:
  virtual ~Backend() = default;
  virtual std::string name() const = 0;
  // Never throws for missing hardware or drivers: returns no devices and
  // leaves the reason in why_none().
  virtual std::vector<std::unique_ptr<Device>> discover() = 0;
  virtual std::string why_none() const { return {}; }
};

}  // namespace accel
