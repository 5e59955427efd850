// accel/task.hpp: coroutine tasks that pause for what their caller gives
// them (the cluster engine's step API). Chains of tasks run to their end
// when nothing waits, pause at a mailbox exchange and go on when the
// caller delivers, carry exceptions to the caller, and can be destroyed
// while paused.
#include "accel/task.hpp"

#include <gtest/gtest.h>

#include <stdexcept>
#include <string>
#include <vector>

namespace accel {
namespace {

using Box = Mailbox<int, int>;

Task<int> add(int a, int b) { co_return a + b; }

Task<int> nested_sum(int n) {
  int s = 0;
  for (int i = 0; i < n; ++i) s += co_await add(i, 1);
  co_return s;
}

TEST(Task, RunsToItsEndWhenNothingWaits) {
  EXPECT_EQ(run_to_end(nested_sum(4)), 1 + 2 + 3 + 4);
}

// Asks the caller to double each value; the answers summed.
Task<int> ask(Box& box, int v) { co_return co_await box.exchange(v); }

Task<int> asks(Box& box, std::vector<int> values) {
  int s = 0;
  for (const int v : values) s += co_await ask(box, v);
  co_return s;
}

TEST(Task, PausesAtEachExchangeAndGoesOnWhenTheCallerDelivers) {
  Box box;
  Task<int> t = asks(box, {1, 2, 3});
  t.resume();
  std::vector<int> seen;
  while (box.waiting()) {
    EXPECT_FALSE(t.done());
    const int v = box.take_outgoing();
    seen.push_back(v);
    box.deliver(2 * v);
  }
  ASSERT_TRUE(t.done());
  EXPECT_EQ(seen, (std::vector<int>{1, 2, 3}));
  EXPECT_EQ(t.result(), 12);
}

Task<int> fails_after_one(Box& box) {
  co_await box.exchange(1);
  throw std::runtime_error("the second step failed");
}

Task<int> outer(Box& box) { co_return 1 + co_await fails_after_one(box); }

TEST(Task, AnExceptionReachesTheCallerThroughTheChain) {
  Box box;
  Task<int> t = outer(box);
  t.resume();
  ASSERT_TRUE(box.waiting());
  (void)box.take_outgoing();
  box.deliver(0);
  ASSERT_TRUE(t.done());
  EXPECT_THROW(t.result(), std::runtime_error);
}

TEST(Task, RunToEndRefusesATaskThatWaits) {
  Box box;
  EXPECT_THROW(run_to_end(asks(box, {5})), std::logic_error);
}

// A paused chain destroyed with its task frees every frame (the sanitizer
// builds check the leak) and runs the destructors of what they hold.
struct Flag {
  bool* set;
  ~Flag() { *set = true; }
};

Task<int> holds(Box& box, bool* destroyed) {
  Flag f{destroyed};
  co_return co_await ask(box, 7);
}

TEST(Task, APausedChainCanBeDestroyed) {
  bool destroyed = false;
  {
    Box box;
    Task<int> t = holds(box, &destroyed);
    t.resume();
    ASSERT_TRUE(box.waiting());
    EXPECT_EQ(box.take_outgoing(), 7);
  }
  EXPECT_TRUE(destroyed);
}

TEST(Task, MisuseIsALogicError) {
  Box box;
  EXPECT_THROW(box.deliver(1), std::logic_error);
  Task<int> t = add(1, 2);
  EXPECT_THROW(t.result(), std::logic_error);
  t.resume();
  EXPECT_THROW(t.resume(), std::logic_error);
  EXPECT_EQ(t.result(), 3);
}

}  // namespace
}  // namespace accel
