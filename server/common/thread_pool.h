// A fixed set of threads running closures. Closures are queued under a key
// (a client, for the compute pool). A free turn goes to the waiting closure
// whose key has the fewest closures running; among those, to a new closure
// before one that yielded (below), and among these to the one that has run
// least so far; then to the key that used the least time in turns lately
// (decaying with Options::usage_half_life); then to the key served least
// recently. Times are compared in whole Options::slice. So keys take turns,
// a key's first closure waits only for closures already running, never
// behind another key's flood, and a client that computes little goes before
// one that has been computing a lot. Under one key the order is FIFO.
//
// Time slicing (Options::max_yielded > 0): a long closure calls Yield()
// between units of its work. Once it has run for Options::slice and another
// key's closure waits, it gives up its turn as if it had finished, and
// continues on its thread when the rule above gives it a turn again. So a
// short closure of another key waits for about one unit of a long one's
// work, not for its whole length.
//
// Demotion (Options::demote_after > 0): a closure that has held turns for
// demote_after in all lowers its thread's CPU priority to
// Options::demoted_nice at its next Yield(), so that when the cores are
// saturated the short closures of other keys (and the server's other
// threads) get them first, as a multilevel feedback queue would. A thread
// cannot raise its priority again without privileges, so the thread of a
// demoted closure ends with it and a fresh thread at the pool's priority
// takes its place (started by the pool's spawner thread).
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
  struct Options {
    // Closures running at once (turns). >= 1.
    int num_threads = 1;
    // Closures that may wait in Yield() at once, each keeping its thread
    // (the pool starts num_threads + max_yielded threads). 0: Yield() never
    // gives up a turn. >= 0.
    int max_yielded = 0;
    // Least time a closure runs in one turn before Yield() gives it up; also
    // the unit in which keys' usage is compared.
    absl::Duration slice = absl::Milliseconds(5);
    // A key's time in turns counts half after this long. > 0.
    absl::Duration usage_half_life = absl::Seconds(1);
    // Time in turns after which a closure's thread is demoted (above).
    // ZeroDuration: never. >= 0.
    absl::Duration demote_after = absl::ZeroDuration();
    // Nice value of demoted closures' threads, 1..19.
    int demoted_nice = 10;
  };

  explicit ThreadPool(int num_threads) : ThreadPool(Options{num_threads}) {}
  explicit ThreadPool(const Options& options);
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

  // Called by a closure of this pool on its thread (elsewhere it returns
  // at once): if the closure has run for at least options.slice since its
  // turn began, another key's closure waits and fewer than
  // options.max_yielded closures are waiting in Yield(), gives up the turn
  // and returns when the closure gets one again. Returns how long it
  // waited (zero if it kept its turn).
  absl::Duration Yield();

  // Zero while a turn is free; otherwise how long ago the most recent of
  // the running closures got its turn, i.e. for how long no turn has been
  // free (the health watchdog's measure of a wedged pool).
  absl::Duration AllBusyFor() const;
  // Tasks waiting for their first turn.
  int64_t queued() const;
  int num_threads() const { return options_.num_threads; }
  // Threads started to replace those of demoted closures, since creation.
  int64_t threads_replaced() const;

 private:
  // A closure waiting in Yield() for its next turn.
  struct Resume {
    bool granted = false;
    // Time the closure has held turns so far.
    absl::Duration ran;
  };
  // A waiting closure: a new one (task) or one that yielded (resume).
  struct Entry {
    absl::AnyInvocable<void() &&> task;
    Resume* resume = nullptr;
  };
  struct Key {
    std::deque<Entry> pending;
    // Closures holding a turn.
    int running = 0;
    // When the key last got a turn or gave one up (a count of such
    // events); 0 for a key new to the pool.
    uint64_t last_start = 0;
    // Time in turns, decayed, as of usage_as_of.
    absl::Duration usage;
    absl::Time usage_as_of;
  };
  // A closure given a turn, for an idle thread to run.
  struct Ready {
    std::string key;
    absl::AnyInvocable<void() &&> task;
  };

  // Gives free turns to waiting entries by the rule above, and forgets
  // idle keys whose usage has decayed below a slice.
  void Dispatch() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // `key`'s usage at `now`.
  absl::Duration UsageAt(const Key& key, absl::Time now) const;
  // Ends a turn of `key` that began at `turn_start` (the closure finished
  // or yielded): adds its length to the key's usage.
  void EndTurn(Key* key, absl::Time turn_start, absl::Time now)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void WorkLoop(int thread);
  bool HasReadyOrDrained() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Starts a new WorkLoop for each slot whose thread ended after a demoted
  // closure; the only thread that assigns threads_ after construction.
  void SpawnLoop();
  bool HasReplacementOrStopping() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const Options options_;
  mutable absl::Mutex mu_;
  // Keys with waiting or running closures, or a recent usage.
  std::map<std::string, Key, std::less<>> keys_ ABSL_GUARDED_BY(mu_);
  // New closures waiting for their first turn.
  int64_t queued_ ABSL_GUARDED_BY(mu_) = 0;
  // Turns held (by running closures and those in ready_).
  int active_ ABSL_GUARDED_BY(mu_) = 0;
  // Closures waiting in Yield().
  int yielded_ ABSL_GUARDED_BY(mu_) = 0;
  uint64_t starts_ ABSL_GUARDED_BY(mu_) = 0;
  std::deque<Ready> ready_ ABSL_GUARDED_BY(mu_);
  // Per thread: when its closure's current turn began; InfinitePast while
  // the thread is idle or waits in Yield().
  std::vector<absl::Time> busy_since_ ABSL_GUARDED_BY(mu_);
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  // Slots whose thread has ended after a demoted closure, for SpawnLoop.
  std::vector<int> replace_ ABSL_GUARDED_BY(mu_);
  int64_t threads_replaced_ ABSL_GUARDED_BY(mu_) = 0;
  // Written by the constructor, then by SpawnLoop only (the destructor
  // joins the spawner before it touches them).
  std::vector<std::thread> threads_;
  std::thread spawner_;
};

}  // namespace bnn::server

#endif  // BNN_SERVER_COMMON_THREAD_POOL_H_
