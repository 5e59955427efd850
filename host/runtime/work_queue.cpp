#include "accel/work_queue.hpp"

#include <chrono>

namespace accel {

WorkQueue::WorkQueue() : worker_([this] { run(); }) {}

WorkQueue::~WorkQueue() {
  {
    std::lock_guard lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  worker_.join();
}

Event WorkQueue::submit(std::function<void()> fn, std::vector<Event> after) {
  auto seconds = std::make_shared<double>(0.0);
  std::packaged_task<void()> task([fn = std::move(fn), after = std::move(after), seconds] {
    for (const Event& e : after) e.wait();
    const auto t0 = std::chrono::steady_clock::now();
    fn();
    *seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  });
  Event ev(task.get_future().share(), seconds);
  {
    std::lock_guard lock(mu_);
    tasks_.push_back(std::move(task));
  }
  cv_.notify_one();
  return ev;
}

void WorkQueue::run() {
  for (;;) {
    std::packaged_task<void()> task;
    {
      std::unique_lock lock(mu_);
      cv_.wait(lock, [this] { return stop_ || !tasks_.empty(); });
      if (tasks_.empty()) return;  // stop_ set and drained
      task = std::move(tasks_.front());
      tasks_.pop_front();
    }
    task();  // exceptions land in the future
  }
}

}  // namespace accel
