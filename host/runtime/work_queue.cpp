#include "accel/work_queue.hpp"

#include <chrono>

#include "accel/clock.hpp"

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
  // Timed in the submitter's time: a simulated process's virtual time
  // (accel/clock.hpp), in which its compute is instantaneous.
  std::packaged_task<void()> task([fn = std::move(fn), after = std::move(after), seconds, hook = clock_hook()] {
    for (const Event& e : after) e.wait();
    set_clock_hook(hook);  // this thread runs the submitter's work in the submitter's time
    const auto t0 = Clock::now();
    fn();
    *seconds = std::chrono::duration<double>(Clock::now() - t0).count();
    set_clock_hook(nullptr);
  });
  Event ev(task.get_future().share(), seconds);
  {
    std::lock_guard lock(mu_);
    tasks_.push_back(std::move(task));
  }
  cv_.notify_one();
  return ev;
}

void WorkQueue::run_here(const std::function<void()>& fn) {
  bool here = false;
  {
    std::lock_guard lock(mu_);
    here = !running_ && tasks_.empty();
    if (here) running_ = true;  // the queue's thread waits for fn
  }
  if (!here) {  // behind other work: in order, on the queue's thread
    submit(fn).wait();
    return;
  }
  struct Done {
    WorkQueue& q;
    ~Done() {
      {
        std::lock_guard lock(q.mu_);
        q.running_ = false;
      }
      q.cv_.notify_all();
    }
  } done{*this};
  fn();
}

void WorkQueue::run() {
  for (;;) {
    std::packaged_task<void()> task;
    {
      std::unique_lock lock(mu_);
      cv_.wait(lock, [this] { return (stop_ || !tasks_.empty()) && !running_; });
      if (tasks_.empty()) return;  // stop_ set and drained
      task = std::move(tasks_.front());
      tasks_.pop_front();
      running_ = true;
    }
    task();  // exceptions land in the future
    {
      std::lock_guard lock(mu_);
      running_ = false;
    }
  }
}

}  // namespace accel
