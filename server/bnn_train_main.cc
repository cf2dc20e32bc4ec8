// bnn-train: runs ONE stored training job (a StartTraining request as the
// metadata store holds it) to its end, against the same store and blob
// directory as bnn-server, exactly as a server's job runner would: it
// claims the job (so that no server also runs it), heartbeats, checkpoints,
// reports progress and commits SUCCEEDED or FAILED through JobExecution,
// the implementation the runner uses. For a job runner that starts one
// process (a container) per job, e.g. a Kubernetes Job:
//
//   bnn-train --job-id=job-0123456789abcdef --data-dir=/scratch
//     --metadata=postgres://bnn@db/bnn --blob-dir=/mnt/bnn-blobs --threads=4
//
// A job RUNNING under another claimant whose heartbeat is fresh (the pod a
// Kubernetes Job replaces after a hard kill, whose heartbeat has not gone
// stale yet) is waited for: the claim is tried again every
// --job-heartbeat-seconds until that heartbeat is older than
// --job-takeover-seconds, for at most --claim-wait-seconds.
//
// Exit status: 0 when the job SUCCEEDED; otherwise one line on stderr
// naming the job and why, and 1 (FAILED, or an error before or after
// training: unknown job, a job not claimable, still claimed by a live
// claimant after --claim-wait-seconds, a store that cannot be opened), 2
// (CANCELLED), 3 (INTERRUPTED by SIGTERM or SIGINT: it checkpointed and
// any server, or another bnn-train, resumes it; or stopped by one while
// waiting for the claim, the job left as it was) or 4 (another process
// took the job over: this one stopped heartbeating for longer than
// --job-takeover-seconds).
#include <algorithm>
#include <atomic>
#include <cstdint>
#include <iostream>
#include <memory>
#include <optional>
#include <pthread.h>
#include <signal.h>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include <absl/flags/flag.h>
#include <absl/flags/parse.h>
#include <absl/flags/usage.h>
#include <absl/flags/usage_config.h>
#include <absl/status/status.h>
#include <absl/status/statusor.h>
#include <absl/strings/match.h>
#include <absl/strings/str_cat.h>
#include <absl/time/clock.h>
#include <absl/time/time.h>
#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>

#include "bnn/build_info.h"
#include "bnn/methods/registry.h"
#include "bnn/status.h"

#include "server/admission/memory_budget.h"
#include "server/common/flag_names.h"
#include "server/jobs/job_events.h"
#include "server/jobs/job_execution.h"
#include "server/jobs/job_process_options.h"
#include "server/metrics/server_metrics.h"
#include "server/server.h"
#include "server/store/data_dir_lock.h"
#include "server/store/dataset_store.h"
#include "server/store/job_store.h"
#include "server/store/metadata_dir.h"
#include "server/store/model_store.h"
#include "server/store/predictor_cache.h"
#include "server/store/snapshot_store.h"

namespace {
// The store and job flags mean what bnn-server's do, with its defaults.
const bnn::server::Server::Options kServerDefaults;
}  // namespace

ABSL_FLAG(std::string, job_id, "",
          "The stored job to run (required): QUEUED, INTERRUPTED, or RUNNING "
          "with a heartbeat older than --job-takeover-seconds.");
ABSL_FLAG(std::string, data_dir, "",
          "Directory of this process (required; locked while it runs). "
          "With SQLite it is the server's data directory, holding "
          "metadata.db (stop the server first: one process uses it); with "
          "--metadata=postgres://... a scratch directory of its own.");
ABSL_FLAG(std::string, metadata, kServerDefaults.metadata,
          "Metadata store: empty = SQLite in <data-dir>/metadata.db, or the "
          "PostgreSQL URI the servers share.");
ABSL_FLAG(std::string, blob_dir, kServerDefaults.blob_dir,
          "Blob directory: empty = <data-dir>/blobs; required with "
          "PostgreSQL (the servers' shared --blob-dir).");
ABSL_FLAG(int, threads, kServerDefaults.job_process.threads,
          "OpenMP threads of the training; 0 = one per core. A resumed job "
          "equals an uninterrupted run only under the same count.");
ABSL_FLAG(double, checkpoint_seconds,
          kServerDefaults.job_process.checkpoint_seconds,
          "Checkpoint this often (seconds of training); 0 = only on SIGTERM.");
