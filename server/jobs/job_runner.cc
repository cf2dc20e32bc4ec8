#include "server/jobs/job_runner.h"

#include <optional>
#include <utility>

#include <absl/strings/ascii.h>
#include <absl/strings/str_cat.h>
#include <absl/time/clock.h>
#include <absl/time/time.h>
#include <spdlog/spdlog.h>

#include "bnn/io/file.h"
#include "bnn/status.h"

#include "server/common/log.h"

namespace bnn::server {
namespace {

using State = store::JobRecord::State;

int64_t NowUnixMs() { return absl::ToUnixMillis(absl::Now()); }

// "queued", "running", ...: the state as the metrics and logs name it.
std::string StateName(State state) {
  return absl::AsciiStrToLower(store::JobRecord::State_Name(state));
}

JobExecution::Options ExecutionOptions(const JobRunner::Options& options) {
  JobExecution::Options execution;
  execution.claimant =
      options.claimant.empty() ? ReplicaId("") : options.claimant;
  execution.compute_threads = options.compute_threads;
  execution.training_nice = options.training_nice;
  execution.checkpoint_interval = options.checkpoint_interval;
  execution.heartbeat_interval = options.heartbeat_interval;
  execution.on_succeeded = options.on_succeeded;
  return execution;
}

}  // namespace

absl::StatusOr<std::unique_ptr<JobRunner>> JobRunner::Create(
    const Options& options, JobStore* jobs, DatasetStore* datasets,
    SnapshotStore* snapshots, PredictorCache* predictors,
    const MethodRegistry* registry, ServerMetrics* metrics,
    MemoryBudget* memory_budget) {
  if (options.max_concurrent_jobs < 1) {
    return absl::InvalidArgumentError(absl::StrCat(
        "max_concurrent_jobs ", options.max_concurrent_jobs, " must be >= 1"));
  }
  if (options.compute_threads < 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "compute_threads ", options.compute_threads, " must be >= 0"));
  }
  if (options.max_queued_jobs < 1) {
    return absl::InvalidArgumentError(absl::StrCat(
        "max_queued_jobs ", options.max_queued_jobs, " must be >= 1"));
  }
  if (options.checkpoint_interval < absl::ZeroDuration()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "checkpoint_interval ",
        absl::FormatDuration(options.checkpoint_interval), " must be >= 0"));
  }
  if (options.poll_interval <= absl::ZeroDuration()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "poll_interval ", absl::FormatDuration(options.poll_interval),
        " must be > 0"));
  }
  if (options.heartbeat_interval <= absl::ZeroDuration()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "heartbeat_interval ", absl::FormatDuration(options.heartbeat_interval),
        " must be > 0"));
  }
  if (options.takeover_after <= options.heartbeat_interval) {
    return absl::InvalidArgumentError(absl::StrCat(
        "takeover_after ", absl::FormatDuration(options.takeover_after),
        " must be > heartbeat_interval ",
        absl::FormatDuration(options.heartbeat_interval)));
  }
  std::unique_ptr<JobRunner> runner(
      new JobRunner(options, jobs, datasets, snapshots, predictors, registry,
                    metrics, memory_budget));
  if (options.kubernetes.has_value()) {
    BNN_ASSIGN_OR_RETURN(runner->launcher_,
                         kubernetes::JobLauncher::Create(*options.kubernetes));
    const kubernetes::LauncherOptions& k8s = runner->launcher_->options();
    Log(spdlog::level::info,
        "job runner launches each job as a Kubernetes Job running bnn-train",
        {{"api_server", k8s.api_server},
         {"namespace", k8s.job_namespace},
         {"image", k8s.image}});
    runner->Reconcile();
    JobRunner* r = runner.get();
    runner->monitor_ = std::make_unique<kubernetes::JobMonitor>(
        runner->launcher_.get(),
        [r](const std::string& job_id,
            const std::optional<kubernetes::LaunchedJob>& job) {
          r->KubernetesJobChanged(job_id, job);
        },
        [](const absl::Status& status) {
          Log(spdlog::level::warn,
              "cannot list the Kubernetes Jobs; retried at the next poll",
              {{"error", std::string(status.message())}});
        });
    absl::MutexLock lock(&runner->mu_);
    runner->workers_ = std::make_unique<ThreadPool>(1);
    runner->workers_->Schedule([r] { r->RetryLaunches(); });
    return runner;
  }
  Log(spdlog::level::info,
      options.run_jobs ? "job runner claims jobs from the store"
                       : "job runner queues jobs for other servers (role "
                         "serve): it trains none",
      {{"claimant", runner->execution_.options().claimant},
       {"workers",
        absl::StrCat(options.run_jobs ? options.max_concurrent_jobs : 0)}});
  if (options.run_jobs) {
    absl::MutexLock lock(&runner->mu_);
    // Every worker looks at once (jobs to resume, jobs queued meanwhile).
    runner->wakeups_ = options.max_concurrent_jobs;
    runner->workers_ =
        std::make_unique<ThreadPool>(options.max_concurrent_jobs);
    for (int i = 0; i < options.max_concurrent_jobs; ++i) {
      runner->workers_->Schedule([r = runner.get()] { r->Work(); });
    }
  }
  return runner;
}

