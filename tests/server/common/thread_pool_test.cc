#include "server/common/thread_pool.h"

#include <algorithm>
#include <atomic>
#include <functional>
#include <iostream>
#include <memory>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include <absl/strings/str_cat.h>
#include <absl/synchronization/blocking_counter.h>
#include <absl/synchronization/mutex.h>
#include <absl/synchronization/notification.h>
#include <absl/time/clock.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "server/common/thread_priority.h"

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

TEST(ThreadPoolTest, AKeyThatComputedLittleGoesBeforeOneThatComputedALot) {
  // "heavy" has just run for 100 ms, "light" not at all: when both wait,
  // light goes first, though heavy queued first and its name sorts first.
  std::vector<std::string> order;
  {
    ThreadPool pool(1);
    absl::Notification heavy_done;
    pool.Schedule("heavy", [&] {
      absl::SleepFor(absl::Milliseconds(100));
      heavy_done.Notify();
    });
    heavy_done.WaitForNotification();
    absl::Notification started, release;
    pool.Schedule("blocker", [&] {
      started.Notify();
      release.WaitForNotification();
    });
    started.WaitForNotification();
    pool.Schedule("heavy", [&] { order.push_back("heavy"); });
    pool.Schedule("light", [&] { order.push_back("light"); });
    release.Notify();
  }
  EXPECT_THAT(order, ::testing::ElementsAre("light", "heavy"));
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

// --- Time slicing -----------------------------------------------------------

TEST(ThreadPoolTest, YieldGivesTheTurnToAnotherKeysWaitingTask) {
  // One turn: "long" yields once "short" waits; "short" runs on the spare
  // thread meanwhile, and "long" continues after it.
  absl::Mutex mu;
  std::vector<std::string> order;
  const auto record = [&](std::string what) {
    absl::MutexLock lock(&mu);
    order.push_back(std::move(what));
  };
  absl::Duration waited;
  {
    ThreadPool pool(ThreadPool::Options{1, 1, absl::ZeroDuration()});
    absl::Notification started, short_queued;
    pool.Schedule("long", [&] {
      record("long begins");
      started.Notify();
      short_queued.WaitForNotification();
      waited = pool.Yield();
      record("long ends");
    });
    started.WaitForNotification();
    pool.Schedule("short", [&] {
      absl::SleepFor(absl::Milliseconds(20));
      record("short");
    });
    short_queued.Notify();
  }  // the destructor runs both
  EXPECT_THAT(order,
              ::testing::ElementsAre("long begins", "short", "long ends"));
  EXPECT_GE(waited, absl::Milliseconds(20));
}

TEST(ThreadPoolTest, YieldKeepsTheTurnUnlessAnotherKeyWaits) {
  std::vector<std::string> order;
  {
    ThreadPool pool(ThreadPool::Options{1, 1, absl::ZeroDuration()});
    absl::Notification queued;
    pool.Schedule("a", [&] {
      queued.WaitForNotification();
      // Only the key's own next task waits: it stays behind this one.
      EXPECT_EQ(pool.Yield(), absl::ZeroDuration());
      order.push_back("a1");
    });
    pool.Schedule("a", [&] { order.push_back("a2"); });
    queued.Notify();
  }
  EXPECT_THAT(order, ::testing::ElementsAre("a1", "a2"));
}

TEST(ThreadPoolTest, YieldKeepsTheTurnWithinTheSlice) {
  ThreadPool pool(ThreadPool::Options{1, 1, absl::Hours(1)});
  absl::Notification started, other_queued, done;
  pool.Schedule("a", [&] {
    started.Notify();
    other_queued.WaitForNotification();
    EXPECT_EQ(pool.Yield(), absl::ZeroDuration());
    done.Notify();
  });
  started.WaitForNotification();
  pool.Schedule("b", [&] { EXPECT_TRUE(done.HasBeenNotified()); });
  other_queued.Notify();
  done.WaitForNotification();
}

TEST(ThreadPoolTest, YieldOutsideThePoolOrWithoutSpareThreadsReturnsAtOnce) {
  ThreadPool pool(1);  // max_yielded 0
  EXPECT_EQ(pool.Yield(), absl::ZeroDuration());
  absl::Notification started, other_queued, done;
  pool.Schedule("a", [&] {
    started.Notify();
    other_queued.WaitForNotification();
    EXPECT_EQ(pool.Yield(), absl::ZeroDuration());
    done.Notify();
  });
  started.WaitForNotification();
  pool.Schedule("b", [&] { EXPECT_TRUE(done.HasBeenNotified()); });
  other_queued.Notify();
  done.WaitForNotification();
}

TEST(ThreadPoolTest, AtMostMaxYieldedTasksWaitAndTurnsStayBounded) {
  // Two turns, one spare thread: of three long tasks that each yield
  // repeatedly while others wait, at most two run at any moment.
  ThreadPool pool(ThreadPool::Options{2, 1, absl::ZeroDuration()});
  std::atomic<int> running{0}, most{0}, yields{0};
  absl::BlockingCounter done(3);
  for (const char* key : {"a", "b", "c"}) {
    pool.Schedule(key, [&] {
      for (int i = 0; i < 50; ++i) {
        const int now = ++running;
        int seen = most;
        while (now > seen && !most.compare_exchange_weak(seen, now)) {
        }
        absl::SleepFor(absl::Microseconds(200));
        --running;
        if (pool.Yield() > absl::ZeroDuration()) ++yields;
      }
      done.DecrementCount();
    });
  }
  done.Wait();
  EXPECT_LE(most, 2);
  EXPECT_GT(yields, 0);
}

TEST(ThreadPoolTest, AllBusyForIgnoresTasksWaitingInYield) {
  ThreadPool pool(ThreadPool::Options{1, 1, absl::ZeroDuration()});
  absl::Notification started, other_queued, other_running, release;
  pool.Schedule("a", [&] {
    started.Notify();
    other_queued.WaitForNotification();
    pool.Yield();
  });
  started.WaitForNotification();
  absl::SleepFor(absl::Milliseconds(100));
  EXPECT_GE(pool.AllBusyFor(), absl::Milliseconds(100));
  pool.Schedule("b", [&] {
    other_running.Notify();
    release.WaitForNotification();
  });
  other_queued.Notify();
  other_running.WaitForNotification();
  // b's turn has just begun; a's wait does not count.
  EXPECT_LT(pool.AllBusyFor(), absl::Milliseconds(100));
  release.Notify();
}

TEST(ThreadPoolTest, ShortTasksWaitForAboutOneUnitOfLongOnes) {
  // One turn, three keys running tasks of 300 units of 1 ms each, yielding
  // between units, one after another; short tasks of four other keys wait
  // for about one unit, never for a long task (300 ms). (With one spare
  // thread, two long tasks took turns without yielding to the short ones.)
  std::atomic<bool> stop{false};
  auto pool = std::make_unique<ThreadPool>(
      ThreadPool::Options{1, 4, absl::Milliseconds(1)});
  // The tasks hold the pool by a plain pointer: pool.reset() below nulls the
  // unique_ptr before the destructor finishes the running tasks.
  ThreadPool* const pool_ptr = pool.get();
  std::function<void(std::string)> run_long = [&](std::string key) {
    if (stop) return;
    pool_ptr->Schedule(key, [&, key] {
      for (int i = 0; i < 300; ++i) {
        absl::SleepFor(absl::Milliseconds(1));
        pool_ptr->Yield();
      }
      run_long(key);
    });
  };
  for (const char* key : {"long1", "long2", "long3"}) run_long(key);
  std::vector<double> waits_ms;
  for (int i = 0; i < 60; ++i) {
    const absl::Time scheduled = absl::Now();
    absl::Notification done;
    pool->Schedule(absl::StrCat("short", i % 4), [&] {
      waits_ms.push_back(absl::ToDoubleMilliseconds(absl::Now() - scheduled));
      done.Notify();
    });
    done.WaitForNotification();
    absl::SleepFor(absl::Milliseconds(3));
  }
  stop = true;
  pool.reset();  // finishes the long tasks running
  std::sort(waits_ms.begin(), waits_ms.end());
  const double p90 = waits_ms[waits_ms.size() * 9 / 10];
  std::cerr << "short tasks waited: median " << waits_ms[waits_ms.size() / 2]
            << " ms, p90 " << p90 << " ms, max " << waits_ms.back() << " ms\n";
  EXPECT_LT(p90, 25);
  EXPECT_LT(waits_ms.back(), 150);
}

}  // namespace
}  // namespace bnn::server