ABSL_FLAG(double, job_heartbeat_seconds,
          kServerDefaults.job_process.job_heartbeat_seconds,
          "How often the job's heartbeat is recorded in the store. > 0");
ABSL_FLAG(double, job_takeover_seconds,
          kServerDefaults.job_process.job_takeover_seconds,
          "A RUNNING job whose heartbeat is older than this may be claimed. > "
          "--job-heartbeat-seconds");
ABSL_FLAG(double, claim_wait_seconds, -1,
          "How long to wait, at most, for a job RUNNING under another "
          "claimant whose heartbeat is fresh to become claimable (its "
          "heartbeat older than --job-takeover-seconds), trying again "
          "every --job-heartbeat-seconds; 0 = fail at once. -1 (the "
          "default) = --job-takeover-seconds + 2 x --job-heartbeat-seconds.");
ABSL_FLAG(int64_t, memory_budget_bytes, kServerDefaults.memory_budget_bytes,
          "Bytes the job may hold by the core's estimate; 0 = a share of the "
          "machine's (or cgroup's) memory, as bnn-server.");

namespace bnn::server {
namespace {

struct Flags {
  std::string job_id;
  std::string data_dir;
  std::string metadata;
  std::string blob_dir;
  // --threads, --checkpoint-seconds, --job-heartbeat-seconds and
  // --job-takeover-seconds, as bnn-server takes them.
  JobProcessOptions job_process;
  // -1: job_takeover_seconds + 2 * job_heartbeat_seconds (ClaimWait()).
  double claim_wait_seconds = -1;
  int64_t memory_budget_bytes = 0;