JobRunner::JobRunner(const Options& options, JobStore* jobs,
                     DatasetStore* datasets, SnapshotStore* snapshots,
                     PredictorCache* predictors, const MethodRegistry* registry,
                     ServerMetrics* metrics, MemoryBudget* memory_budget)
    : options_(options),
      jobs_(jobs),
      metrics_(metrics),
      execution_(ExecutionOptions(options), jobs, datasets, snapshots,
                 predictors, registry, metrics, memory_budget, &events_) {
  execution_.AdoptSnapshots();
  PublishJobCounts();
}

JobRunner::~JobRunner() { Shutdown(); }

void JobRunner::BeginShutdown() {
  {
    absl::MutexLock lock(&mu_);
    if (stopping_) return;
    stopping_ = true;
    for (auto& [id, control] : controls_) {
      control->interrupted = true;
      control->stop = true;
    }
  }
  events_.Close();
}

bool JobRunner::AwaitStopped(absl::Time deadline) {
  std::set<std::string> still_running;
  {
    absl::MutexLock lock(&mu_);
    auto none_running = [this]() ABSL_NO_THREAD_SAFETY_ANALYSIS {
      return controls_.empty();
    };
    if (mu_.AwaitWithDeadline(absl::Condition(&none_running), deadline)) {
      return true;
    }
    for (const auto& [id, control] : controls_) still_running.insert(id);
  }
  const std::string& claimant = execution_.options().claimant;
  for (const std::string& id : still_running) {
    Log(spdlog::level::warn,
        "job still in a training step at the end of the shutdown grace; "
        "recorded interrupted, to resume from its last checkpoint",
        {{"job_id", id}, {"state", "interrupted"}});
    const absl::StatusOr<store::JobRecord> job =
        jobs_->Update(id, [&](store::JobRecord* r) {
          if (r->claimant() != claimant) return false;
          if (r->state() == store::JobRecord::CANCELLING) {
            // As the next process's store would record it.
            r->set_state(store::JobRecord::CANCELLED);
            r->set_finished_unix_ms(NowUnixMs());
            r->set_heartbeat_unix_ms(0);
            return true;
          }
          if (r->state() != store::JobRecord::RUNNING) return false;
          r->set_state(store::JobRecord::INTERRUPTED);
          r->set_heartbeat_unix_ms(0);
          return true;
        });
    if (job.ok()) execution_.PublishState(*job);
    metrics_->JobFinished(id, job.ok() ? StateName(job->state()) : "");
  }
  return false;
}

void JobRunner::Shutdown() {
  BeginShutdown();
  AwaitStopped(absl::InfiniteFuture());
  // Joins the workers, which see stopping_ and return.
  workers_.reset();
  // Kubernetes mode: the Jobs run on; only the monitor stops (after the
  // launch retries, which poke it). Not under mu_: its callbacks may be
  // running.
  monitor_.reset();
}

