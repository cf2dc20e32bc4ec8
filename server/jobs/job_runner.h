// Runs training jobs off the RPC threads, with the metadata store as the
// queue: each of a fixed number of workers claims the oldest claimable job
// (JobStore::Claim: a job to resume first, INTERRUPTED or RUNNING with a
// stale heartbeat, else the oldest QUEUED one), atomically, so that
// exactly one process runs a job even when several servers (and
// bnn-train) share the store, and runs it (JobExecution: trains, heartbeats,
// checkpoints, commits the end). An idle worker wakes on a Submit to this
// runner, and otherwise looks at the store every Options::poll_interval
// (jobs submitted to other servers, jobs whose process stopped
// heartbeating). A running job checkpoints every
// Options::checkpoint_interval and when the server shuts down; a shutdown
// or a crash leaves it INTERRUPTED (a crash: RUNNING until this server's
// next process starts, or another's takeover), and it resumes from that
// checkpoint, to the snapshot an uninterrupted run would have made.
//
// States: QUEUED -> RUNNING -> SUCCEEDED | FAILED | CANCELLED; RUNNING ->
// CANCELLING -> CANCELLED (Cancel); RUNNING -> INTERRUPTED -> RUNNING
// (shutdown or crash, then the next claimant).
//
// With Options::kubernetes (--job-runner=kubernetes) the runner trains
// nothing itself: each job is one batch/v1 Job running `bnn-train
// --job-id=ID` against the shared store (kubernetes/job_launcher.h), which
// claims, heartbeats, checkpoints and ends the job as a worker here would.
// Submit stores the job QUEUED and launches its Job; every poll_interval
// the runner launches the QUEUED jobs it has not launched (those other
// servers queued, e.g. --role=serve replicas, which launch nothing); at
// start it launches again every QUEUED or INTERRUPTED job, every RUNNING
// one whose heartbeat is stale (Launch is idempotent) and deletes the Jobs
// of CANCELLING ones; a JobMonitor maps the Jobs' ends to the jobs' states,
// only ever moving a job forward (see KubernetesJobChanged).
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
#include "server/jobs/job_execution.h"
#include "server/jobs/kubernetes/job_launcher.h"
#include "server/jobs/kubernetes/launcher_options.h"
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
    // Jobs trained at once (--max-concurrent-jobs): the number of workers.
    // >= 1.
    int max_concurrent_jobs = 1;
    // Whether this runner trains jobs at all (--role): false for a serving
    // replica, which has no workers and only queues jobs (Submit) for the
    // servers (or bnn-train processes) that train.
    bool run_jobs = true;
    // OpenMP threads per job (--threads); 0 = OpenMP default. A job resumes
    // to the bits of an uninterrupted run only under the same count.
    int compute_threads = 0;
    // Nice value of the threads that train (--training-nice): 0..19, higher
    // yields the cores to serving more (LowerThreadPriority).
    int training_nice = 10;
    // Jobs waiting in the queue at most (--max-queued-jobs), counted in the
    // store (every server's); Submit beyond it is refused with
    // ResourceExhausted. >= 1.
    int max_queued_jobs = 64;
    // A running job checkpoints after the first step that ends this much
    // training time after its last checkpoint (--checkpoint-seconds);
    // zero: only when the server shuts down. >= 0.
    absl::Duration checkpoint_interval = absl::Seconds(60);
    // The id this process claims jobs under (ReplicaId()); empty:
    // ReplicaId("").
    std::string claimant;
    // How often an idle worker looks for jobs in the store
    // (--job-poll-seconds); a Submit here wakes one at once. > 0.
    absl::Duration poll_interval = absl::Seconds(1);
    // How often a running job's heartbeat is recorded
    // (--job-heartbeat-seconds), with its progress. > 0.
    absl::Duration heartbeat_interval = absl::Seconds(5);
    // A RUNNING job whose heartbeat is older than this is taken over
    // (--job-takeover-seconds): its process is presumed gone. >
    // heartbeat_interval.
    absl::Duration takeover_after = absl::Seconds(30);
    // JobExecution::Options::on_succeeded: called inside the transaction
    // that makes a job SUCCEEDED (e.g. to publish its snapshot); an error
    // fails the job. Unset: nothing is called.
    std::function<absl::Status(MetadataTransaction&, const store::JobRecord&,
                               const std::string& snapshot_id)>
        on_succeeded;
    // --job-runner=kubernetes (with --kubernetes-config and
    // --kubernetes-option): run each job as a Kubernetes Job configured by
    // these options (see the file comment); no worker starts, and
    // max_concurrent_jobs, run_jobs, compute_threads and training_nice do
    // not apply. Unset (--job-runner=in-process): the workers train.
    std::optional<kubernetes::LauncherOptions> kubernetes;
  };

  // Every pointer is borrowed and must outlive the runner (JobExecution).
  // Jobs a previous process stopped after writing their snapshot succeed
  // with it (JobExecution::AdoptSnapshots). The workers start claiming at
  // once: jobs this server's previous process left INTERRUPTED (JobStore::
  // Open) resume first, oldest first, then the QUEUED ones.
  static absl::StatusOr<std::unique_ptr<JobRunner>> Create(
      const Options& options, JobStore* jobs, DatasetStore* datasets,
      SnapshotStore* snapshots, PredictorCache* predictors,
      const MethodRegistry* registry, ServerMetrics* metrics,
      MemoryBudget* memory_budget);
  // Shutdown().
  ~JobRunner();

  // Stores `record` (a validated request) as a new QUEUED job, wakes a
  // worker and returns it with its id. ResourceExhausted naming
  // --max-queued-jobs when the queue is full, Unavailable while shutting
  // down. In Kubernetes mode the job's Job is launched before it returns
  // (LaunchJob).
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
  // cancelling is idempotent. In Kubernetes mode the job's Job is deleted
  // too (its pod stops); a CANCELLING job becomes CANCELLED once its Job is
  // gone.
  absl::StatusOr<store::JobRecord> Cancel(absl::string_view job_id);

  // The jobs' events, for WatchJob.
  JobEvents& events() { return events_; }

  // Rejects new jobs (Unavailable), stops claiming and interrupts the
  // running ones before their next step: each writes a checkpoint and
  // becomes INTERRUPTED, to be resumed by the next claimant. Queued jobs
  // stay QUEUED. Closes the events (JobEvents::Close). Returns at once;
  // idempotent.
  void BeginShutdown();
  // After BeginShutdown(): waits until no job runs or `deadline` passes.
  // True if none runs; otherwise the jobs still running (in one long step)
  // are recorded INTERRUPTED at once (they resume from their last periodic
  // checkpoint, or from the start), since the process is about to exit
  // without them (unless another process claimed them meanwhile), and false
  // is returned.
  bool AwaitStopped(absl::Time deadline);
  // BeginShutdown(), then waits for the running jobs and joins the workers.
  // Idempotent.
  void Shutdown();

 private:
  JobRunner(const Options& options, JobStore* jobs, DatasetStore* datasets,
            SnapshotStore* snapshots, PredictorCache* predictors,
            const MethodRegistry* registry, ServerMetrics* metrics,
            MemoryBudget* memory_budget);

  // A worker: claims and runs jobs until the shutdown.
  void Work();
  // Runs one claimed job.
  void RunClaimed(const store::JobRecord& job, JobControl& control);
  // Sets bnn_training_jobs{state} from the store.
  void PublishJobCounts();
  // Submit's store part: checks the queue's limit and stores the job
  // QUEUED.
  absl::StatusOr<store::JobRecord> Queue(store::JobRecord record);

  // Kubernetes mode. Launches the Job of `job_id`: on Unavailable or
  // DeadlineExceeded the job stays QUEUED and the launch is retried every
  // poll_interval (RetryLaunches); another error fails the job with it.
  void LaunchJob(const std::string& job_id);
  // At start: launches every QUEUED or INTERRUPTED job and every RUNNING one
  // with a stale heartbeat, and deletes the Jobs of CANCELLING ones.
  void Reconcile();
  // The loop of the one thread of workers_: every poll_interval, retries
  // the launches that failed transiently, then LaunchQueued().
  void RetryLaunches();
  // Launches the QUEUED jobs not in launched_ (queued by other servers, or
  // before this process started), and forgets those of launched_ that are
  // no longer QUEUED.
  void LaunchQueued();
  // Deletes the Job of a cancelled job; a CANCELLING job whose Job is gone
  // becomes CANCELLED.
  void DeleteJob(const std::string& job_id);
  // JobMonitor's on_change: a Job succeeded with its job not SUCCEEDED, a
  // failed Job or a vanished one end a job that is not final (FAILED, or
  // CANCELLED if it was CANCELLING); a running or pending Job changes
  // nothing (bnn-train records RUNNING when it claims the job).
  void KubernetesJobChanged(const std::string& job_id,
                            const std::optional<kubernetes::LaunchedJob>& job);
  // Records a job that is not final as ended: CANCELLED if it is
  // CANCELLING, else FAILED with `error`.
  void EndJob(const std::string& job_id, const std::string& error);

  const Options options_;
  JobStore* const jobs_;
  ServerMetrics* const metrics_;

  JobEvents events_;
  JobExecution execution_;

  absl::Mutex mu_;
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  // Submits not yet seen by an idle worker.
  int wakeups_ ABSL_GUARDED_BY(mu_) = 0;
  // Of the jobs running here.
  std::map<std::string, std::shared_ptr<JobControl>, std::less<>> controls_
      ABSL_GUARDED_BY(mu_);
  // Kubernetes mode: jobs whose launch failed with a transient error.
  std::set<std::string> launch_retries_ ABSL_GUARDED_BY(mu_);
  // Kubernetes mode: QUEUED jobs this process launched (or is launching:
  // Queue adds a job before Submit launches it), so that LaunchQueued
  // does not launch them again while their pods start.
  std::set<std::string> launched_ ABSL_GUARDED_BY(mu_);
  // Kubernetes mode; null otherwise. The monitor is stopped (reset) by
  // Shutdown(), before the launcher it borrows.
  std::unique_ptr<kubernetes::JobLauncher> launcher_;
  std::unique_ptr<kubernetes::JobMonitor> monitor_;
  // Declared last: destroyed (drained and joined) before the state above.
  std::unique_ptr<ThreadPool> workers_;
};

}  // namespace bnn::server

#endif  // BNN_SERVER_JOBS_JOB_RUNNER_H_