  absl::Duration ClaimWait() const {
    return absl::Seconds(claim_wait_seconds == -1
                             ? job_process.job_takeover_seconds +
                                   2 * job_process.job_heartbeat_seconds
                             : claim_wait_seconds);
  }
};

absl::Status Validate(const Flags& f) {
  if (f.job_id.empty()) {
    return absl::InvalidArgumentError("--job-id is required");
  }
  if (f.data_dir.empty()) {
    return absl::InvalidArgumentError("--data-dir is required");
  }
  if (!f.metadata.empty() && f.blob_dir.empty()) {
    return absl::InvalidArgumentError(
        "--blob-dir is required with a PostgreSQL --metadata (the servers' "
        "shared blob directory)");
  }
  BNN_RETURN_IF_ERROR(f.job_process.Validate());
  if (!(f.claim_wait_seconds >= 0 || f.claim_wait_seconds == -1)) {
    return absl::InvalidArgumentError(
        absl::StrCat("--claim-wait-seconds = ", f.claim_wait_seconds,
                     " must be >= 0, or -1 (--job-takeover-seconds + 2 x "
                     "--job-heartbeat-seconds)"));
  }
  if (f.memory_budget_bytes < 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--memory-budget-bytes = ", f.memory_budget_bytes, " must be >= 0"));
  }
  return absl::OkStatus();
}

// The process's exit status for how the job ended (see the file comment).
int ExitCode(JobOutcome outcome) {
  switch (outcome) {
    case JobOutcome::kSucceeded:
      return 0;
    case JobOutcome::kCancelled:
      return 2;
    case JobOutcome::kInterrupted:
      return 3;
    case JobOutcome::kLost:
      return 4;
    case JobOutcome::kFailed:
    case JobOutcome::kUncommitted:
      return 1;
  }
  return 1;
}

// Claims the job, waiting while another claimant's heartbeat is fresh (see
// the file comment). nullopt when SIGTERM or SIGINT stopped the wait.
absl::StatusOr<std::optional<store::JobRecord>> ClaimWhenStale(
    const Flags& f, const std::string& claimant, JobStore& jobs,
    const sigset_t& signals) {
  const absl::Duration takeover =
      absl::Seconds(f.job_process.job_takeover_seconds);
  const absl::Time deadline = absl::Now() + f.ClaimWait();
  bool logged = false;
  while (true) {
    absl::StatusOr<store::JobRecord> job =
        jobs.ClaimJob(f.job_id, claimant, absl::Now() - takeover);
    if (job.ok()) return *std::move(job);
    if (!IsClaimedByLiveClaimant(job.status())) return job.status();
    const absl::Time now = absl::Now();
    if (now >= deadline) {
      return absl::FailedPreconditionError(absl::StrCat(
          job.status().message(), "; still so after waiting ",
          absl::FormatDuration(f.ClaimWait()), " (--claim-wait-seconds)"));
    }
    if (!logged) {
      spdlog::info(
          "{}; waiting until its heartbeat is older than "
          "--job-takeover-seconds ({}), at most {} (--claim-wait-seconds)",
          std::string(job.status().message()), absl::FormatDuration(takeover),
          absl::FormatDuration(f.ClaimWait()));
      logged = true;
    }
    const timespec wait = absl::ToTimespec(std::min(
        absl::Seconds(f.job_process.job_heartbeat_seconds), deadline - now));
    const int signal_number = sigtimedwait(&signals, nullptr, &wait);
    if (signal_number == SIGTERM || signal_number == SIGINT) {
      spdlog::info("{}: stopped waiting for the claim",
                   strsignal(signal_number));
      return std::nullopt;
    }
  }
}

// Runs the job; returns the exit status, having printed the one-line
// reason of a non-zero one. SIGTERM and SIGINT (blocked by the caller in
// every thread) interrupt the job.
absl::StatusOr<int> Run(const Flags& f, const sigset_t& signals) {
  BNN_ASSIGN_OR_RETURN(const std::unique_ptr<DataDirLock> lock,
                       DataDirLock::Acquire(f.data_dir));
  std::string runner;
  if (!f.metadata.empty()) {
    // Its own server id: a restart of this process on the same data
    // directory resumes the job at once (JobStore::Open).
    BNN_ASSIGN_OR_RETURN(runner, LoadOrCreateServerId(f.data_dir));
  }
  int64_t budget_bytes = f.memory_budget_bytes;
  if (budget_bytes == 0) {
    BNN_ASSIGN_OR_RETURN(const MachineMemory machine, ReadMachineMemory());
    budget_bytes = DefaultMemoryBudgetBytes(machine);
  }
  MemoryBudget memory_budget(budget_bytes);
  MetadataDir::Options store_options;
  store_options.postgres_uri = f.metadata;
  store_options.blob_dir = f.blob_dir;
  BNN_ASSIGN_OR_RETURN(MetadataDir dir,
                       MetadataDir::Open(f.data_dir, store_options));
  DatasetStore datasets(dir.metadata.get(), dir.blobs.get());
  SnapshotStore snapshots(dir.metadata.get(), dir.blobs.get());
  BNN_ASSIGN_OR_RETURN(
      const std::unique_ptr<ModelStore> models,
      ModelStore::Open(kServerDefaults.ModelStoreOptions(), &snapshots));
  BNN_ASSIGN_OR_RETURN(const std::unique_ptr<PredictorCache> predictors,
                       PredictorCache::Create({}, &snapshots));
  BNN_ASSIGN_OR_RETURN(
      const std::unique_ptr<JobStore> jobs,
      JobStore::Open(dir.metadata.get(), dir.checkpoint_dir, runner));
  ServerMetrics metrics;
  JobEvents events;

  JobExecution::Options options;
  options.claimant = ReplicaId(runner.empty() ? "bnn-train" : runner);
  options.compute_threads = f.job_process.threads;
  // The process trains and does nothing else.
  options.training_nice = 0;
  options.checkpoint_interval = absl::Seconds(f.job_process.checkpoint_seconds);
  options.heartbeat_interval =
      absl::Seconds(f.job_process.job_heartbeat_seconds);
  options.on_succeeded = PublishOnSuccess(models.get());
  JobExecution execution(options, jobs.get(), &datasets, &snapshots,
                         predictors.get(), &MethodRegistry::Builtin(), &metrics,
                         &memory_budget, &events);
  execution.AdoptSnapshots();

  BNN_ASSIGN_OR_RETURN(const std::optional<store::JobRecord> claimed,
                       ClaimWhenStale(f, options.claimant, *jobs, signals));
  if (!claimed.has_value()) {
    std::cerr << "bnn-train: job " << f.job_id
              << " was not claimed: stopped by a signal while another "
                 "claimant's heartbeat was fresh; the job is as it was"
              << std::endl;
    return ExitCode(JobOutcome::kInterrupted);
  }
  const store::JobRecord& job = *claimed;
  spdlog::info("bnn-train claimed job {} as {}", job.job_id(),
               options.claimant);

  JobControl control;
  std::atomic<bool> done{false};
  std::thread signal_waiter([&] {
    const timespec poll = {0, 100 * 1000 * 1000};
    while (!done.load()) {
      const int signal_number = sigtimedwait(&signals, nullptr, &poll);
      if (signal_number == SIGTERM || signal_number == SIGINT) {
        spdlog::info("{}: the job checkpoints and stops",
                     strsignal(signal_number));
        control.interrupted = true;
        control.stop = true;
      }
    }
  });
  const JobOutcome outcome = execution.Run(job, control);
  done = true;
  signal_waiter.join();

  const int code = ExitCode(outcome);
  if (code != 0) {
    const absl::StatusOr<store::JobRecord> ended = jobs->Get(f.job_id);
    std::string reason;
    switch (outcome) {
      case JobOutcome::kCancelled:
        reason = "was cancelled";
        break;
      case JobOutcome::kInterrupted:
        reason = "was interrupted; it resumes from its checkpoint";
        break;
      case JobOutcome::kLost:
        reason = "was taken over by another process";
        break;
      case JobOutcome::kUncommitted:
        reason = "ended, but its state could not be recorded (see the log)";
        break;
      default:
        reason =
            absl::StrCat("FAILED: ", ended.ok() ? ended->error()
                                                : ended.status().ToString());
    }
    std::cerr << "bnn-train: job " << f.job_id << " " << reason << std::endl;
  }
  return code;
}

}  // namespace
}  // namespace bnn::server

