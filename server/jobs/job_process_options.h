// The options of a process that trains jobs, with the same flags, defaults
// and bounds in every such binary: bnn-server (Server::Options::
// job_process) and bnn-train. Declared and validated once here.
#ifndef BNN_SERVER_JOBS_JOB_PROCESS_OPTIONS_H_
#define BNN_SERVER_JOBS_JOB_PROCESS_OPTIONS_H_

#include <absl/status/status.h>

namespace bnn::server {

struct JobProcessOptions {
  // --threads: most OpenMP (Eigen GEMM) threads per training job (and, in
  // bnn-server, per Predict or Acquire call); 0 = one per core. >= 0.
  // Small computations run on one thread regardless
  // (bnn/compute_threads.h). A resumed job equals an uninterrupted run
  // only under the same count.
  int threads = 0;
  // --checkpoint-seconds: a running job saves a checkpoint (to resume
  // from after a shutdown or crash) after the first step that ends this
  // many seconds of training after its last one; 0 = only when the
  // process shuts down (SIGTERM). >= 0, at most a year.
  double checkpoint_seconds = 60;
  // --job-heartbeat-seconds: how often a running job records in the store
  // that its process still runs it (with its progress). In (0, a year].
  double job_heartbeat_seconds = 5;
  // --job-takeover-seconds: a RUNNING job whose heartbeat is older than
  // this is claimed by another process (or this one's next) and resumed
  // from its last checkpoint. > job_heartbeat_seconds.
  double job_takeover_seconds = 30;

  // InvalidArgument naming the first flag out of its bound.
  absl::Status Validate() const;
};

}  // namespace bnn::server

#endif  // BNN_SERVER_JOBS_JOB_PROCESS_OPTIONS_H_
