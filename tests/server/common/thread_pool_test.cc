#include "server/common/thread_pool.h"

#include <atomic>
#include <thread>
#include <vector>

#include <absl/synchronization/mutex.h>
#include <absl/synchronization/notification.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace bnn::server {
namespace {

TEST(ThreadPoolTest, OneThreadRunsTasksInOrder) {
  std::vector<int> order;
  {
    ThreadPool pool(1);
    for (int i = 0; i < 100; ++i) {
      pool.Schedule([&order, i] { order.push_back(i); });
    }
  }  // the destructor drains the queue
  ASSERT_EQ(order.size(), 100u);
  for (int i = 0; i < 100; ++i) EXPECT_EQ(order[i], i);
}

TEST(ThreadPoolTest, RunsTasksConcurrentlyOnItsThreads) {
  absl::Notification release;
  std::atomic<int> started{0};
  ThreadPool pool(3);
  for (int i = 0; i < 3; ++i) {
    pool.Schedule([&] {
      ++started;
      release.WaitForNotification();
    });
  }
  // All three block at once: each has its own thread.
  while (started < 3) std::this_thread::yield();
  release.Notify();
}

TEST(ThreadPoolTest, DestructorFinishesQueuedTasks) {
  std::atomic<int> done{0};
  {
    ThreadPool pool(2);
    for (int i = 0; i < 50; ++i) {
      pool.Schedule([&done] {
        std::this_thread::sleep_for(std::chrono::microseconds(100));
        ++done;
      });
    }
  }
  EXPECT_EQ(done, 50);
}

}  // namespace
}  // namespace bnn::server
