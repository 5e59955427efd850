// An in-order queue with one worker thread: what a CUDA stream or an XRT
// command queue gives a device, for backends that run on host threads.
#pragma once

#include <condition_variable>
#include <deque>
#include <functional>
#include <future>
#include <mutex>
#include <thread>

#include "accel/device.hpp"

namespace accel {

class WorkQueue {
 public:
  WorkQueue();
  ~WorkQueue();
  WorkQueue(const WorkQueue&) = delete;
  WorkQueue& operator=(const WorkQueue&) = delete;

  // Runs fn after everything submitted before it; the Event rethrows what fn throws.
  Event submit(std::function<void()> fn);

 private:
  void run();
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::packaged_task<void()>> tasks_;
  bool stop_ = false;
  std::thread worker_;
};

}  // namespace accel
