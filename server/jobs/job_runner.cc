#include "server/jobs/job_runner.h"

#include <optional>
#include <utility>

#include <absl/strings/ascii.h>
#include <absl/strings/str_cat.h>
#include <absl/time/clock.h>
#include <absl/time/time.h>
#include <spdlog/spdlog.h>

#include "bnn/data/dataset.h"
#include "bnn/io/file.h"
#include "bnn/io/snapshot.h"
#include "bnn/model/model_spec.h"
#include "bnn/status.h"
#include "bnn/train/checkpoint.h"
#include "bnn/train/trainer.h"

#include "server/common/log.h"
#include "server/common/status_util.h"
#include "server/jobs/compute_threads.h"
#include "server/jobs/job_plan.h"
#include "server/jobs/loss_curve.h"

namespace bnn::server {
namespace {

using State = store::JobRecord::State;

int64_t NowUnixMs() { return absl::ToUnixMillis(absl::Now()); }

// "queued", "running", ...: the state as the metrics and logs name it.
std::string StateName(State state) {
  return absl::AsciiStrToLower(store::JobRecord::State_Name(state));
}

// The error of a checkpoint that cannot be read: DataLoss ("... is
// corrupt") for truncated or damaged bytes, the reader's code otherwise.
absl::Status CheckpointError(const std::string& path,
                             const absl::Status& status) {
  if (absl::IsDataLoss(status)) {
    return absl::DataLossError(absl::StrCat(
        "checkpoint ", path,
        " is corrupt, so the job cannot resume: ", status.message()));
  }
  return absl::Status(status.code(),
                      absl::StrCat("cannot resume from checkpoint ", path, ": ",
                                   status.message()));
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
  std::unique_ptr<JobRunner> runner(
      new JobRunner(options, jobs, datasets, snapshots, predictors, registry,
                    metrics, memory_budget));
  // Interrupted jobs were taken from the queue before the queued ones.
  const std::vector<store::JobRecord> interrupted = jobs->Interrupted();
  const std::vector<store::JobRecord> queued = jobs->Queued();
  absl::MutexLock lock(&runner->mu_);
  for (const store::JobRecord& job : interrupted) {
    runner->Enqueue(job.job_id());
    Log(spdlog::level::info, "interrupted job queued to resume",
        {{"job_id", job.job_id()},
         {"state", "interrupted"},
         {"method", job.method()},
         {"step", absl::StrCat(job.step())}});
  }
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
    if (job.pending_snapshot_id().empty()) continue;
    const std::string& snapshot_id = job.pending_snapshot_id();
    const bool written = snapshots_->GetMeta(snapshot_id).ok();
    absl::Status handled = absl::OkStatus();
    const auto adopt = [&](bool succeeded) {
      return jobs_->Update(
          job.job_id(),
          [&](store::JobRecord* r) {
            if (written) {
              r->set_state(succeeded ? store::JobRecord::SUCCEEDED
                                     : store::JobRecord::FAILED);
              r->set_snapshot_id(snapshot_id);
              r->set_error(succeeded ? "" : handled.ToString());
              r->set_progress(1.0);
              if (r->finished_unix_ms() == 0) {
                r->set_finished_unix_ms(NowUnixMs());
              }
            }
            r->clear_pending_snapshot_id();
            return true;
          },
          [&](MetadataTransaction& tx,
              const store::JobRecord& r) -> absl::Status {
            if (!succeeded || !written || !options_.on_succeeded) {
              return absl::OkStatus();
            }
            handled = options_.on_succeeded(tx, r, snapshot_id);
            return handled;
          });
    };
    absl::StatusOr<store::JobRecord> updated = adopt(true);
    if (!updated.ok() && !handled.ok()) updated = adopt(false);
    if (!updated.ok()) {
      spdlog::error("job {}: cannot record its state: {}", job.job_id(),
                    updated.status().ToString());
    } else if (written) {
      RemoveFile(jobs_->CheckpointPath(job.job_id())).IgnoreError();
      Log(spdlog::level::info,
          "the server stopped after writing the job's snapshot; the job "
          "finished with it",
          {{"job_id", job.job_id()},
           {"state", StateName(updated->state())},
           {"snapshot_id", snapshot_id}});
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
  {
    absl::MutexLock lock(&mu_);
    if (stopping_) return;
    stopping_ = true;
    for (auto& [id, control] : controls_) control->stop = true;
  }
  events_.Close();
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
  for (const std::string& id : still_running) {
    Log(spdlog::level::warn,
        "job still in a training step at the end of the shutdown grace; "
        "recorded interrupted, to resume from its last checkpoint",
        {{"job_id", id}, {"state", "interrupted"}});
    const absl::StatusOr<store::JobRecord> job =
        jobs_->Update(id, [&](store::JobRecord* r) {
          if (r->state() == store::JobRecord::CANCELLING) {
            // As the next process's store would record it.
            r->set_state(store::JobRecord::CANCELLED);
            r->set_finished_unix_ms(NowUnixMs());
            return true;
          }
          if (r->state() != store::JobRecord::RUNNING) return false;
          r->set_state(store::JobRecord::INTERRUPTED);
          return true;
        });
    if (job.ok()) PublishState(*job);
    metrics_->JobFinished(id, job.ok() ? StateName(job->state()) : "");
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
  controls_[job_id] = std::make_shared<Control>();
  workers_->Schedule([this, job_id] { Run(job_id); });
}

absl::StatusOr<store::JobRecord> JobRunner::Submit(store::JobRecord record) {
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
  PublishState(record);
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
  PublishState(job);
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

bool JobRunner::Cancelling(absl::string_view job_id) const {
  const absl::StatusOr<store::JobRecord> job = jobs_->Get(job_id);
  return job.ok() && job->state() == store::JobRecord::CANCELLING;
}

void JobRunner::PublishState(const store::JobRecord& job) {
  JobEvent event = EventOfRecord(job);
  event.unix_ms = NowUnixMs();
  events_.Publish(job.job_id(), std::move(event));
}

absl::Status JobRunner::Finish(
    const std::string& job_id,
    absl::FunctionRef<void(store::JobRecord*)> mutate) {
  return Finish(job_id, mutate,
                [](MetadataTransaction&, const store::JobRecord&) {
                  return absl::OkStatus();
                });
}

absl::Status JobRunner::Finish(
    const std::string& job_id,
    absl::FunctionRef<void(store::JobRecord*)> mutate,
    absl::FunctionRef<absl::Status(MetadataTransaction&,
                                   const store::JobRecord&)>
        also) {
  // First: a crash before the record is committed leaves a job that
  // resumes from the start, never a finished job's checkpoint; and once the
  // job is seen finished, its checkpoint is gone.
  if (absl::Status removed = RemoveFile(jobs_->CheckpointPath(job_id));
      !removed.ok()) {
    spdlog::warn("job {}: cannot delete its checkpoint: {}", job_id,
                 removed.ToString());
  }
  const absl::StatusOr<store::JobRecord> job = jobs_->Update(
      job_id,
      [&](store::JobRecord* r) {
        mutate(r);
        r->clear_pending_snapshot_id();
        r->set_finished_unix_ms(NowUnixMs());
        return true;
      },
      also);
  if (!job.ok()) return job.status();
  PublishState(*job);
  metrics_->JobFinished(job_id, StateName(job->state()));
  if (job->error().empty()) {
    Log(spdlog::level::info, "job finished",
        {{"job_id", job_id},
         {"state", StateName(job->state())},
         {"method", job->method()}});
  } else {
    Log(spdlog::level::warn, "job finished",
        {{"job_id", job_id},
         {"state", StateName(job->state())},
         {"method", job->method()},
         {"error", job->error(), kMaxStatusMessageBytes}});
  }
  return absl::OkStatus();
}

void JobRunner::Succeed(const std::string& job_id, Snapshot snapshot) {
  const std::string snapshot_id = snapshots_->NewSnapshotId();
  absl::Status handled = absl::OkStatus();
  absl::Status committed;
  {
    // From the blob's write to the commit of the record naming it.
    absl::ReaderMutexLock reference(snapshots_->blobs().reference_mutex());
    const absl::StatusOr<SnapshotRecord> record =
        snapshots_->StoreFile(snapshot, snapshot_id, job_id);
    if (record.ok()) {
      // The posterior goes to the predictor cache in memory, before the
      // commit that makes the job SUCCEEDED, so that the first Predict
      // after it neither reads nor decodes the file just written (issue
      // 15: 5.5 s at the MNIST size). Only an optimisation: if it fails,
      // the first Predict loads the snapshot as usual.
      absl::StatusOr<std::shared_ptr<const Predictor>> predictor =
          predictors_->NewPredictor(
              snapshot_id,
              std::make_shared<const Snapshot>(std::move(snapshot)));
      if (predictor.ok()) {
        predictors_->Adopt(snapshot_id, *std::move(predictor));
      } else {
        spdlog::warn("job {}: snapshot {} not cached: {}", job_id, snapshot_id,
                     predictor.status().ToString());
      }
      const auto succeeded = [&](store::JobRecord* r) {
        r->set_snapshot_id(snapshot_id);
        r->set_progress(1.0);
        r->set_state(store::JobRecord::SUCCEEDED);
      };
      committed = Finish(job_id, succeeded,
                         [&](MetadataTransaction& tx,
                             const store::JobRecord& r) -> absl::Status {
                           BNN_RETURN_IF_ERROR(tx.CreateSnapshot(*record));
                           if (!options_.on_succeeded) return absl::OkStatus();
                           handled = options_.on_succeeded(tx, r, snapshot_id);
                           return handled;
                         });
      if (!committed.ok() && !handled.ok()) {
        // The hook failed (e.g. the model is full): the snapshot is kept,
        // the job fails naming why.
        committed = Finish(
            job_id,
            [&](store::JobRecord* r) {
              r->set_snapshot_id(snapshot_id);
              r->set_progress(1.0);
              r->set_state(store::JobRecord::FAILED);
              r->set_error(
                  absl::StrCat("the snapshot ", snapshot_id,
                               " was stored, but: ", handled.ToString()));
            },
            [&](MetadataTransaction& tx, const store::JobRecord&) {
              return tx.CreateSnapshot(*record);
            });
      }
    } else {
      committed = record.status();
    }
  }
  if (committed.ok()) {
    metrics_->snapshots().Set(static_cast<double>(snapshots_->size()));
    return;
  }
  predictors_->Evict(snapshot_id);
  spdlog::error("job {}: cannot store its snapshot: {}", job_id,
                committed.ToString());
  const absl::Status failed = Finish(job_id, [&](store::JobRecord* r) {
    r->set_state(store::JobRecord::FAILED);
    r->set_error(
        absl::StrCat("cannot store the snapshot: ", committed.ToString()));
  });
  if (!failed.ok()) {
    spdlog::error("job {}: cannot record its state: {}", job_id,
                  failed.ToString());
    metrics_->JobFinished(job_id, "");
  }
}

void JobRunner::Run(const std::string& job_id) {
  UseComputeThreads(options_.compute_threads);
  LowerThreadPriority(options_.training_nice);
  std::shared_ptr<Control> control;
  absl::StatusOr<store::JobRecord> job;
  {
    // Under mu_, so that a job either stays QUEUED (or INTERRUPTED) for the
    // next process or is in running_ before AwaitStopped() looks.
    absl::MutexLock lock(&mu_);
    control = controls_.at(job_id);
    if (stopping_) {
      controls_.erase(job_id);
      return;
    }
    job = jobs_->Update(job_id, [&](store::JobRecord* r) {
      if (r->state() != store::JobRecord::QUEUED &&
          r->state() != store::JobRecord::INTERRUPTED) {
        return false;
      }
      r->set_state(store::JobRecord::RUNNING);
      if (r->started_unix_ms() == 0) r->set_started_unix_ms(NowUnixMs());
      return true;
    });
    if (job.ok() && job->state() == store::JobRecord::RUNNING) {
      running_.insert(job_id);
    }
  }
  if (job.ok() && job->state() == store::JobRecord::RUNNING) {
    PublishJobCounts();
    metrics_->JobStarted(job_id, job->method());
    PublishState(*job);
    Log(spdlog::level::info, "job running",
        {{"job_id", job_id}, {"state", "running"}, {"method", job->method()}});
    absl::StatusOr<Snapshot> trained = Train(*job, *control);
    bool stopping = false;
    {
      absl::MutexLock lock(&mu_);
      stopping = stopping_;
    }
    absl::Status finished = absl::OkStatus();
    if (trained.ok()) {
      Succeed(job_id, *std::move(trained));
    } else if (absl::IsCancelled(trained.status()) &&
               (control->cancelled || Cancelling(job_id))) {
      // Cancel wins over a shutdown that stopped the job at the same time.
      finished = Finish(job_id, [](store::JobRecord* r) {
        r->set_state(store::JobRecord::CANCELLED);
      });
    } else if (absl::IsCancelled(trained.status()) && stopping) {
      // Kept with its checkpoint for the next process.
      const absl::StatusOr<store::JobRecord> interrupted =
          jobs_->Update(job_id, [](store::JobRecord* r) {
            r->set_state(store::JobRecord::INTERRUPTED);
            r->clear_pending_snapshot_id();
            return true;
          });
      metrics_->JobFinished(job_id, "interrupted");
      if (interrupted.ok()) {
        PublishState(*interrupted);
        Log(spdlog::level::info, "job interrupted by the shutdown",
            {{"job_id", job_id},
             {"state", "interrupted"},
             {"method", interrupted->method()},
             {"step", absl::StrCat(interrupted->step())}});
      } else {
        spdlog::error("job {}: cannot record its state: {}", job_id,
                      interrupted.status().ToString());
      }
    } else {
      finished = Finish(job_id, [&](store::JobRecord* r) {
        r->set_state(store::JobRecord::FAILED);
        r->set_error(trained.status().ToString());
      });
    }
    if (!finished.ok()) {
      spdlog::error("job {}: cannot record its state: {}", job_id,
                    finished.ToString());
      metrics_->JobFinished(job_id, "");
    }
  } else if (!job.ok()) {
    spdlog::error("job {}: cannot record its state: {}", job_id,
                  job.status().ToString());
  }
  {
    absl::MutexLock lock(&mu_);
    controls_.erase(job_id);
    running_.erase(job_id);
  }
  PublishJobCounts();
}

absl::StatusOr<Snapshot> JobRunner::Train(const store::JobRecord& job,
                                          Control& control) {
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
          estimate.PartsToString(), [&control]() -> absl::Status {
            if (control.stop.load(std::memory_order_relaxed)) {
              return absl::CancelledError(
                  "training was stopped while it waited for memory");
            }
            return absl::OkStatus();
          }));
  // The last checkpoint, if the job was interrupted after writing one.
  const std::string checkpoint_path = jobs_->CheckpointPath(job.job_id());
  std::optional<Checkpoint> resume;
  if (absl::StatusOr<Checkpoint> read = ReadCheckpointFile(checkpoint_path);
      read.ok()) {
    resume = *std::move(read);
  } else if (!absl::IsNotFound(read.status())) {
    return CheckpointError(checkpoint_path, read.status());
  }
  BNN_ASSIGN_OR_RETURN(
      const Dataset data,
      datasets_->Load(job.dataset_id(), job.dataset_version()));
  // Loaded only now, so queued jobs hold no snapshot in memory.
  std::shared_ptr<const Snapshot> parent;
  if (parent_meta.has_value()) {
    BNN_ASSIGN_OR_RETURN(parent,
                         predictors_->GetSnapshot(job.parent_snapshot_id()));
  }
  if (resume.has_value()) {
    const int64_t step = resume->trainer.step;
    jobs_
        ->Update(
            job.job_id(),
            [&](store::JobRecord* r) {
              TruncateLossCurve(step, r);
              r->set_step(step);
              r->set_epoch(resume->trainer.epoch);
              return true;
            },
            JobStore::Durability::kMemoryOnly)
        .IgnoreError();
    Log(spdlog::level::info, "job resumes from its checkpoint",
        {{"job_id", job.job_id()},
         {"method", job.method()},
         {"step", absl::StrCat(step)}});
  }

  Counter& steps = metrics_->training_steps(job.method());
  int64_t reported_steps = resume.has_value() ? resume->trainer.step : 0;
  // The last progress event: at most JobEvents::kMaxProgressRate a second.
  const absl::Duration event_period =
      absl::Seconds(1) / JobEvents::kMaxProgressRate;
  absl::Time event_time = absl::Now();
  int64_t event_step = reported_steps;
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
              AddLossPoint(p.step, p.loss, r);
              return true;
            },
            JobStore::Durability::kMemoryOnly)
        .IgnoreError();
    const absl::Time now = absl::Now();
    if (p.step <= event_step ||
        (now - event_time < event_period && p.step != p.total_steps)) {
      return;
    }
    JobEvent event;
    event.kind = JobEvent::Kind::kProgress;
    event.state = store::JobRecord::RUNNING;
    event.epoch = p.epoch;
    event.step = p.step;
    event.total_steps = p.total_steps;
    event.loss = p.loss;
    const double seconds = absl::ToDoubleSeconds(now - event_time);
    if (seconds > 0) {
      event.steps_per_second =
          static_cast<double>(p.step - event_step) / seconds;
      event.eta_seconds =
          static_cast<double>(p.total_steps - p.step) / event.steps_per_second;
    }
    event.unix_ms = absl::ToUnixMillis(now);
    event_time = now;
    event_step = p.step;
    events_.Publish(job.job_id(), std::move(event));
  };
  callbacks.checkpoint_interval = options_.checkpoint_interval;
  callbacks.checkpoint_on_interrupt = true;
  callbacks.on_checkpoint = [&](const Checkpoint& checkpoint) -> absl::Status {
    // A cancelled job will not resume.
    if (control.cancelled.load()) return absl::OkStatus();
    BNN_RETURN_IF_ERROR(WriteCheckpointFile(checkpoint_path, checkpoint));
    metrics_->JobCheckpointed(job.job_id(), absl::Now());
    // The record (progress, loss curve) as of the checkpoint.
    BNN_ASSIGN_OR_RETURN(
        const store::JobRecord record,
        jobs_->Update(job.job_id(), [](store::JobRecord*) { return true; }));
    if (record.state() == store::JobRecord::CANCELLING) {
      // Cancelled through another server sharing the store.
      control.cancelled = true;
      control.stop = true;
    }
    Log(spdlog::level::debug, "job checkpointed",
        {{"job_id", job.job_id()},
         {"step", absl::StrCat(checkpoint.trainer.step)}});
    return absl::OkStatus();
  };
  return bnn::Train(plan, data, parent.get(), *registry_, callbacks,
                    Interrupt::OnFlag(&control.stop, "training"),
                    resume.has_value() ? &*resume : nullptr);
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

}  // namespace bnn::server
