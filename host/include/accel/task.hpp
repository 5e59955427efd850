// Computations that pause for what only their caller can give them, without
// a thread of their own: C++20 coroutines.
//
// The cluster engine drives its workloads round by round on one thread. A
// workload that computes between rounds (the SVM job's solver) is written
// as straight-line code that awaits each round's reports; the engine's
// decide() resumes it with them and takes the next decision it left in a
// Mailbox. The same code runs on one process with nothing to wait for: a
// Task whose awaits are all ready runs to its end on its first resume
// (run_to_end).
//
//   Task<T>    a lazily started coroutine returning T; `co_await task`
//              runs it inside the awaiting coroutine (a wait inside it
//              makes the whole chain wait);
//   Mailbox<O, I>: where a chain of tasks leaves an outgoing O and waits
//              for the incoming I (co_await box.exchange(o)); the caller
//              takes the O (outgoing()) and resumes with the I (deliver()).
#pragma once

#include <coroutine>
#include <exception>
#include <optional>
#include <stdexcept>
#include <utility>

namespace accel {

template <class T>
class Task;

namespace task_detail {

// The coroutine to run next when one ends outside its awaiter's inline
// run (resumed by a Mailbox delivery): run() takes it from here, so that a
// long chain of task ends never nests on the stack. (Symmetric transfer
// would do it, but GCC compiles it to a tail call only when optimising,
// and the sanitizer builds overflowed the stack.)
inline thread_local std::coroutine_handle<> next_to_run;

// Resumes h, then whatever the coroutines that end on the way hand on.
inline void run(std::coroutine_handle<> h) {
  h.resume();
  while (const std::coroutine_handle<> n = std::exchange(next_to_run, {})) n.resume();
}

// What every Task's promise holds besides its value.
struct PromiseBase {
  std::coroutine_handle<> continuation;  // the coroutine awaiting this one (none: the caller's resume())
  bool inline_run = false;               // its awaiter is running it inside co_await, on the stack
  std::exception_ptr error;

  std::suspend_always initial_suspend() noexcept { return {}; }
  // At its end a task returns to its awaiter's inline run, or hands its
  // awaiter to run().
  struct Final {
    bool await_ready() const noexcept { return false; }
    template <class P>
    void await_suspend(std::coroutine_handle<P> h) noexcept {
      const PromiseBase& p = h.promise();
      if (!p.inline_run && p.continuation) next_to_run = p.continuation;
    }
    void await_resume() const noexcept {}
  };
  Final final_suspend() noexcept { return {}; }
  void unhandled_exception() { error = std::current_exception(); }
};

template <class T>
struct Promise : PromiseBase {
  std::optional<T> value;
  Task<T> get_return_object();
  template <class U>
  void return_value(U&& v) {
    value.emplace(std::forward<U>(v));
  }
  T take() {
    if (error) std::rethrow_exception(error);
    return std::move(*value);
  }
};

template <>
struct Promise<void> : PromiseBase {
  Task<void> get_return_object();
  void return_void() {}
  void take() {
    if (error) std::rethrow_exception(error);
  }
};

}  // namespace task_detail

template <class T>
class [[nodiscard]] Task {
 public:
  using promise_type = task_detail::Promise<T>;
  using Handle = std::coroutine_handle<promise_type>;

  Task() = default;
  explicit Task(Handle h) : h_(h) {}
  Task(Task&& o) noexcept : h_(std::exchange(o.h_, {})) {}
  Task& operator=(Task&& o) noexcept {
    if (this != &o) {
      if (h_) h_.destroy();
      h_ = std::exchange(o.h_, {});
    }
    return *this;
  }
  Task(const Task&) = delete;
  Task& operator=(const Task&) = delete;
  // Destroying a suspended chain destroys the tasks it awaits with it.
  ~Task() {
    if (h_) h_.destroy();
  }

  bool valid() const { return static_cast<bool>(h_); }
  bool done() const { return h_ && h_.done(); }
  // Starts it; returns when it ends or waits at a Mailbox.
  void resume() {
    if (!h_ || h_.done()) throw std::logic_error("resuming a task that is not running");
    task_detail::run(h_);
  }
  // Its value once done (rethrows what it threw).
  T result() {
    if (!done()) throw std::logic_error("a task's result before its end");
    return h_.promise().take();
  }

  // Awaited by another task: runs inside it, on its stack. When it waits
  // at a Mailbox, its awaiter waits too, and it hands the awaiter on to
  // run() when it ends.
  bool await_ready() const noexcept { return false; }
  bool await_suspend(std::coroutine_handle<> awaiting) {
    auto& p = h_.promise();
    p.continuation = awaiting;
    p.inline_run = true;
    h_.resume();
    p.inline_run = false;
    return !h_.done();
  }
  T await_resume() { return h_.promise().take(); }

 private:
  Handle h_;
};

namespace task_detail {
template <class T>
Task<T> Promise<T>::get_return_object() {
  return Task<T>(std::coroutine_handle<Promise<T>>::from_promise(*this));
}
inline Task<void> Promise<void>::get_return_object() {
  return Task<void>(std::coroutine_handle<Promise<void>>::from_promise(*this));
}
}  // namespace task_detail

// Runs a task that has nothing to wait for to its end; a task that waits
// (it needs a caller to deliver to it) is a logic error here.
template <class T>
T run_to_end(Task<T> task) {
  task.resume();
  if (!task.done()) throw std::logic_error("a task waits for a delivery nobody makes");
  return task.result();
}

// One exchange at a time between a chain of tasks and its caller.
template <class Out, class In>
class Mailbox {
 public:
  struct Exchange {
    Mailbox& box;
    bool await_ready() const noexcept { return false; }
    void await_suspend(std::coroutine_handle<> h) noexcept { box.waiting_ = h; }
    In await_resume() {
      box.waiting_ = {};
      return std::move(*std::exchange(box.in_, std::nullopt));
    }
  };
  // Leaves `out` for the caller and waits for its answer.
  Exchange exchange(Out out) {
    out_ = std::move(out);
    in_.reset();
    return Exchange{*this};
  }
  bool waiting() const { return static_cast<bool>(waiting_); }
  // What the waiting task left (valid while it waits).
  Out take_outgoing() { return std::move(*std::exchange(out_, std::nullopt)); }
  // The answer: resumes the waiting task until it ends or waits again.
  void deliver(In in) {
    if (!waiting_) throw std::logic_error("a delivery with no task waiting");
    in_ = std::move(in);
    task_detail::run(waiting_);
  }

 private:
  std::coroutine_handle<> waiting_;
  std::optional<Out> out_;
  std::optional<In> in_;
};

}  // namespace accel
