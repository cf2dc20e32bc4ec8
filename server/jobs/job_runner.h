// Runs training jobs off the RPC threads: a fixed pool of workers takes jobs
// in FIFO order, trains with bnn::Train and stores the snapshot. Jobs still
// queued when the server stops stay QUEUED in the store and are queued again,
// oldest first, by the next process's runner.
#ifndef BNN_SERVER_JOBS_JOB_RUNNER_H_
#define BNN_SERVER_JOBS_JOB_RUNNER_H_

#include <atomic>
#include <map>
#include <memory>
#include <set>
#include <string>

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
    // OpenMP threads per job (--threads); 0 = OpenMP default.
    int compute_threads = 0;
  };

  // Every pointer is borrowed and must outlive the runner; a job reserves
  // its plan's bnn::EstimateTrainingMemory from `memory_budget` before it
  // loads its dataset,
  // waiting while other work holds the memory it needs. Queues the jobs
  // `jobs` holds as QUEUED (left by a previous process), oldest first. Jobs
  // a previous process left interrupted after writing their snapshot (the
  // job store marked them failed on opening) succeed with it
  // (AdoptSnapshots).
  static absl::StatusOr<std::unique_ptr<JobRunner>> Create(
      const Options& options, JobStore* jobs, DatasetStore* datasets,
      SnapshotStore* snapshots, PredictorCache* predictors,
      const MethodRegistry* registry, ServerMetrics* metrics,
      MemoryBudget* memory_budget);
  // Shutdown().
  ~JobRunner();

  // Stores `record` (a validated request) as a new QUEUED job, queues it and
  // returns it with its id.
  absl::StatusOr<store::JobRecord> Submit(store::JobRecord record);

  // NotFound for an unknown id.
  absl::StatusOr<store::JobRecord> Get(absl::string_view job_id) const {
    return jobs_->Get(job_id);
  }

  // A QUEUED job becomes CANCELLED at once; a RUNNING one stops before its
  // next step and then becomes CANCELLED. Finished jobs are returned as they
  // are, so cancelling is idempotent.
  absl::StatusOr<store::JobRecord> Cancel(absl::string_view job_id);

  // Rejects new jobs (Unavailable) and interrupts the running ones before
  // their next step; they become FAILED with kRestartedJobError (as a
  // restart would make them). Queued jobs stay QUEUED, for the next process.
  // Returns at once; idempotent.
  void BeginShutdown();
  // After BeginShutdown(): waits until no job runs or `deadline` passes.
  // True if none runs; otherwise the jobs still running (in one long step)
  // are recorded FAILED with kRestartedJobError at once, since the process
  // is about to exit without them, and false is returned.
  bool AwaitStopped(absl::Time deadline);
  // BeginShutdown(), then waits for the running jobs and joins the workers.
  // Idempotent.
  void Shutdown();

 private:
  JobRunner(const Options& options, JobStore* jobs, DatasetStore* datasets,
            SnapshotStore* snapshots, PredictorCache* predictors,
            const MethodRegistry* registry, ServerMetrics* metrics,
            MemoryBudget* memory_budget);

  // Creates the job's cancellation flag and schedules it; requires mu_.
  void Enqueue(const std::string& job_id) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Worker body for one job.
  void Run(const std::string& job_id);
  // A job records the id of its snapshot before writing it: a job that
  // failed with kRestartedJobError whose snapshot exists is SUCCEEDED with
  // it; otherwise the id is dropped.
  void AdoptSnapshots();
  // Trains a RUNNING job; returns the new snapshot id.
  absl::StatusOr<std::string> Train(const store::JobRecord& job,
                                    const std::atomic<bool>& cancel);
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

  absl::Mutex mu_;
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  // Cancellation flags of queued and running jobs.
  std::map<std::string, std::shared_ptr<std::atomic<bool>>, std::less<>>
      cancel_flags_ ABSL_GUARDED_BY(mu_);
  // Jobs a worker is training.
  std::set<std::string> running_ ABSL_GUARDED_BY(mu_);
  // Declared last: destroyed (drained and joined) before the state above.
  std::unique_ptr<ThreadPool> workers_;
};

}  // namespace bnn::server

#endif  // BNN_SERVER_JOBS_JOB_RUNNER_H_
