#include "server/common/thread_pool.h"

#include <algorithm>
#include <utility>

#include <absl/time/clock.h>

#include "bnn/check.h"

namespace bnn::server {

ThreadPool::ThreadPool(int num_threads) {
  BNN_CHECK(num_threads >= 1);
  {
    absl::MutexLock lock(&mu_);
    busy_since_.assign(num_threads, absl::InfinitePast());
  }
  threads_.reserve(num_threads);
  for (int i = 0; i < num_threads; ++i) {
    threads_.emplace_back([this, i] { WorkLoop(i); });
  }
}

ThreadPool::~ThreadPool() {
  {
    absl::MutexLock lock(&mu_);
    stopping_ = true;
  }
  for (std::thread& thread : threads_) thread.join();
}

void ThreadPool::Schedule(absl::string_view key,
                          absl::AnyInvocable<void() &&> task) {
  absl::MutexLock lock(&mu_);
  BNN_CHECK(!stopping_);
  keys_[std::string(key)].pending.push_back(std::move(task));
  ++queued_;
}

bool ThreadPool::HasWorkOrStopping() const { return stopping_ || queued_ > 0; }

absl::Duration ThreadPool::AllBusyFor() const {
  absl::MutexLock lock(&mu_);
  for (const absl::Time since : busy_since_) {
    if (since == absl::InfinitePast()) return absl::ZeroDuration();
  }
  return absl::Now() -
         *std::max_element(busy_since_.begin(), busy_since_.end());
}

int64_t ThreadPool::queued() const {
  absl::MutexLock lock(&mu_);
  return queued_;
}

void ThreadPool::WorkLoop(int thread) {
  std::string key;  // of the task this thread ran last, if `ran`
  bool ran = false;
  while (true) {
    absl::AnyInvocable<void() &&> task;
    {
      absl::MutexLock lock(&mu_);
      busy_since_[thread] = absl::InfinitePast();
      if (ran) {
        const auto done = keys_.find(key);
        if (--done->second.running == 0 && done->second.pending.empty()) {
          keys_.erase(done);
        }
      }
      mu_.Await(absl::Condition(this, &ThreadPool::HasWorkOrStopping));
      if (queued_ == 0) return;  // stopping and drained
      auto next = keys_.end();
      for (auto it = keys_.begin(); it != keys_.end(); ++it) {
        const Key& k = it->second;
        if (k.pending.empty()) continue;
        if (next == keys_.end() || k.running < next->second.running ||
            (k.running == next->second.running &&
             k.last_start < next->second.last_start)) {
          next = it;
        }
      }
      key = next->first;
      Key& state = next->second;
      task = std::move(state.pending.front());
      state.pending.pop_front();
      ++state.running;
      state.last_start = ++starts_;
      ran = true;
      --queued_;
      busy_since_[thread] = absl::Now();
    }
    std::move(task)();
  }
}

}  // namespace bnn::server
