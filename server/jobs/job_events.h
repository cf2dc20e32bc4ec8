// What WatchJob streams: the events of the jobs this process runs (progress,
// at most kMaxProgressRate per second per job, and state changes), each job's
// most recent kMaxKeptEvents kept in memory so that a watcher that
// reconnects with the last step it saw continues without a gap. Watchers
// are woken by a callback, never by polling.
#ifndef BNN_SERVER_JOBS_JOB_EVENTS_H_
#define BNN_SERVER_JOBS_JOB_EVENTS_H_

#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include <absl/base/thread_annotations.h>
#include <absl/strings/string_view.h>
#include <absl/synchronization/mutex.h>
#include <absl/time/time.h>

#include "store/store.pb.h"

namespace bnn::server {

struct JobEvent {
  enum class Kind {
    // The job as it was when a watch started.
    kCurrent,
    // Training progressed.
    kProgress,
    // The job changed state.
    kState,
  };
  Kind kind = Kind::kProgress;
  // Per job, from 1, in publishing order (0 for kCurrent).
  uint64_t seq = 0;
  store::JobRecord::State state = store::JobRecord::STATE_UNSPECIFIED;
  int epoch = 0;
  int64_t step = 0;
  int64_t total_steps = 0;
  double loss = 0.0;
  // Since the previous progress event; 0 when unknown.
  double steps_per_second = 0.0;
  double eta_seconds = 0.0;
  int64_t unix_ms = 0;
  std::string error;        // FAILED
  std::string snapshot_id;  // SUCCEEDED
};

// A kState (or kCurrent, with `kind`) event describing `job` as recorded.
JobEvent EventOfRecord(const store::JobRecord& job,
                       JobEvent::Kind kind = JobEvent::Kind::kState);

// Thread-safe.
class JobEvents {
 public:
  // Events kept per job for reconnecting watchers: at kMaxProgressRate,
  // the last ~200 s of a job.
  static constexpr int kMaxKeptEvents = 2048;
  // Progress events per second and job, at most (the job runner's rate).
  static constexpr int kMaxProgressRate = 10;

  // Called on the publishing thread without the hub's lock held, after
  // events were published for the job it watches, and when the hub closes;
  // must not block (it may call Take and Closing).
  using Wake = std::function<void()>;

  // What a new watch starts from.
  struct Start {
    // Unsubscribe with it.
    uint64_t subscription = 0;
    // The kept events with step > after_step (none without after_step), in
    // order; later events have seq > last_seq.
    std::vector<JobEvent> backlog;
    uint64_t last_seq = 0;
  };

  // Subscribes `wake` to the events of `job_id` (which need not have any
  // yet).
  Start Watch(absl::string_view job_id, std::optional<int64_t> after_step,
              Wake wake);
  // After Unsubscribe returns, `wake` is no longer called (a call already
  // running may finish).
  void Unsubscribe(absl::string_view job_id, uint64_t subscription);

  // The job's kept events with seq > *last_seq, in order; advances
  // *last_seq to the last one. Events dropped from the kept window before a
  // watcher took them are skipped.
  std::vector<JobEvent> Take(absl::string_view job_id, uint64_t* last_seq);

  // Numbers and keeps `event` and wakes the job's watchers. A kState event
  // of a final state (IsFinalJobState) ends the job's entry: its watchers
  // take that event last.
  void Publish(absl::string_view job_id, JobEvent event);

  // The server is shutting down: wakes every watcher; from now on
  // Closing(job) is true for every job that is not running (no RUNNING
  // state event since its last other state event).
  void Close();
  bool Closing(absl::string_view job_id) const;

  // Watchers subscribed, for tests.
  int watchers() const;

 private:
  struct Entry {
    std::deque<JobEvent> events;
    uint64_t next_seq = 1;
    bool running = false;
    std::map<uint64_t, Wake> watchers;
  };

  // Copies of the wake-ups of `entry`'s watchers (or of every watcher).
  static std::vector<Wake> WakesOf(const Entry& entry);

  mutable absl::Mutex mu_;
  bool closing_ ABSL_GUARDED_BY(mu_) = false;
  uint64_t next_subscription_ ABSL_GUARDED_BY(mu_) = 1;
  std::map<std::string, Entry, std::less<>> jobs_ ABSL_GUARDED_BY(mu_);
};

}  // namespace bnn::server

#endif  // BNN_SERVER_JOBS_JOB_EVENTS_H_