int main(int argc, char** argv) {
  // Blocked in every thread: only sigtimedwait() sees them.
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGINT);
  sigaddset(&signals, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);

  absl::SetProgramUsageMessage(
      "bnn-train --job-id ID --data-dir DIR [--metadata postgres://... "
      "--blob-dir DIR] [--threads N]: runs one stored training job to its "
      "end; exit 0 when it SUCCEEDED");
  absl::FlagsUsageConfig usage;
  usage.contains_help_flags = [](absl::string_view path) {
    return absl::EndsWith(path, "server/bnn_train_main.cc");
  };
  usage.contains_helpshort_flags = usage.contains_help_flags;
  usage.normalize_filename = [](absl::string_view path) {
    const size_t at = path.rfind("server/bnn_train_main.cc");
    return std::string(at == absl::string_view::npos ? path : path.substr(at));
  };
  usage.version_string = [] {
    return absl::StrCat(bnn::VersionLine("bnn-train"), "\n");
  };
  absl::SetFlagsUsageConfig(usage);
  std::vector<std::string> args = bnn::server::NormalizeFlagNames(argc, argv);
  std::vector<char*> arg_pointers;
  for (std::string& arg : args) arg_pointers.push_back(arg.data());
  absl::ParseCommandLine(static_cast<int>(arg_pointers.size()),
                         arg_pointers.data());
  spdlog::set_default_logger(spdlog::stderr_color_mt("bnn-train"));

  bnn::server::Flags flags;
  flags.job_id = absl::GetFlag(FLAGS_job_id);
  flags.data_dir = absl::GetFlag(FLAGS_data_dir);
  flags.metadata = absl::GetFlag(FLAGS_metadata);
  flags.blob_dir = absl::GetFlag(FLAGS_blob_dir);
  flags.job_process.threads = absl::GetFlag(FLAGS_threads);
  flags.job_process.checkpoint_seconds =
      absl::GetFlag(FLAGS_checkpoint_seconds);
  flags.job_process.job_heartbeat_seconds =
      absl::GetFlag(FLAGS_job_heartbeat_seconds);
  flags.job_process.job_takeover_seconds =
      absl::GetFlag(FLAGS_job_takeover_seconds);
  flags.claim_wait_seconds = absl::GetFlag(FLAGS_claim_wait_seconds);
  flags.memory_budget_bytes = absl::GetFlag(FLAGS_memory_budget_bytes);
  const absl::Status valid = bnn::server::Validate(flags);
  const absl::StatusOr<int> code =
      valid.ok() ? bnn::server::Run(flags, signals) : valid;
  if (!code.ok()) {
    std::cerr << "bnn-train: job " << flags.job_id << ": "
              << code.status().ToString() << std::endl;
    return 1;
  }
  return *code;
}
