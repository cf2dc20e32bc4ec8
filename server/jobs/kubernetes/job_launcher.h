// Training jobs as Kubernetes batch/v1 Jobs (--job-runner=kubernetes): the
// launcher half. JobLauncher creates, reads, lists and deletes the Job of
// a training job through the API server (ApiClient); JobMonitor follows the
// status of all of them with one List per poll interval and reports the
// changes. What a Job runs is `bnn-train --job-id=ID`, which trains the
// stored job against the shared store and blob directory and records its
// progress, checkpoints and result there itself (job_manifest.h).
//
// The job runner in Kubernetes mode (JobRunner with
// Options::kubernetes, --job-runner=kubernetes; docs/deploy.md):
//  - Submit: store the job QUEUED, then Launch(job_id) (idempotent);
//    Unavailable/DeadlineExceeded leave it QUEUED and are retried;
//  - at start: Launch every QUEUED/INTERRUPTED job of the store and every
//    RUNNING one with a stale heartbeat, Delete the Jobs of CANCELLING ones;
//  - JobMonitor's on_change, only moving a job forward: kRunning/kPending →
//    nothing (bnn-train records RUNNING when it claims); kSucceeded with
//    the job not final → FAILED ("ended without a result"); kFailed → the
//    job FAILED with JobStatus::reason unless it is final; a Job that
//    vanished while its job is not final → FAILED ("deleted"), CANCELLED if
//    it was CANCELLING;
//  - Cancel: record CANCELLING (CANCELLED if still queued), Delete(job_id),
//    then CANCELLED once the Job is gone.
#ifndef BNN_SERVER_JOBS_KUBERNETES_JOB_LAUNCHER_H_
#define BNN_SERVER_JOBS_KUBERNETES_JOB_LAUNCHER_H_

#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include <absl/base/thread_annotations.h>
#include <absl/status/status.h>
#include <absl/status/statusor.h>
#include <absl/strings/string_view.h>
#include <absl/synchronization/mutex.h>

#include "server/jobs/kubernetes/api_client.h"
#include "server/jobs/kubernetes/job_manifest.h"
#include "server/jobs/kubernetes/launcher_options.h"

namespace bnn::server::kubernetes {

// Thread-safe.
class JobLauncher {
 public:
  // ResolveInCluster(options), validated. Makes no request.
  static absl::StatusOr<std::unique_ptr<JobLauncher>> Create(
      const LauncherOptions& options);

  // Creates the Job of `job_id` (POST, ?fieldValidation=Strict so that the
  // API server refuses a field it does not know instead of dropping it).
  // If the name is taken by a Job labelled with the same job id (a launch
  // repeated after a restart) that Job is returned as it is; a Job of
  // another id under the name is AlreadyExists. Errors as ApiClient::Call's,
  // InvalidArgument for an id that cannot label a Job.
  absl::StatusOr<LaunchedJob> Launch(absl::string_view job_id);

  // The Job of `job_id`; NotFound if there is none (never launched,
  // deleted, or removed by ttl_seconds_after_finished).
  absl::StatusOr<LaunchedJob> Get(absl::string_view job_id);

  // Every Job of ours in the namespace (kOurJobsSelector), by job id.
  absl::StatusOr<std::map<std::string, LaunchedJob>> List();

  // Deletes the Job of `job_id` and, in the background, its pods
  // (propagationPolicy=Background; a running pod gets its termination grace
  // period). True if it existed, false if there was none (Delete is
  // idempotent).
  absl::StatusOr<bool> Delete(absl::string_view job_id);

  const LauncherOptions& options() const { return options_; }
  // The path of the namespace's Jobs: /apis/batch/v1/namespaces/NS/jobs.
  const std::string& jobs_path() const { return jobs_path_; }

 private:
  JobLauncher(const LauncherOptions& options,
              std::unique_ptr<ApiClient> client);

  const LauncherOptions options_;
  const std::string jobs_path_;
  const std::unique_ptr<ApiClient> client_;
};

// Polls JobLauncher::List() every options().status_poll_interval on its own
// thread and calls `on_change` for each job whose Job appeared, changed its
// JobStatus or vanished (then with std::nullopt), and `on_error` when a
// List fails (the next poll retries). The first poll reports every Job.
// Both are called on the monitor's thread, one at a time.
class JobMonitor {
 public:
  using OnChange = std::function<void(const std::string& job_id,
                                      const std::optional<LaunchedJob>& job)>;
  using OnError = std::function<void(const absl::Status& status)>;

  // `launcher` is borrowed and must outlive the monitor. Starts polling.
  JobMonitor(JobLauncher* launcher, OnChange on_change, OnError on_error);
  // Stops polling (waiting for a List in flight) and joins the thread.
  ~JobMonitor();
  JobMonitor(const JobMonitor&) = delete;
  JobMonitor& operator=(const JobMonitor&) = delete;

  // Polls again at once (e.g. after a Launch or a Delete), instead of at
  // the end of the interval.
  void PollNow();
  // Polls completed so far (successful or not).
  int64_t polls() const;

 private:
  void Loop();
  void PollOnce();

  JobLauncher* const launcher_;
  const OnChange on_change_;
  const OnError on_error_;
  // Only the monitor's thread touches it.
  std::map<std::string, LaunchedJob> known_;

  mutable absl::Mutex mu_;
  bool stop_ ABSL_GUARDED_BY(mu_) = false;
  bool poll_now_ ABSL_GUARDED_BY(mu_) = false;
  int64_t polls_ ABSL_GUARDED_BY(mu_) = 0;
  // Declared last: started when the rest is ready.
  std::thread thread_;
};

}  // namespace bnn::server::kubernetes

#endif  // BNN_SERVER_JOBS_KUBERNETES_JOB_LAUNCHER_H_
