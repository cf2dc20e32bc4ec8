// The run of ONE claimed training job to its end, shared by the server's
// job runner (job_runner.h: its workers claim jobs from the store) and by
// bnn-train (bnn_train_main.cc: one job by id): trains it with bnn::Train,
// from its checkpoint if it has one; heartbeats while it runs; checkpoints
// it every Options::checkpoint_interval and when stopped, to
// JobStore::CheckpointPath, committing its progress and loss curve with
// it; and commits its final state. A trained job's snapshot is stored as a
// blob, then in ONE metadata transaction the snapshot's record, the job
// SUCCEEDED and whatever Options::on_succeeded adds (publishing it as a
// model version and moving `latest`), so a crash leaves either all of it or
// a job that resumes.
//
// Claims and fencing: the job was claimed for Options::claimant
// (JobStore::Claim or ClaimJob). Every Options::heartbeat_interval a thread
// of the run records the heartbeat (JobStore::Heartbeat); if it finds the
// job CANCELLING (a cancel through any server) the run stops and the job
// ends CANCELLED; if it finds another claimant (this process stopped
// heartbeating for longer than the takeover time, e.g. the store was
// unreachable, and another process took the job over) the run stops
// without committing anything of the job: no checkpoint, no final state
// (every final commit checks the claimant in its transaction).
#ifndef BNN_SERVER_JOBS_JOB_EXECUTION_H_
#define BNN_SERVER_JOBS_JOB_EXECUTION_H_

#include <atomic>
#include <functional>
#include <string>

#include <absl/functional/function_ref.h>
#include <absl/status/status.h>
#include <absl/status/statusor.h>
#include <absl/time/time.h>

#include "bnn/methods/registry.h"
#include "bnn/train/trainer.h"

#include "server/admission/memory_budget.h"
#include "server/jobs/job_events.h"
#include "server/metrics/server_metrics.h"
#include "server/store/dataset_store.h"
#include "server/store/job_store.h"
#include "server/store/model_store.h"
#include "server/store/predictor_cache.h"
#include "server/store/snapshot_store.h"

namespace bnn::server {

// The id of this process as a claimant of jobs (JobRecord::claimant):
// `server_id` (the shared store's server id of the data directory, or
// "local" when empty), the host name, the process id and the start time in
// milliseconds, e.g. "srv-0123@host:4242:1764153600000". The same for every
// call in a process; unique across processes and restarts.
const std::string& ReplicaId(absl::string_view server_id);

// The JobExecution::Options::on_succeeded of StartTraining(model_name,
// publish = true): the snapshot becomes the model's next version (and
// `latest`) in the transaction that makes the job SUCCEEDED; a failure to
// publish fails the job, naming why. `models` is borrowed.
std::function<absl::Status(MetadataTransaction&, const store::JobRecord&,
                           const std::string& snapshot_id)>
PublishOnSuccess(ModelStore* models);

// A running job's flags, set by other threads.
struct JobControl {
  // Stops training before the next step (Interrupt::OnFlag).
  std::atomic<bool> stop{false};
  // Set with `stop` by a cancel: the job ends CANCELLED.
  std::atomic<bool> cancelled{false};
  // Set with `stop` by a shutdown: the job checkpoints and ends
  // INTERRUPTED, to be resumed by the next claimant.
  std::atomic<bool> interrupted{false};
  // Set with `stop` when another process claimed the job: the run ends
  // without committing anything.
  std::atomic<bool> lost{false};
};

// How a run ended.
enum class JobOutcome {
  kSucceeded,
  kFailed,
  kCancelled,
  kInterrupted,
  // Another process claimed the job; nothing was committed.
  kLost,
  // The final state could not be committed (logged).
  kUncommitted,
};

// Thread-safe: runs of different jobs may go on at once.
class JobExecution {
 public:
  struct Options {
    // The id of this process, recorded as the jobs' claimant (ReplicaId()).
    std::string claimant;
    // OpenMP threads per job (--threads); 0 = OpenMP default. A job resumes
    // to the bits of an uninterrupted run only under the same count.
    int compute_threads = 0;
    // Nice value of the thread that trains (--training-nice): 0..19.
    int training_nice = 10;
    // A running job checkpoints after the first step that ends this much
    // training time after its last checkpoint (--checkpoint-seconds);
    // zero: only when it is stopped. >= 0.
    absl::Duration checkpoint_interval = absl::Seconds(60);
    // How often a running job's heartbeat is recorded
    // (--job-heartbeat-seconds), committing its progress with it. > 0.
    absl::Duration heartbeat_interval = absl::Seconds(5);
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

  // Every pointer is borrowed and must outlive the execution; a job
  // reserves its plan's bnn::EstimateTrainingMemory from `memory_budget`
  // before it loads its dataset, waiting while other work holds the memory
  // it needs; a finished job's posterior is handed to `predictors` in
  // memory (PredictorCache::Adopt). Events of the runs go to `events`.
  JobExecution(Options options, JobStore* jobs, DatasetStore* datasets,
               SnapshotStore* snapshots, PredictorCache* predictors,
               const MethodRegistry* registry, ServerMetrics* metrics,
               MemoryBudget* memory_budget, JobEvents* events);

  const Options& options() const { return options_; }

  // Runs `job`, just claimed for options().claimant (RUNNING), to its end,
  // on the calling thread (at the training nice value and thread count),
  // and returns how it ended; `control` stops it early.
  JobOutcome Run(const store::JobRecord& job, JobControl& control);

  // Servers before the metadata store recorded the id of a job's snapshot
  // before writing it: a job left with such an id whose snapshot exists is
  // SUCCEEDED with it (with Options::on_succeeded); otherwise the id is
  // dropped.
  void AdoptSnapshots();

  // Publishes a kState event of `job` as recorded.
  void PublishState(const store::JobRecord& job);

 private:
  // Trains a RUNNING job, from its checkpoint if it has one.
  absl::StatusOr<Snapshot> Train(const store::JobRecord& job,
                                 JobControl& control);
  // Stores the snapshot of a job that trained to the end and records the
  // job SUCCEEDED with it in one transaction (see the file comment); FAILED
  // if that cannot be done.
  JobOutcome Succeed(const std::string& job_id, Snapshot snapshot);
  // Unless this process lost its claim (Aborted then, nothing done):
  // deletes the job's checkpoint, commits its record in a final state (and
  // its end time) with `also` in the same transaction, then publishes the
  // state event, logs and counts it. Returns the commit's error, having
  // done nothing else then.
  absl::Status Finish(const std::string& job_id,
                      absl::FunctionRef<void(store::JobRecord*)> mutate,
                      absl::FunctionRef<absl::Status(MetadataTransaction&,
                                                     const store::JobRecord&)>
                          also);
  absl::Status Finish(const std::string& job_id,
                      absl::FunctionRef<void(store::JobRecord*)> mutate);
  // Records the job's heartbeat and acts on what it finds (see the file
  // comment); false if the claim is lost.
  bool Beat(const std::string& job_id, JobControl& control);

  const Options options_;
  JobStore* const jobs_;
  DatasetStore* const datasets_;
  SnapshotStore* const snapshots_;
  PredictorCache* const predictors_;
  const MethodRegistry* const registry_;
  ServerMetrics* const metrics_;
  MemoryBudget* const memory_budget_;
  JobEvents* const events_;
};

}  // namespace bnn::server

#endif  // BNN_SERVER_JOBS_JOB_EXECUTION_H_
