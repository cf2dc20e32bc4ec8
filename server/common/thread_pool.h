// A fixed set of threads running closures in FIFO order.
#ifndef BNN_SERVER_COMMON_THREAD_POOL_H_
#define BNN_SERVER_COMMON_THREAD_POOL_H_

#include <deque>
#include <thread>
#include <vector>

#include <absl/base/thread_annotations.h>
#include <absl/functional/any_invocable.h>
#include <absl/synchronization/mutex.h>

namespace bnn::server {

// Thread-safe.
class ThreadPool {
 public:
  explicit ThreadPool(int num_threads);
  // Runs every closure already scheduled, then joins the threads.
  ~ThreadPool();

  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  // Queues `task`; it runs on one of the pool's threads.
  void Schedule(absl::AnyInvocable<void() &&> task);

 private:
  void WorkLoop();
  bool HasWorkOrStopping() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  absl::Mutex mu_;
  std::deque<absl::AnyInvocable<void() &&>> queue_ ABSL_GUARDED_BY(mu_);
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  std::vector<std::thread> threads_;
};

}  // namespace bnn::server

#endif  // BNN_SERVER_COMMON_THREAD_POOL_H_
