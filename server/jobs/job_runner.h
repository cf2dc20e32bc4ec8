// Runs training jobs off the RPC threads: a fixed pool of workers takes jobs
// in FIFO order, trains with bnn::Train and stores the snapshot: its file as
// a blob, then in ONE metadata transaction the snapshot's record, the job
// SUCCEEDED and whatever Options::on_succeeded adds (publishing it as a
// model version and moving `latest`), so a crash leaves either all of it or
// a job that resumes. A running job checkpoints its state
// (bnn/train/checkpoint.h) every Options::checkpoint_interval and when the
// server shuts down, to <data-dir>/checkpoints/<job_id>.ckpt
// (JobStore::CheckpointPath), committing its progress and loss curve with
// it (per-step progress is otherwise kept in memory, see JobStore); a
// shutdown or a crash leaves it INTERRUPTED, and the next process's runner
// resumes it from that checkpoint, to the snapshot an uninterrupted run
// would have made.
// Jobs still queued stay QUEUED and are queued again, oldest first, after
// the interrupted ones.
//
// States: QUEUED -> RUNNING -> SUCCEEDED | FAILED | CANCELLED; RUNNING ->
// CANCELLING -> CANCELLED (Cancel); RUNNING -> INTERRUPTED -> RUNNING
// (shutdown or crash, then the next process).
#ifndef BNN_SERVER_JOBS_JOB_RUNNER_H_
#define BNN_SERVER_JOBS_JOB_RUNNER_H_

#include <atomic>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include <absl/base/thread_annotations.h>
#include <absl/functional/function_ref.h>
#include <absl/status/statusor.h>
#include <absl/strings/string_view.h>
#include <absl/synchronization/mutex.h>
#include <absl/time/time.h>

#include "bnn/memory.h"
#include "bnn/methods/registry.h"
#include "bnn/train/trainer.h"

#include "server/admission/memory_budget.h"
#include "server/common/thread_pool.h"
#include "server/jobs/job_events.h"
#include "server/metrics/server_metrics.h"
#include "server/store/dataset_store.h"
#include "server/store/job_store.h"
#include "server/store/predictor_cache.h"
#include "server/store/snapshot_store.h"

namespace bnn::server {

// Thread-safe.
class JobRunner {
 public:
  struct Options {
    // Jobs trained at once (--max-concurrent-jobs); later ones wait.
    int max_concurrent_jobs = 1;
    // OpenMP threads per job (--threads); 0 = OpenMP default. A job resumes
    // to the bits of an uninterrupted run only under the same count.
    int compute_threads = 0;
    // Nice value of the threads that train (--training-nice): 0..19, higher
    // yields the cores to serving more (LowerThreadPriority).
    int training_nice = 10;
    // Jobs waiting in the queue at most (--max-queued-jobs); Submit beyond
    // it is refused with ResourceExhausted. Jobs resumed after a restart
    // are queued regardless. >= 1.
    int max_queued_jobs = 64;
    // A running job checkpoints after the first step that ends this much
    // training time after its last checkpoint (--checkpoint-seconds);
    // zero: only when the server shuts down. >= 0.
    absl::Duration checkpoint_interval = absl::Seconds(60);
    // Called inside the transaction that stores a job's snapshot record and
    // makes the job SUCCEEDED, with the job's record and the snapshot's id
    // (e.g. to publish it under record.model_name() in the same
    // transaction); an error rolls that back, and the job is recorded
    // FAILED with the error, its snapshot still stored. It is also called
    // for a snapshot a job of an older server adopts after a crash, so it
    // must accept a snapshot it already handled. Unset: nothing is called.
    std::function<absl::Status(MetadataTransaction&, const store::JobRecord&,
                               const std::string& snapshot_id)>
        on_succeeded;
  };

  // Every pointer is borrowed and must outlive the runner; a job reserves
  // its plan's bnn::EstimateTrainingMemory from `memory_budget` before it
  // loads its dataset, waiting while other work holds the memory it needs.
  // Queues the jobs a previous process left INTERRUPTED (to resume from
  // their checkpoints), then the QUEUED ones, oldest first. Jobs a
  // previous process stopped after writing their snapshot succeed with it
  // (AdoptSnapshots).
  static absl::StatusOr<std::unique_ptr<JobRunner>> Create(
      const Options& options, JobStore* jobs, DatasetStore* datasets,
      SnapshotStore* snapshots, PredictorCache* predictors,
      const MethodRegistry* registry, ServerMetrics* metrics,
      MemoryBudget* memory_budget);
  // Shutdown().
  ~JobRunner();

  // Stores `record` (a validated request) as a new QUEUED job, queues it and
  // returns it with its id. ResourceExhausted naming --max-queued-jobs when
  // the queue is full, Unavailable while shutting down.
  absl::StatusOr<store::JobRecord> Submit(store::JobRecord record);

