// The batch/v1 Job of one training job, and what the API server's Job
// objects say about it: pure functions over JSON, no I/O.
//
// A Job is named JobNameForId(prefix, job_id) and labelled
//   app.kubernetes.io/name=bnn-train
//   app.kubernetes.io/managed-by=bnn-server
//   bnn-serve/job-id=<job id>
// (its pods too); kOurJobsSelector selects the Jobs of every bnn-server in
// the namespace. Its one container runs `bnn-train --job-id=<id> ...`
// (LauncherOptions::command and args) with restartPolicy Never, so that a
// failed attempt is a new pod that Kubernetes counts against backoffLimit;
// bnn-train resumes from the job's last checkpoint.
#ifndef BNN_SERVER_JOBS_KUBERNETES_JOB_MANIFEST_H_
#define BNN_SERVER_JOBS_KUBERNETES_JOB_MANIFEST_H_

#include <string>

#include <absl/status/statusor.h>
#include <absl/strings/string_view.h>
#include <nlohmann/json.hpp>

#include "server/jobs/kubernetes/launcher_options.h"

namespace bnn::server::kubernetes {

inline constexpr char kJobIdLabel[] = "bnn-serve/job-id";
inline constexpr char kOurJobsSelector[] =
    "app.kubernetes.io/name=bnn-train,app.kubernetes.io/managed-by=bnn-server";

// What a training job's Kubernetes Job is doing.
enum class JobPhase {
  // Created, no pod running yet (scheduling, pulling the image, or
  // between a failed attempt and its retry).
  kPending,
  // A pod of it runs (is Ready; without the `ready` count of Kubernetes
  // < 1.24, one is active).
  kRunning,
  // Its pod ended successfully (condition Complete).
  kSucceeded,
  // It failed for good (condition Failed: backoffLimit reached, deadline
  // exceeded, ...); JobStatus::reason says why.
  kFailed,
};
absl::string_view JobPhaseToString(JobPhase phase);

struct JobStatus {
  JobPhase phase = JobPhase::kPending;
  // For kFailed: the condition's reason and message ("BackoffLimitExceeded:
  // Job has reached the specified backoff limit"); empty otherwise.
  std::string reason;
  // status.active, .succeeded and .failed: pods running, succeeded, failed.
  int active = 0;
  int succeeded = 0;
  int failed = 0;

  bool operator==(const JobStatus& other) const {
    return phase == other.phase && reason == other.reason &&
           active == other.active && succeeded == other.succeeded &&
           failed == other.failed;
  }
  bool operator!=(const JobStatus& other) const { return !(*this == other); }
};

// A Job of ours as the API server has it.
struct LaunchedJob {
  // The bnn job id (its bnn-serve/job-id label).
  std::string job_id;
  // metadata.name and metadata.uid.
  std::string name;
  std::string uid;
  JobStatus status;
};

// "<prefix><job_id>" when that is a DNS-1123 label of at most 63
// characters (job ids, "job-<16 hex digits>", are); otherwise the id
// lowercased with other characters as '-', cut to fit, and a hash of the
// id, so that different ids get different names.
std::string JobNameForId(absl::string_view prefix, absl::string_view job_id);

// The Job of `job_id` (options validated). InvalidArgument if the id is not
// a label value (at most 63 alphanumerics, '-', '_', '.').
absl::StatusOr<nlohmann::json> BuildJob(const LauncherOptions& options,
                                        absl::string_view job_id);

// The status of a Job object: conditions Failed or FailureTarget (True) →
// kFailed, Complete or SuccessCriteriaMet → kSucceeded, then succeeded >= 1
// → kSucceeded, ready >= 1 (or active >= 1 when the server has no `ready`)
// → kRunning, else kPending.
JobStatus ParseJobStatus(const nlohmann::json& job);

// A Job object as a LaunchedJob. InvalidArgument if it has no name or no
// bnn-serve/job-id label.
absl::StatusOr<LaunchedJob> ParseLaunchedJob(const nlohmann::json& job);

}  // namespace bnn::server::kubernetes

#endif  // BNN_SERVER_JOBS_KUBERNETES_JOB_MANIFEST_H_
