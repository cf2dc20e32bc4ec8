#include "server/common/thread_pool.h"

#include <utility>

#include "bnn/check.h"

namespace bnn::server {

ThreadPool::ThreadPool(int num_threads) {
  BNN_CHECK(num_threads >= 1);
  threads_.reserve(num_threads);
  for (int i = 0; i < num_threads; ++i) {
    threads_.emplace_back([this] { WorkLoop(); });
  }
}

ThreadPool::~ThreadPool() {
  {
    absl::MutexLock lock(&mu_);
    stopping_ = true;
  }
  for (std::thread& thread : threads_) thread.join();
}

void ThreadPool::Schedule(absl::AnyInvocable<void() &&> task) {
  absl::MutexLock lock(&mu_);
  BNN_CHECK(!stopping_);
  queue_.push_back(std::move(task));
}

bool ThreadPool::HasWorkOrStopping() const {
  return stopping_ || !queue_.empty();
}

void ThreadPool::WorkLoop() {
  while (true) {
    absl::AnyInvocable<void() &&> task;
    {
      absl::MutexLock lock(&mu_);
      mu_.Await(absl::Condition(this, &ThreadPool::HasWorkOrStopping));
      if (queue_.empty()) return;  // stopping and drained
      task = std::move(queue_.front());
      queue_.pop_front();
    }
    std::move(task)();
  }
}

}  // namespace bnn::server
