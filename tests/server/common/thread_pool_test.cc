#include "server/common/thread_pool.h"

#include <atomic>
#include <thread>
#include <vector>

#include <absl/synchronization/mutex.h>
#include <absl/synchronization/notification.h>
#include <absl/time/clock.h>
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

TEST(ThreadPoolTest, ServesKeysInTurn) {
  // One thread, held busy while "flood" queues 6 tasks and "other" 2: the
  // other key's tasks run second and fourth, not after the whole flood.
  std::vector<std::string> order;
  absl::Notification started;
  absl::Notification release;
  {
    ThreadPool pool(1);
    pool.Schedule("first", [&] {
      started.Notify();
      release.WaitForNotification();
    });
    started.WaitForNotification();
    for (int i = 0; i < 6; ++i) {
      pool.Schedule("flood", [&order, i] {
        order.push_back("flood" + std::to_string(i));
      });
    }
    for (int i = 0; i < 2; ++i) {
      pool.Schedule("other", [&order, i] {
        order.push_back("other" + std::to_string(i));
      });
    }
    EXPECT_EQ(pool.queued(), 8);
    release.Notify();
  }
  EXPECT_THAT(order,
              ::testing::ElementsAre("flood0", "other0", "flood1", "other1",
                                     "flood2", "flood3", "flood4", "flood5"));
}

TEST(ThreadPoolTest, AKeyWithNothingRunningGoesFirst) {
  // Two threads both run key a's tasks when b's first task arrives behind
  // two more of a's: the next free thread takes b's.
  ThreadPool pool(2);
  absl::Mutex mu;
  std::vector<std::string> order;
  absl::Notification release[2];
  std::atomic<int> started{0};
  for (int i = 0; i < 2; ++i) {
    pool.Schedule("a", [&, i] {
      ++started;
      release[i].WaitForNotification();
    });
  }
  while (started < 2) std::this_thread::yield();
  auto record = [&](std::string name) {
    return [&, name] {
      absl::MutexLock lock(&mu);
      order.push_back(name);
    };
  };
  pool.Schedule("a", record("a3"));
  pool.Schedule("a", record("a4"));
  pool.Schedule("b", record("b1"));
  release[0].Notify();
  while (pool.queued() > 0) std::this_thread::yield();
  release[1].Notify();
  while (pool.AllBusyFor() > absl::ZeroDuration() || pool.queued() > 0) {
    std::this_thread::yield();
  }
  absl::SleepFor(absl::Milliseconds(20));
  absl::MutexLock lock(&mu);
  ASSERT_FALSE(order.empty());
  EXPECT_EQ(order.front(), "b1");
}

TEST(ThreadPoolTest, AllBusyForCountsOnlyWhileNoThreadIsFree) {
  ThreadPool pool(2);
  EXPECT_EQ(pool.AllBusyFor(), absl::ZeroDuration());
  absl::Notification release_first;
  absl::Notification release_second;
  std::atomic<int> started{0};
  pool.Schedule("a", [&] {
    ++started;
    release_first.WaitForNotification();
  });
  while (started < 1) std::this_thread::yield();
  absl::SleepFor(absl::Milliseconds(50));
  // One thread is still free.
  EXPECT_EQ(pool.AllBusyFor(), absl::ZeroDuration());
  const absl::Time second_scheduled = absl::Now();
  pool.Schedule("b", [&] {
    ++started;
    release_second.WaitForNotification();
  });
  while (started < 2) std::this_thread::yield();
  absl::SleepFor(absl::Milliseconds(100));
  // Measured from the later start, not the first task's.
  const absl::Duration busy = pool.AllBusyFor();
  EXPECT_GE(busy, absl::Milliseconds(100));
  EXPECT_LE(busy, absl::Now() - second_scheduled);
  release_first.Notify();
  while (pool.AllBusyFor() > absl::ZeroDuration()) std::this_thread::yield();
  release_second.Notify();
}

}  // namespace
}  // namespace bnn::server