void JobRunner::Work() {
  const std::string& claimant = execution_.options().claimant;
  while (true) {
    bool woken_here = false;
    {
      absl::MutexLock lock(&mu_);
      auto woken = [this]() ABSL_NO_THREAD_SAFETY_ANALYSIS {
        return stopping_ || wakeups_ > 0;
      };
      mu_.AwaitWithTimeout(absl::Condition(&woken), options_.poll_interval);
      if (stopping_) return;
      if (wakeups_ > 0) {
        --wakeups_;
        woken_here = true;
      }
    }
    // A poll reads first: claiming takes a write transaction (with
    // PostgreSQL, the store's write lock), only worth it for a job.
    if (!woken_here &&
        !jobs_->HasClaimable(absl::Now() - options_.takeover_after)) {
      continue;
    }
    // Claims until none is left.
    while (true) {
      std::shared_ptr<JobControl> control;
      absl::StatusOr<std::optional<store::JobRecord>> job;
      {
        // Under mu_, so that a job either stays QUEUED (or INTERRUPTED)
        // for the next claimant or is in controls_ before BeginShutdown()
        // and AwaitStopped() look.
        absl::MutexLock lock(&mu_);
        if (stopping_) return;
        job = jobs_->Claim(claimant, absl::Now() - options_.takeover_after);
        if (!job.ok()) {
          spdlog::error("cannot claim a job: {}", job.status().ToString());
          break;
        }
        if (!job->has_value()) break;
        control = std::make_shared<JobControl>();
        controls_[(*job)->job_id()] = control;
      }
      RunClaimed(**job, *control);
    }
  }
}

void JobRunner::RunClaimed(const store::JobRecord& job, JobControl& control) {
  PublishJobCounts();
  execution_.Run(job, control);
  {
    absl::MutexLock lock(&mu_);
    controls_.erase(job.job_id());
  }
  PublishJobCounts();
}

absl::StatusOr<store::JobRecord> JobRunner::Submit(store::JobRecord record) {
  BNN_ASSIGN_OR_RETURN(record, Queue(std::move(record)));
  if (launcher_ == nullptr) return record;
  LaunchJob(record.job_id());
  // A launch that failed for good failed the job.
  return jobs_->Get(record.job_id());
}

absl::StatusOr<store::JobRecord> JobRunner::Queue(store::JobRecord record) {
  absl::MutexLock lock(&mu_);
  if (stopping_) return absl::UnavailableError("the server is shutting down");
  const std::map<State, int64_t> counts = jobs_->CountByState();
  const auto queued = counts.find(store::JobRecord::QUEUED);
  if (queued != counts.end() && queued->second >= options_.max_queued_jobs) {
    return absl::ResourceExhaustedError(absl::StrCat(
        queued->second,
        " jobs are queued, the server limit (--max-queued-jobs "
        "= ",
        options_.max_queued_jobs,
        "); retry once a job has started, or cancel a queued one"));
  }
  BNN_ASSIGN_OR_RETURN(record, jobs_->Create(std::move(record)));
  execution_.PublishState(record);
  ++wakeups_;
  if (launcher_ != nullptr) launched_.insert(record.job_id());
  Log(spdlog::level::info, "job queued",
      {{"job_id", record.job_id()},
       {"state", "queued"},
       {"method", record.method()},
       {"dataset_id", record.dataset_id()}});
  PublishJobCounts();
  return record;
}

absl::StatusOr<store::JobRecord> JobRunner::Cancel(absl::string_view job_id) {
  const int64_t now = NowUnixMs();
  State before = store::JobRecord::STATE_UNSPECIFIED;
  BNN_ASSIGN_OR_RETURN(const store::JobRecord job,
                       jobs_->Update(job_id, [&](store::JobRecord* r) {
                         before = r->state();
                         switch (r->state()) {
                           case store::JobRecord::QUEUED:
                           case store::JobRecord::INTERRUPTED:
                             r->set_state(store::JobRecord::CANCELLED);
                             r->set_finished_unix_ms(now);
                             return true;
                           case store::JobRecord::RUNNING:
                             r->set_state(store::JobRecord::CANCELLING);
                             return true;
                           default:
                             return false;
                         }
                       }));
  if (job.state() == before) return job;  // nothing changed
  if (launcher_ != nullptr && job.state() == store::JobRecord::CANCELLING) {
    // Kubernetes mode: the job's pod runs it; bnn-train sees CANCELLING at
    // its next heartbeat, and deleting the Job stops the pod.
    execution_.PublishState(job);
    Log(spdlog::level::info, "job cancelling: its Kubernetes Job is deleted",
        {{"job_id", job.job_id()}, {"state", "cancelling"}});
    DeleteJob(job.job_id());
    PublishJobCounts();
    return jobs_->Get(job_id);
  }
  if (job.state() == store::JobRecord::CANCELLING) {
    absl::MutexLock lock(&mu_);
    if (auto it = controls_.find(job_id); it != controls_.end()) {
      it->second->cancelled = true;
      it->second->stop = true;
    }
  } else {
    // Never ran again in this process: its checkpoint is of no use.
    RemoveFile(jobs_->CheckpointPath(job_id)).IgnoreError();
  }
  if (launcher_ != nullptr) DeleteJob(job.job_id());
  execution_.PublishState(job);
  Log(spdlog::level::info,
      job.state() == store::JobRecord::CANCELLED
          ? "job cancelled before it ran"
          : "job cancelling: it stops when its current step ends",
      {{"job_id", job.job_id()},
       {"state", StateName(job.state())},
       {"method", job.method()}});
  PublishJobCounts();
  return job;
}

