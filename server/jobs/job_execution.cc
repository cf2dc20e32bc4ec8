#include "server/jobs/job_execution.h"

#include <climits>
#include <optional>
#include <thread>
#include <unistd.h>
#include <utility>

#include <absl/strings/ascii.h>
#include <absl/strings/str_cat.h>
#include <absl/synchronization/notification.h>
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

// Whether this process still holds its claim on the job: a heartbeat,
// fenced on the claimant (JobStore::Heartbeat). An error reaching the
// store counts as held: the commit that follows is fenced too.
bool ClaimHeld(JobStore& jobs, const std::string& job_id,
               const JobExecution::Options& options) {
  const absl::StatusOr<store::JobRecord> job =
      jobs.Heartbeat(job_id, options.claimant);
  return !job.ok() || job->claimant() == options.claimant;
}

absl::Status LostClaim(const std::string& job_id) {
  return absl::AbortedError(
      absl::StrCat("job ", job_id,
                   " was claimed by another process: this one stopped "
                   "heartbeating for longer than the takeover time"));
}

}  // namespace

const std::string& ReplicaId(absl::string_view server_id) {
  static const std::string* const id = [&] {
    char host[HOST_NAME_MAX + 1] = {};
    if (gethostname(host, sizeof(host) - 1) != 0) host[0] = '\0';
    return new std::string(absl::StrCat(server_id.empty() ? "local" : server_id,
                                        "@", host, ":", getpid(), ":",
                                        absl::ToUnixMillis(absl::Now())));
  }();
  return *id;
}

std::function<absl::Status(MetadataTransaction&, const store::JobRecord&,
                           const std::string& snapshot_id)>
PublishOnSuccess(ModelStore* models) {
  return [models](MetadataTransaction& tx, const store::JobRecord& job,
                  const std::string& snapshot_id) -> absl::Status {
    if (!job.publish()) return absl::OkStatus();
    const absl::Status published =
        models->PublishFromJob(tx, job.model_name(), snapshot_id);
    if (!published.ok()) {
      return absl::Status(
          published.code(),
          absl::StrCat("the snapshot ", snapshot_id,
                       " was stored but could not be published as model '",
                       job.model_name(), "': ", published.message()));
    }
    spdlog::info("job {} published snapshot {} as model {}", job.job_id(),
                 snapshot_id, job.model_name());
    return absl::OkStatus();
  };
}

JobExecution::JobExecution(Options options, JobStore* jobs,
                           DatasetStore* datasets, SnapshotStore* snapshots,
                           PredictorCache* predictors,
                           const MethodRegistry* registry,
                           ServerMetrics* metrics, MemoryBudget* memory_budget,
                           JobEvents* events)
    : options_(std::move(options)),
      jobs_(jobs),
      datasets_(datasets),
      snapshots_(snapshots),
      predictors_(predictors),
      registry_(registry),
      metrics_(metrics),
      memory_budget_(memory_budget),
      events_(events) {}

bool JobExecution::Beat(const std::string& job_id, JobControl& control) {
  const absl::StatusOr<store::JobRecord> job =
      jobs_->Heartbeat(job_id, options_.claimant);
  if (!job.ok()) {
    spdlog::warn("job {}: cannot record its heartbeat: {}", job_id,
                 job.status().ToString());
    return true;
  }
  if (job->claimant() != options_.claimant) {
    if (!control.lost.exchange(true)) {
      Log(spdlog::level::warn,
          "job claimed by another process; this one stops without "
          "committing",
          {{"job_id", job_id},
           {"claimant", options_.claimant},
           {"new_claimant", job->claimant()}});
    }
    control.stop = true;
    return false;
  }
  if (job->state() == store::JobRecord::CANCELLING) {
    // Cancelled, perhaps through another server sharing the store.
    control.cancelled = true;
    control.stop = true;
  }
  return true;
}

