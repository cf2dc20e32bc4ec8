// A fixed set of threads running closures. Closures are queued under a key
// (a client, for the compute pool) and a free thread takes the next closure
// of the waiting key with the fewest closures running, among those the key
// served least recently (so keys take turns, and a key that has just arrived
// goes first): a key's first closure waits only for closures already
// running, never behind another key's flood. Under one key the order is
// FIFO.
#ifndef BNN_SERVER_COMMON_THREAD_POOL_H_
#define BNN_SERVER_COMMON_THREAD_POOL_H_

#include <cstdint>
#include <deque>
#include <map>
#include <string>
#include <thread>
#include <vector>

#include <absl/base/thread_annotations.h>
#include <absl/functional/any_invocable.h>
#include <absl/strings/string_view.h>
#include <absl/synchronization/mutex.h>
#include <absl/time/time.h>

namespace bnn::server {

// Thread-safe.
class ThreadPool {
 public:
  explicit ThreadPool(int num_threads);
  // Runs every closure already scheduled, then joins the threads.
  ~ThreadPool();

  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  // Queues `task` behind the earlier tasks of `key`; it runs on one of the
  // pool's threads when `key`'s turn comes.
  void Schedule(absl::string_view key, absl::AnyInvocable<void() &&> task);
  // Schedule("", task): FIFO among the tasks scheduled this way.
  void Schedule(absl::AnyInvocable<void() &&> task) {
    Schedule("", std::move(task));
  }

  // Zero while some thread is idle; otherwise how long the most recently
  // started of the running tasks has run, i.e. for how long no thread has
  // been free (the health watchdog's measure of a wedged pool).
  absl::Duration AllBusyFor() const;
  // Tasks waiting for a thread.
  int64_t queued() const;
  int num_threads() const { return static_cast<int>(threads_.size()); }

 private:
  struct Key {
    std::deque<absl::AnyInvocable<void() &&>> pending;
    int running = 0;
    // When the key's latest task started (a count of started tasks); 0 for
    // none since the key was last idle.
    uint64_t last_start = 0;
  };

  void WorkLoop(int thread);
  bool HasWorkOrStopping() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  mutable absl::Mutex mu_;
  // Keys with pending or running tasks.
  std::map<std::string, Key, std::less<>> keys_ ABSL_GUARDED_BY(mu_);
  int64_t queued_ ABSL_GUARDED_BY(mu_) = 0;
  uint64_t starts_ ABSL_GUARDED_BY(mu_) = 0;
  // Per thread: when its current task started; InfinitePast while idle.
  std::vector<absl::Time> busy_since_ ABSL_GUARDED_BY(mu_);
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  std::vector<std::thread> threads_;
};

}  // namespace bnn::server

#endif  // BNN_SERVER_COMMON_THREAD_POOL_H_
