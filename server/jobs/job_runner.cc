#include "server/jobs/job_runner.h"

#include <optional>
#include <utility>

#include <absl/strings/ascii.h>
#include <absl/strings/str_cat.h>
#include <absl/time/clock.h>
#include <absl/time/time.h>
#include <spdlog/spdlog.h>

#include "bnn/data/dataset.h"
#include "bnn/io/snapshot.h"
#include "bnn/model/model_spec.h"
#include "bnn/status.h"
#include "bnn/train/trainer.h"

#include "server/common/log.h"
#include "server/common/status_util.h"
#include "server/jobs/compute_threads.h"
#include "server/jobs/job_plan.h"

namespace bnn::server {
namespace {

using State = store::JobRecord::State;

int64_t NowUnixMs() { return absl::ToUnixMillis(absl::Now()); }

// "queued", "running", ...: the state as the metrics and logs name it.
std::string StateName(State state) {
  return absl::AsciiStrToLower(store::JobRecord::State_Name(state));
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
  std::unique_ptr<JobRunner> runner(
      new JobRunner(options, jobs, datasets, snapshots, predictors, registry,
                    metrics, memory_budget));
  const std::vector<store::JobRecord> queued = jobs->Queued();
  absl::MutexLock lock(&runner->mu_);
  for (const store::JobRecord& job : queued) {
    runner->Enqueue(job.job_id());
    Log(spdlog::level::info, "job queued again after a restart",
        {{"job_id", job.job_id()},
         {"state", "queued"},
         {"method", job.method()}});
  }
  return runner;
}

void JobRunner::AdoptSnapshots() {
  for (const store::JobRecord& job : jobs_->List()) {
    if (job.pending_snapshot_id().empty() ||
        job.state() != store::JobRecord::FAILED ||
        job.error() != kRestartedJobError) {
      continue;
    }
    const bool written = snapshots_->GetMeta(job.pending_snapshot_id()).ok();
    const absl::StatusOr<store::JobRecord> updated =
        jobs_->Update(job.job_id(), [&](store::JobRecord* r) {
          if (written) {
            r->set_state(store::JobRecord::SUCCEEDED);
            r->set_snapshot_id(r->pending_snapshot_id());
            r->clear_error();
            r->set_progress(1.0);
          }
          r->clear_pending_snapshot_id();
          return true;
        });
    if (!updated.ok()) {
      spdlog::error("job {}: cannot record its state: {}", job.job_id(),
                    updated.status().ToString());
    } else if (written) {
      Log(spdlog::level::info,
          "the server stopped after writing the job's snapshot; the job "
          "succeeded with it",
          {{"job_id", job.job_id()},
           {"state", "succeeded"},
           {"snapshot_id", job.pending_snapshot_id()}});
    }
  }
}

JobRunner::JobRunner(const Options& options, JobStore* jobs,
                     DatasetStore* datasets, SnapshotStore* snapshots,
                     PredictorCache* predictors, const MethodRegistry* registry,
                     ServerMetrics* metrics, MemoryBudget* memory_budget)
    : options_(options),
      jobs_(jobs),
      datasets_(datasets),
      snapshots_(snapshots),
      predictors_(predictors),
      registry_(registry),
      metrics_(metrics),
      memory_budget_(memory_budget),
      workers_(std::make_unique<ThreadPool>(options.max_concurrent_jobs)) {
  AdoptSnapshots();
  PublishJobCounts();
}

JobRunner::~JobRunner() { Shutdown(); }

void JobRunner::BeginShutdown() {
  absl::MutexLock lock(&mu_);
  if (stopping_) return;
  stopping_ = true;
  for (auto& [id, cancel] : cancel_flags_) *cancel = true;
}

bool JobRunner::AwaitStopped(absl::Time deadline) {
  std::set<std::string> still_running;
  {
    absl::MutexLock lock(&mu_);
    auto none_running = [this]() ABSL_NO_THREAD_SAFETY_ANALYSIS {
      return running_.empty();
    };
    if (mu_.AwaitWithDeadline(absl::Condition(&none_running), deadline)) {
      return true;
    }
    still_running = running_;
  }
  const int64_t now = NowUnixMs();
  for (const std::string& id : still_running) {
    Log(spdlog::level::warn, "job still in a training step; recorded failed",
        {{"job_id", id}, {"state", "failed"}});
    jobs_
        ->Update(id,
                 [&](store::JobRecord* r) {
                   if (r->state() != store::JobRecord::RUNNING) return false;
                   r->set_state(store::JobRecord::FAILED);
                   r->set_error(std::string(kRestartedJobError));
                   r->set_finished_unix_ms(now);
                   return true;
                 })
        .IgnoreError();
    metrics_->JobFinished(id, "failed");
  }
  return false;
}

void JobRunner::Shutdown() {
  BeginShutdown();
  AwaitStopped(absl::InfiniteFuture());
  // Drains the queue: every queued job sees stopping_ and stays QUEUED.
  workers_.reset();
}

void JobRunner::Enqueue(const std::string& job_id) {
  cancel_flags_[job_id] = std::make_shared<std::atomic<bool>>(false);
  workers_->Schedule([this, job_id] { Run(job_id); });
}

absl::StatusOr<store::JobRecord> JobRunner::Submit(store::JobRecord record) {
  absl::MutexLock lock(&mu_);
  if (stopping_) return absl::UnavailableError("the server is shutting down");
  BNN_ASSIGN_OR_RETURN(record, jobs_->Create(std::move(record)));
  Enqueue(record.job_id());
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
  BNN_ASSIGN_OR_RETURN(store::JobRecord job,
                       jobs_->Update(job_id, [&](store::JobRecord* r) {
                         if (r->state() != store::JobRecord::QUEUED)
                           return false;
                         r->set_state(store::JobRecord::CANCELLED);
                         r->set_finished_unix_ms(now);
                         return true;
                       }));
  if (job.state() == store::JobRecord::CANCELLED &&
      job.finished_unix_ms() == now) {
    Log(spdlog::level::info, "job cancelled while queued",
        {{"job_id", job.job_id()},
         {"state", "cancelled"},
         {"method", job.method()}});
  }
  if (job.state() == store::JobRecord::RUNNING) {
    absl::MutexLock lock(&mu_);
    if (auto it = cancel_flags_.find(job_id); it != cancel_flags_.end()) {
      *it->second = true;
    }
  }
  PublishJobCounts();
  return job;
}

void JobRunner::Run(const std::string& job_id) {
  UseComputeThreads(options_.compute_threads);
  std::shared_ptr<std::atomic<bool>> cancel;
  absl::StatusOr<store::JobRecord> job;
  {
    // Under mu_, so that a job either stays QUEUED for the next process or
    // is in running_ before AwaitStopped() looks.
    absl::MutexLock lock(&mu_);
    cancel = cancel_flags_.at(job_id);
    if (stopping_) {
      cancel_flags_.erase(job_id);
      return;
    }
    job = jobs_->Update(job_id, [&](store::JobRecord* r) {
      if (r->state() != store::JobRecord::QUEUED) return false;
      r->set_state(store::JobRecord::RUNNING);
      r->set_started_unix_ms(NowUnixMs());
      return true;
    });
    if (job.ok() && job->state() == store::JobRecord::RUNNING) {
      running_.insert(job_id);
    }
  }
  bool stopping = false;
  if (job.ok() && job->state() == store::JobRecord::RUNNING) {
    PublishJobCounts();
    metrics_->JobStarted(job_id, job->method());
    Log(spdlog::level::info, "job running",
        {{"job_id", job_id}, {"state", "running"}, {"method", job->method()}});
    const absl::StatusOr<std::string> snapshot_id = Train(*job, *cancel);
    {
      absl::MutexLock lock(&mu_);
      stopping = stopping_;
    }
    job = jobs_->Update(job_id, [&](store::JobRecord* r) {
      r->clear_pending_snapshot_id();
      r->set_finished_unix_ms(NowUnixMs());
      if (snapshot_id.ok()) {
        r->set_state(store::JobRecord::SUCCEEDED);
        r->set_snapshot_id(*snapshot_id);
        r->set_progress(1.0);
      } else if (absl::IsCancelled(snapshot_id.status()) && !stopping) {
        r->set_state(store::JobRecord::CANCELLED);
      } else {
        r->set_state(store::JobRecord::FAILED);
        r->set_error(absl::IsCancelled(snapshot_id.status())
                         ? std::string(kRestartedJobError)
                         : snapshot_id.status().ToString());
      }
      return true;
    });
    metrics_->JobFinished(job_id, job.ok() ? StateName(job->state()) : "");
    if (job.ok() && job->error().empty()) {
      Log(spdlog::level::info, "job finished",
          {{"job_id", job_id},
           {"state", StateName(job->state())},
           {"method", job->method()}});
    } else if (job.ok()) {
      Log(spdlog::level::warn, "job finished",
          {{"job_id", job_id},
           {"state", StateName(job->state())},
           {"method", job->method()},
           {"error", job->error(), kMaxStatusMessageBytes}});
    }
  }
  if (!job.ok()) {
    spdlog::error("job {}: cannot record its state: {}", job_id,
                  job.status().ToString());
  }
  {
    absl::MutexLock lock(&mu_);
    cancel_flags_.erase(job_id);
    running_.erase(job_id);
  }
  PublishJobCounts();
}

absl::StatusOr<std::string> JobRunner::Train(const store::JobRecord& job,
                                             const std::atomic<bool>& cancel) {
  BNN_ASSIGN_OR_RETURN(const store::DatasetMeta dataset,
                       datasets_->Get(job.dataset_id(), job.dataset_version()));
  // A parent deleted since StartTraining fails the job with NotFound.
  std::optional<store::SnapshotMeta> parent_meta;
  if (!job.parent_snapshot_id().empty()) {
    BNN_ASSIGN_OR_RETURN(parent_meta,
                         snapshots_->GetMeta(job.parent_snapshot_id()));
  }
  BNN_ASSIGN_OR_RETURN(
      const TrainingPlan plan,
      PlanOfJob(job, dataset, parent_meta.has_value() ? &*parent_meta : nullptr,
                *registry_));
  BNN_ASSIGN_OR_RETURN(const MemoryEstimate estimate,
                       EstimateTrainingMemory(plan, *registry_));
  // Waits while other work holds the memory; cancellation and shutdown end
  // the wait.
  BNN_ASSIGN_OR_RETURN(
      const MemoryBudget::Reservation reservation,
      memory_budget_->Reserve(
          absl::StrCat("training job ", job.job_id()), estimate.bytes,
          estimate.PartsToString(), [&cancel]() -> absl::Status {
            if (cancel.load(std::memory_order_relaxed)) {
              return absl::CancelledError(
                  "training was cancelled while it waited for memory");
            }
            return absl::OkStatus();
          }));
  BNN_ASSIGN_OR_RETURN(
      const Dataset data,
      datasets_->Load(job.dataset_id(), job.dataset_version()));
  // Loaded only now, so queued jobs hold no snapshot in memory.
  std::shared_ptr<const Snapshot> parent;
  if (parent_meta.has_value()) {
    BNN_ASSIGN_OR_RETURN(parent,
                         predictors_->GetSnapshot(job.parent_snapshot_id()));
  }

  Counter& steps = metrics_->training_steps(job.method());
  int64_t reported_steps = 0;
  TrainCallbacks callbacks;
  callbacks.progress = [&](const TrainProgress& p) {
    steps.Increment(static_cast<double>(p.step - reported_steps));
    reported_steps = p.step;
    metrics_->JobLoss(job.job_id(), p.loss);
    // Memory only: a disk write per step would dominate small models.
    jobs_
        ->Update(
            job.job_id(),
            [&](store::JobRecord* r) {
              r->set_epoch(p.epoch);
              r->set_step(p.step);
              r->set_total_steps(p.total_steps);
              r->set_last_loss(p.loss);
              r->set_progress(p.total_steps > 0
                                  ? static_cast<double>(p.step) / p.total_steps
                                  : 0.0);
              return true;
            },
            JobStore::Durability::kMemoryOnly)
        .IgnoreError();
  };
  BNN_ASSIGN_OR_RETURN(
      const Snapshot snapshot,
      bnn::Train(plan, data, parent.get(), *registry_, callbacks,
                 Interrupt::OnFlag(&cancel, "training")));
  // The id is recorded before the snapshot is written: a crash in between
  // leaves a job that names the snapshot it produced, which AdoptSnapshots
  // attaches to it on restart.
  const std::string snapshot_id = snapshots_->NewSnapshotId();
  BNN_RETURN_IF_ERROR(jobs_
                          ->Update(job.job_id(),
                                   [&](store::JobRecord* r) {
                                     r->set_pending_snapshot_id(snapshot_id);
                                     return true;
                                   })
                          .status());
  BNN_ASSIGN_OR_RETURN(const store::SnapshotMeta stored,
                       snapshots_->Create(snapshot, snapshot_id));
  metrics_->snapshots().Set(static_cast<double>(snapshots_->size()));
  return stored.snapshot_id();
}

void JobRunner::PublishJobCounts() {
  const std::map<State, int64_t> counts = jobs_->CountByState();
  for (const State state :
       {store::JobRecord::QUEUED, store::JobRecord::RUNNING,
        store::JobRecord::SUCCEEDED, store::JobRecord::FAILED,
        store::JobRecord::CANCELLED}) {
    const auto it = counts.find(state);
    metrics_->training_jobs(StateName(state))
        .Set(it == counts.end() ? 0.0 : static_cast<double>(it->second));
  }
}

}  // namespace bnn::server
