#include "server/jobs/job_process_options.h"

#include <absl/strings/str_cat.h>

#include "bnn/status.h"

#include "server/common/flag_checks.h"

namespace bnn::server {

absl::Status JobProcessOptions::Validate() const {
  BNN_RETURN_IF_ERROR(CheckAtLeast("threads", threads, 0));
  if (!(checkpoint_seconds == 0 || checkpoint_seconds > 0)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--checkpoint-seconds = ", checkpoint_seconds, " must be >= 0"));
  }
  if (checkpoint_seconds > 0) {
    BNN_RETURN_IF_ERROR(
        CheckPositive("checkpoint-seconds", checkpoint_seconds));
  }
  BNN_RETURN_IF_ERROR(
      CheckPositive("job-heartbeat-seconds", job_heartbeat_seconds));
  if (!(job_takeover_seconds > job_heartbeat_seconds)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--job-takeover-seconds = ", job_takeover_seconds,
        " must be > --job-heartbeat-seconds = ", job_heartbeat_seconds,
        " (a job whose heartbeat is older is taken over)"));
  }
  return absl::OkStatus();
}

}  // namespace bnn::server