  // NotFound for an unknown id.
  absl::StatusOr<store::JobRecord> Get(absl::string_view job_id) const {
    return jobs_->Get(job_id);
  }

  // JobStore::ListNewestFirst.
  absl::StatusOr<std::vector<store::JobRecord>> List(
      const JobFilter& filter, const std::optional<JobCursor>& after, int limit,
      bool* more) const {
    return jobs_->ListNewestFirst(filter, after, limit, more);
  }

  // A QUEUED (or INTERRUPTED, waiting to resume) job becomes CANCELLED at
  // once; a RUNNING one becomes CANCELLING, stops before its next step and
  // then becomes CANCELLED. Other jobs are returned as they are, so
  // cancelling is idempotent.
  absl::StatusOr<store::JobRecord> Cancel(absl::string_view job_id);

  // The jobs' events, for WatchJob.
  JobEvents& events() { return events_; }

  // Rejects new jobs (Unavailable) and interrupts the running ones before
  // their next step: each writes a checkpoint and becomes INTERRUPTED, to be
  // resumed by the next process. Queued jobs stay QUEUED. Closes the events
  // (JobEvents::Close). Returns at once; idempotent.
  void BeginShutdown();
  // After BeginShutdown(): waits until no job runs or `deadline` passes.
  // True if none runs; otherwise the jobs still running (in one long step)
  // are recorded INTERRUPTED at once (they resume from their last periodic
  // checkpoint, or from the start), since the process is about to exit
  // without them, and false is returned.
  bool AwaitStopped(absl::Time deadline);
  // BeginShutdown(), then waits for the running jobs and joins the workers.
  // Idempotent.
  void Shutdown();

 private:
  JobRunner(const Options& options, JobStore* jobs, DatasetStore* datasets,
            SnapshotStore* snapshots, PredictorCache* predictors,
            const MethodRegistry* registry, ServerMetrics* metrics,
            MemoryBudget* memory_budget);

  // A queued or running job's flags.
  struct Control {
    // Stops training before the next step (Interrupt::OnFlag).
    std::atomic<bool> stop{false};
    // Set with `stop` by Cancel: the job ends CANCELLED, not INTERRUPTED.
    std::atomic<bool> cancelled{false};
  };

  // Creates the job's control and schedules it; requires mu_.
  void Enqueue(const std::string& job_id) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Worker body for one job.
  void Run(const std::string& job_id);
  // Servers before the metadata store recorded the id of a job's snapshot
  // before writing it: a job a previous process left with such an id whose
  // snapshot exists is SUCCEEDED with it (with Options::on_succeeded);
  // otherwise the id is dropped.
  void AdoptSnapshots();
  // Trains a RUNNING job, from its checkpoint if it has one.
  absl::StatusOr<Snapshot> Train(const store::JobRecord& job, Control& control);
  // Stores the snapshot of a job that trained to the end and records the
  // job SUCCEEDED with it in one transaction (see the file comment); FAILED
  // if that cannot be done.
  void Succeed(const std::string& job_id, Snapshot snapshot);
  // Deletes `job`'s checkpoint, commits its record in a final state (and its
  // end time) with `also` in the same transaction, then publishes the state
  // event, logs and counts it. Returns the commit's error, having done
  // nothing else then.
  absl::Status Finish(const std::string& job_id,
                      absl::FunctionRef<void(store::JobRecord*)> mutate,
                      absl::FunctionRef<absl::Status(MetadataTransaction&,
                                                     const store::JobRecord&)>
                          also);
  absl::Status Finish(const std::string& job_id,
                      absl::FunctionRef<void(store::JobRecord*)> mutate);
  // Whether the store has the job CANCELLING (Cancel recorded it, perhaps
  // before it could set the job's flag).
  bool Cancelling(absl::string_view job_id) const;
  // Publishes a kState event of `job` as recorded.
  void PublishState(const store::JobRecord& job);
  // Sets bnn_training_jobs{state} from the store.
  void PublishJobCounts();

  const Options options_;
  JobStore* const jobs_;
  DatasetStore* const datasets_;
  SnapshotStore* const snapshots_;
  // Parent snapshots of warm starts are loaded through it.
  PredictorCache* const predictors_;
  const MethodRegistry* const registry_;
  ServerMetrics* const metrics_;
  MemoryBudget* const memory_budget_;

  JobEvents events_;

  absl::Mutex mu_;
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  // Of queued and running jobs.
  std::map<std::string, std::shared_ptr<Control>, std::less<>> controls_
      ABSL_GUARDED_BY(mu_);
  // Jobs a worker is training.
  std::set<std::string> running_ ABSL_GUARDED_BY(mu_);
  // Declared last: destroyed (drained and joined) before the state above.
  std::unique_ptr<ThreadPool> workers_;
};

}  // namespace bnn::server

#endif  // BNN_SERVER_JOBS_JOB_RUNNER_H_