void JobRunner::PublishJobCounts() {
  const std::map<State, int64_t> counts = jobs_->CountByState();
  for (const State state :
       {store::JobRecord::QUEUED, store::JobRecord::RUNNING,
        store::JobRecord::SUCCEEDED, store::JobRecord::FAILED,
        store::JobRecord::CANCELLED, store::JobRecord::INTERRUPTED,
        store::JobRecord::CANCELLING}) {
    const auto it = counts.find(state);
    metrics_->training_jobs(StateName(state))
        .Set(it == counts.end() ? 0.0 : static_cast<double>(it->second));
  }
}

void JobRunner::LaunchJob(const std::string& job_id) {
  const absl::StatusOr<kubernetes::LaunchedJob> launched =
      launcher_->Launch(job_id);
  if (launched.ok()) {
    metrics_->kubernetes_job_launches("launched").Increment();
    Log(spdlog::level::info, "kubernetes job launched",
        {{"job_id", job_id}, {"kubernetes_job", launched->name}});
    {
      absl::MutexLock lock(&mu_);
      launched_.insert(job_id);
    }
    if (monitor_ != nullptr) monitor_->PollNow();
    return;
  }
  const absl::Status& status = launched.status();
  if (absl::IsUnavailable(status) || absl::IsDeadlineExceeded(status)) {
    metrics_->kubernetes_job_launches("retry").Increment();
    Log(spdlog::level::warn,
        "cannot launch the kubernetes job yet; the job stays queued and the "
        "launch is retried",
        {{"job_id", job_id}, {"error", std::string(status.message())}});
    absl::MutexLock lock(&mu_);
    launch_retries_.insert(job_id);
    return;
  }
  metrics_->kubernetes_job_launches("failed").Increment();
  EndJob(job_id,
         absl::StrCat("cannot launch the Kubernetes Job: ", status.message()));
}

void JobRunner::Reconcile() {
  const int64_t stale_before_ms =
      absl::ToUnixMillis(absl::Now() - options_.takeover_after);
  JobFilter filter;
  filter.states = {store::JobRecord::QUEUED, store::JobRecord::INTERRUPTED,
                   store::JobRecord::RUNNING, store::JobRecord::CANCELLING};
  for (const store::JobRecord& job : jobs_->List(filter)) {
    if (job.state() == store::JobRecord::CANCELLING) {
      DeleteJob(job.job_id());
    } else if (job.state() != store::JobRecord::RUNNING ||
               job.heartbeat_unix_ms() < stale_before_ms) {
      LaunchJob(job.job_id());
    }
  }
}

void JobRunner::RetryLaunches() {
  while (true) {
    std::set<std::string> retries;
    {
      absl::MutexLock lock(&mu_);
      auto stopping = [this]()
                          ABSL_NO_THREAD_SAFETY_ANALYSIS { return stopping_; };
      mu_.AwaitWithTimeout(absl::Condition(&stopping), options_.poll_interval);
      if (stopping_) return;
      retries.swap(launch_retries_);
    }
    for (const std::string& job_id : retries) {
      const absl::StatusOr<store::JobRecord> job = jobs_->Get(job_id);
      // Cancelled (or claimed by some process) meanwhile: nothing to launch.
      if (job.ok() && job->state() == store::JobRecord::QUEUED) {
        LaunchJob(job_id);
      }
    }
    LaunchQueued();
  }
}