JobOutcome JobExecution::Run(const store::JobRecord& claimed,
                             JobControl& control) {
  UseComputeThreads(options_.compute_threads);
  LowerThreadPriority(options_.training_nice);
  const std::string& job_id = claimed.job_id();
  metrics_->JobStarted(job_id, claimed.method());
  PublishState(claimed);
  Log(spdlog::level::info, "job running",
      {{"job_id", job_id},
       {"state", "running"},
       {"method", claimed.method()},
       {"claimant", options_.claimant}});
  absl::StatusOr<Snapshot> trained;
  {
    absl::Notification trained_done;
    std::thread heartbeat([&] {
      while (!trained_done.WaitForNotificationWithTimeout(
          options_.heartbeat_interval)) {
        if (!Beat(job_id, control)) return;
      }
    });
    trained = Train(claimed, control);
    trained_done.Notify();
    heartbeat.join();
  }
  if (control.lost.load()) {
    jobs_->DropLive(job_id);
    metrics_->JobFinished(job_id, "");
    return JobOutcome::kLost;
  }
  absl::Status finished = absl::OkStatus();
  JobOutcome outcome = JobOutcome::kFailed;
  const auto cancelling = [&] {
    const absl::StatusOr<store::JobRecord> job = jobs_->Get(job_id);
    return job.ok() && job->state() == store::JobRecord::CANCELLING;
  };
  if (trained.ok()) {
    return Succeed(job_id, *std::move(trained));
  } else if (absl::IsCancelled(trained.status()) &&
             (control.cancelled || cancelling())) {
    // Cancel wins over a shutdown that stopped the job at the same time.
    outcome = JobOutcome::kCancelled;
    finished = Finish(job_id, [](store::JobRecord* r) {
      r->set_state(store::JobRecord::CANCELLED);
    });
  } else if (absl::IsCancelled(trained.status()) && control.interrupted) {
    // Kept with its checkpoint for the next claimant.
    outcome = JobOutcome::kInterrupted;
    const absl::StatusOr<store::JobRecord> interrupted =
        jobs_->Update(job_id, [&](store::JobRecord* r) {
          if (r->claimant() != options_.claimant) return false;
          r->set_state(store::JobRecord::INTERRUPTED);
          r->clear_pending_snapshot_id();
          r->set_heartbeat_unix_ms(0);
          return true;
        });
    metrics_->JobFinished(job_id, "interrupted");
    if (interrupted.ok() &&
        interrupted->state() == store::JobRecord::INTERRUPTED) {
      PublishState(*interrupted);
      Log(spdlog::level::info, "job interrupted by the shutdown",
          {{"job_id", job_id},
           {"state", "interrupted"},
           {"method", interrupted->method()},
           {"step", absl::StrCat(interrupted->step())}});
    } else if (interrupted.ok()) {
      outcome = JobOutcome::kLost;
    } else {
      spdlog::error("job {}: cannot record its state: {}", job_id,
                    interrupted.status().ToString());
      outcome = JobOutcome::kUncommitted;
    }
  } else {
    finished = Finish(job_id, [&](store::JobRecord* r) {
      r->set_state(store::JobRecord::FAILED);
      r->set_error(trained.status().ToString());
    });
  }
  if (absl::IsAborted(finished) && !ClaimHeld(*jobs_, job_id, options_)) {
    jobs_->DropLive(job_id);
    metrics_->JobFinished(job_id, "");
    return JobOutcome::kLost;
  }
  if (!finished.ok()) {
    spdlog::error("job {}: cannot record its state: {}", job_id,
                  finished.ToString());
    metrics_->JobFinished(job_id, "");
    return JobOutcome::kUncommitted;
  }
  return outcome;
}

void JobExecution::AdoptSnapshots() {
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

void JobExecution::PublishState(const store::JobRecord& job) {
  JobEvent event = EventOfRecord(job);
  event.unix_ms = NowUnixMs();
  events_->Publish(job.job_id(), std::move(event));
}

absl::Status JobExecution::Finish(
    const std::string& job_id,
    absl::FunctionRef<void(store::JobRecord*)> mutate) {
  return Finish(job_id, mutate,
                [](MetadataTransaction&, const store::JobRecord&) {
                  return absl::OkStatus();
                });
}

absl::Status JobExecution::Finish(
    const std::string& job_id,
    absl::FunctionRef<void(store::JobRecord*)> mutate,
    absl::FunctionRef<absl::Status(MetadataTransaction&,
                                   const store::JobRecord&)>
        also) {
  // The claim is checked (a heartbeat) before the checkpoint is deleted:
  // a process that lost it leaves the checkpoint to the new claimant.
  if (!ClaimHeld(*jobs_, job_id, options_)) return LostClaim(job_id);
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
        // Fenced: only the claimant commits the job's end.
        if (r->claimant() != options_.claimant) return false;
        mutate(r);
        r->clear_pending_snapshot_id();
        r->set_finished_unix_ms(NowUnixMs());
        r->set_heartbeat_unix_ms(0);
        return true;
      },
      also);
  if (!job.ok()) return job.status();
  if (job->claimant() != options_.claimant) return LostClaim(job_id);
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

JobOutcome JobExecution::Succeed(const std::string& job_id, Snapshot snapshot) {
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
    return handled.ok() ? JobOutcome::kSucceeded : JobOutcome::kFailed;
  }
  predictors_->Evict(snapshot_id);
  if (absl::IsAborted(committed) && !ClaimHeld(*jobs_, job_id, options_)) {
    // Another process took the job over: its snapshot is swept as an
    // unreferenced blob.
    Log(spdlog::level::warn,
        "job trained, but another process claimed it meanwhile; its result "
        "is not committed",
        {{"job_id", job_id}, {"claimant", options_.claimant}});
    return JobOutcome::kLost;
  }
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
    return JobOutcome::kUncommitted;
  }
  return JobOutcome::kFailed;
}

absl::StatusOr<Snapshot> JobExecution::Train(const store::JobRecord& job,
                                             JobControl& control) {
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
    events_->Publish(job.job_id(), std::move(event));
  };
  callbacks.checkpoint_interval = options_.checkpoint_interval;
  callbacks.checkpoint_on_interrupt = true;
  callbacks.on_checkpoint = [&](const Checkpoint& checkpoint) -> absl::Status {
    // A cancelled job will not resume; a job another process claimed is
    // not this one's to checkpoint.
    if (control.cancelled.load() || control.lost.load()) {
      return absl::OkStatus();
    }
    BNN_RETURN_IF_ERROR(WriteCheckpointFile(checkpoint_path, checkpoint));
    metrics_->JobCheckpointed(job.job_id(), absl::Now());
    // The record (progress, loss curve) as of the checkpoint, with a
    // heartbeat.
    Beat(job.job_id(), control);
    Log(spdlog::level::debug, "job checkpointed",
        {{"job_id", job.job_id()},
         {"step", absl::StrCat(checkpoint.trainer.step)}});
    return absl::OkStatus();
  };
  return bnn::Train(plan, data, parent.get(), *registry_, callbacks,
                    Interrupt::OnFlag(&control.stop, "training"),
                    resume.has_value() ? &*resume : nullptr);
}

}  // namespace bnn::server
