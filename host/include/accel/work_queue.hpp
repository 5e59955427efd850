// An in-order queue with one worker thread: what a CUDA stream or an XRT
// command queue gives a device, for backends that run on host threads.
#pragma once

#include <condition_variable>
#include <deque>
#include <functional>
#include <future>
#include <mutex>
#include <thread>
#include <vector>

#include "accel/device.hpp"

namespace accel {

class WorkQueue {
 public:
  WorkQueue();
  ~WorkQueue();
  WorkQueue(const WorkQueue&) = delete;
  WorkQueue& operator=(const WorkQueue&) = delete;

  // Runs fn after everything submitted before it and after the events in
  // `after` (waited on the queue's thread); the Event rethrows what fn or
  // one of them throws, and its seconds() are fn's alone.
  Event submit(std::function<void()> fn, std::vector<Event> after = {});
  // Runs fn and returns when it is done (rethrowing what it throws): on the
  // calling thread when nothing submitted is waiting or running, so a
  // caller that waits anyway skips two thread hand-offs (and the calling
  // thread's OpenMP team runs fn's loops); otherwise queued after them.
  // Work submitted meanwhile waits for fn.
  void run_here(const std::function<void()>& fn);

 private:
  void run();
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::packaged_task<void()>> tasks_;
  bool stop_ = false;
  bool running_ = false;  // a task, or run_here's fn, is running
  std::thread worker_;
};

// Buffer::write_async / read_async for buffers whose write and read block
// the caller: the same copy run on `copies`, a device's copy thread, beside
// its launch queue. A bad range or a failed copy is rethrown by the Event.
inline Event write_on(WorkQueue& copies, Buffer& b, const void* src, std::size_t bytes, std::size_t offset) {
  return copies.submit([&b, src, bytes, offset] { b.write(src, bytes, offset); });
}
inline Event read_on(WorkQueue& copies, const Buffer& b, void* dst, std::size_t bytes, std::size_t offset) {
  return copies.submit([&b, dst, bytes, offset] { b.read(dst, bytes, offset); });
}

}  // namespace accel