void JobRunner::LaunchQueued() {
  // What launched_ held before the listing: a job added after it (a Submit
  // here) may be missing from the listing and must not be forgotten.
  std::set<std::string> known;
  {
    absl::MutexLock lock(&mu_);
    known = launched_;
  }
  JobFilter filter;
  filter.states = {store::JobRecord::QUEUED};
  std::set<std::string> queued;
  for (const store::JobRecord& job : jobs_->List(filter)) {
    queued.insert(job.job_id());
  }
  std::vector<std::string> to_launch;
  {
    absl::MutexLock lock(&mu_);
    if (stopping_) return;
    for (const std::string& job_id : known) {
      if (queued.count(job_id) == 0) launched_.erase(job_id);
    }
    for (const std::string& job_id : queued) {
      if (launched_.count(job_id) == 0 && launch_retries_.count(job_id) == 0) {
        to_launch.push_back(job_id);
      }
    }
  }
  for (const std::string& job_id : to_launch) {
    Log(spdlog::level::info,
        "launching a job another server queued (or queued before this "
        "process started)",
        {{"job_id", job_id}});
    LaunchJob(job_id);
  }
}

void JobRunner::DeleteJob(const std::string& job_id) {
  const absl::StatusOr<bool> deleted = launcher_->Delete(job_id);
  if (!deleted.ok()) {
    // The job stays CANCELLING; the next start deletes the Job again.
    Log(spdlog::level::warn, "cannot delete the kubernetes job",
        {{"job_id", job_id},
         {"error", std::string(deleted.status().message())}});
    return;
  }
  Log(spdlog::level::info,
      *deleted ? "kubernetes job deleted" : "no kubernetes job to delete",
      {{"job_id", job_id}});
  // Deleted at once (or there was none): the monitor may never have seen
  // it, so a CANCELLING job ends here; otherwise when the monitor sees it
  // vanish.
  if (absl::IsNotFound(launcher_->Get(job_id).status())) {
    EndJob(job_id, "the Kubernetes Job was deleted");
  }
  if (monitor_ != nullptr) monitor_->PollNow();
}

void JobRunner::KubernetesJobChanged(
    const std::string& job_id,
    const std::optional<kubernetes::LaunchedJob>& job) {
  // bnn-train moves jobs in the store itself; a Job's change is a good
  // moment to count again.
  PublishJobCounts();
  if (!job.has_value()) {
    Log(spdlog::level::info, "kubernetes job gone", {{"job_id", job_id}});
    EndJob(job_id, "the Kubernetes Job was deleted");
    return;
  }
  switch (job->status.phase) {
    case kubernetes::JobPhase::kSucceeded:
      Log(spdlog::level::info, "kubernetes job succeeded",
          {{"job_id", job_id}, {"kubernetes_job", job->name}});
      EndJob(job_id, "the Kubernetes Job ended without a result");
      return;
    case kubernetes::JobPhase::kFailed:
      Log(spdlog::level::info, "kubernetes job failed",
          {{"job_id", job_id},
           {"kubernetes_job", job->name},
           {"reason", job->status.reason}});
      EndJob(job_id,
             absl::StrCat("the Kubernetes Job failed: ", job->status.reason));
      return;
    default:
      // Pending or running: bnn-train records RUNNING when it claims.
      return;
  }
}

void JobRunner::EndJob(const std::string& job_id, const std::string& error) {
  const int64_t now = NowUnixMs();
  State before = store::JobRecord::STATE_UNSPECIFIED;
  const absl::StatusOr<store::JobRecord> job =
      jobs_->Update(job_id, [&](store::JobRecord* r) {
        before = r->state();
        switch (r->state()) {
          case store::JobRecord::CANCELLING:
            r->set_state(store::JobRecord::CANCELLED);
            break;
          case store::JobRecord::QUEUED:
          case store::JobRecord::RUNNING:
          case store::JobRecord::INTERRUPTED:
            r->set_state(store::JobRecord::FAILED);
            r->set_error(error);
            break;
          default:
            // Final: bnn-train (or a cancel) recorded its end.
            return false;
        }
        r->set_finished_unix_ms(now);
        r->set_heartbeat_unix_ms(0);
        // Fences a bnn-train still running (a pod in its termination grace
        // period): its next heartbeat finds another claimant, and it stops
        // without committing anything of the job.
        r->clear_claimant();
        return true;
      });
  if (!job.ok()) {
    Log(spdlog::level::err, "cannot record the end of a kubernetes job",
        {{"job_id", job_id}, {"error", std::string(job.status().message())}});
    return;
  }
  if (job->state() == before) return;
  RemoveFile(jobs_->CheckpointPath(job_id)).IgnoreError();
  execution_.PublishState(*job);
  Log(spdlog::level::info, "job ended by its kubernetes job",
      {{"job_id", job_id},
       {"state", StateName(job->state())},
       {"error", job->error()}});
  PublishJobCounts();
}

}  // namespace bnn::server