namespace bnn::server {
namespace {

// Demotion: a closure that has held its turn for demote_after computes on at
// demoted_nice from its next Yield(); its thread is replaced when it ends,
// so later closures run at the pool's priority again.
TEST(ThreadPoolTest, ALongClosureIsDemotedAndItsThreadReplaced) {
  const int base = ThreadNice();
  if (base >= 7) GTEST_SKIP() << "the test itself runs at nice " << base;
  ThreadPool::Options options{1, 1, absl::ZeroDuration()};
  options.demote_after = absl::Milliseconds(5);
  options.demoted_nice = 7;
  ThreadPool pool(options);
  std::atomic<int> before{-1}, after{-1};
  absl::Notification long_done;
  pool.Schedule("long", [&] {
    before = ThreadNice();
    absl::SleepFor(absl::Milliseconds(10));
    pool.Yield();
    after = ThreadNice();
    long_done.Notify();
  });
  long_done.WaitForNotification();
  EXPECT_EQ(before.load(), base);
  EXPECT_EQ(after.load(), 7);
  // Every later closure (on whichever of the pool's threads) runs at the
  // pool's priority: the demoted thread was replaced, not reused.
  std::vector<int> later(20, -1);
  for (int i = 0; i < 20; ++i) {
    absl::Notification done;
    pool.Schedule(absl::StrCat("short", i), [&, i] {
      later[i] = ThreadNice();
      done.Notify();
    });
    done.WaitForNotification();
  }
  EXPECT_THAT(later, ::testing::Each(base));
  const absl::Time deadline = absl::Now() + absl::Seconds(10);
  while (pool.threads_replaced() < 1 && absl::Now() < deadline) {
    absl::SleepFor(absl::Milliseconds(1));
  }
  EXPECT_EQ(pool.threads_replaced(), 1);
}

TEST(ThreadPoolTest, ClosuresShorterThanDemoteAfterKeepTheirPriority) {
  const int base = ThreadNice();
  if (base >= 7) GTEST_SKIP() << "the test itself runs at nice " << base;
  ThreadPool::Options options{2, 2, absl::ZeroDuration()};
  options.demote_after = absl::Seconds(10);
  options.demoted_nice = 7;
  std::atomic<int> demoted{0};
  {
    ThreadPool pool(options);
    for (int i = 0; i < 50; ++i) {
      pool.Schedule(absl::StrCat("k", i % 3), [&] {
        pool.Yield();
        if (ThreadNice() != base) ++demoted;
      });
    }
    // The destructor runs them all; no thread ends early.
  }
  EXPECT_EQ(demoted.load(), 0);
}

// A pool destroyed while a demoted closure runs finishes it and every queued
// closure, and joins cleanly (the spawner and the replaced thread).
TEST(ThreadPoolTest, DestructorWaitsForDemotedClosuresAndTheirReplacements) {
  std::atomic<int> ran{0};
  {
    ThreadPool::Options options{1, 1, absl::ZeroDuration()};
    options.demote_after = absl::Milliseconds(1);
    ThreadPool pool(options);
    for (int i = 0; i < 10; ++i) {
      pool.Schedule(absl::StrCat("k", i % 2), [&] {
        absl::SleepFor(absl::Milliseconds(2));
        pool.Yield();
        ++ran;
      });
    }
  }
  EXPECT_EQ(ran.load(), 10);
}

}  // namespace
}  // namespace bnn::server
