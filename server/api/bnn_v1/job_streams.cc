// WatchJob: a job's events (server/jobs/job_events.h) streamed to a client.
// The reactor holds no thread: the event hub wakes it when the job publishes
// an event, and it writes one event at a time.
#include <algorithm>
#include <deque>
#include <memory>
#include <optional>
#include <string>
#include <utility>

#include <absl/base/thread_annotations.h>
#include <absl/strings/str_cat.h>
#include <absl/synchronization/mutex.h>
#include <absl/time/clock.h>
#include <absl/time/time.h>

#include "bnn/status.h"

#include "server/api/bnn_v1/bnn_service.h"
#include "server/api/bnn_v1/request_validation.h"
#include "server/api/bnn_v1/to_wire.h"
#include "server/common/status_util.h"
#include "server/jobs/job_events.h"
#include "server/store/job_store.h"

namespace bnn::server {

// Writes the job as it is (kCurrent), then, with after_step, the kept events
// after that step, then every event the job publishes (with after_step,
// progress after that step only), and finishes OK after
// a final state; UNAVAILABLE when the server shuts down while the job is not
// running (a running job's watchers first get its INTERRUPTED event). A job
// that had ended already gets its last step (when after after_step) and
// then its final state.
class BnnServiceImpl::WatchReactor final
    : public grpc::ServerWriteReactor<v1::JobEvent> {
 public:
  WatchReactor(BnnServiceImpl* service, grpc::CallbackServerContext* context,
               const v1::WatchJobRequest& request)
      : service_(service),
        context_(context),
        job_id_(request.job_id()),
        start_(absl::Now()),
        shared_(std::make_shared<Shared>()) {
    shared_->reactor = this;
    absl::MutexLock lock(&shared_->mu);
    if (const absl::Status status = Begin(request); !status.ok()) {
      FinishLocked(status);
      return;
    }
    WriteNextLocked();
  }

  void OnWriteDone(bool ok) override {
    absl::MutexLock lock(&shared_->mu);
    writing_ = false;
    if (!ok) {
      FinishLocked(absl::CancelledError(
          "WatchJob was cancelled: the client stopped reading"));
      return;
    }
    WriteNextLocked();
  }

  // The client cancelled or its deadline passed. A write in flight fails
  // (OnWriteDone(false)), which finishes the call.
  void OnCancel() override {
    absl::MutexLock lock(&shared_->mu);
    if (!writing_) {
      FinishLocked(absl::CancelledError("WatchJob was cancelled"));
    }
  }

  void OnDone() override {
    {
      absl::MutexLock lock(&shared_->mu);
      shared_->reactor = nullptr;
    }
    if (subscribed_) {
      service_->jobs_->events().Unsubscribe(job_id_, subscription_);
    }
    if (!watcher_key_.empty()) service_->ReleaseWatcher(watcher_key_);
    delete this;
  }

 private:
  // Shared with the wake-up the event hub holds, which may run after the
  // reactor is gone; its mutex guards the reactor's state.
  struct Shared {
    absl::Mutex mu;
    WatchReactor* reactor ABSL_GUARDED_BY(mu) = nullptr;
  };

  // Authorizes and validates the call, subscribes to the job's events and
  // queues the first ones; requires shared_->mu.
  absl::Status Begin(const v1::WatchJobRequest& request)
      ABSL_NO_THREAD_SAFETY_ANALYSIS {
    BNN_ASSIGN_OR_RETURN(const std::string caller,
                         service_->Authorize(context_, "WatchJob"));
    BNN_RETURN_IF_ERROR(RequireId("job_id", job_id_));
    std::optional<int64_t> after_step;
    if (request.has_after_step()) {
      if (request.after_step() < 0) {
        return absl::InvalidArgumentError(absl::StrCat(
            "after_step = ", request.after_step(), " must be >= 0"));
      }
      after_step = request.after_step();
    }
    after_step_ = after_step;
    // NotFound before a watcher slot is taken.
    BNN_RETURN_IF_ERROR(service_->jobs_->Get(job_id_).status());
    BNN_ASSIGN_OR_RETURN(watcher_key_,
                         service_->AdmitWatcher(*context_, caller));
    JobEvents& events = service_->jobs_->events();
    // Wake-ups block on shared_->mu until Begin returns.
    JobEvents::Start start = events.Watch(
        job_id_, after_step, [weak = std::weak_ptr<Shared>(shared_)] {
          const std::shared_ptr<Shared> shared = weak.lock();
          if (shared == nullptr) return;
          absl::MutexLock lock(&shared->mu);
          if (shared->reactor != nullptr) {
            shared->reactor->OnEventsLocked();
          }
        });
    subscribed_ = true;
    subscription_ = start.subscription;
    last_seq_ = start.last_seq;
    // Read after subscribing: any later change arrives as an event.
    BNN_ASSIGN_OR_RETURN(const store::JobRecord job,
                         service_->jobs_->Get(job_id_));
    JobEvent current = EventOfRecord(job, JobEvent::Kind::kCurrent);
    current.error = HideDataDir(current.error, service_->options_.data_dir,
                                service_->options_.blob_dir);
    current.unix_ms = absl::ToUnixMillis(absl::Now());
    if (!IsFinalJobState(job.state())) {
      Queue(current);
      for (JobEvent& event : start.backlog) Queue(std::move(event));
      return absl::OkStatus();
    }
    // A job that ended before the watcher (re)connected: the progress it
    // missed comes first, then the final state, which ends the stream. The
    // hub drops a job's events when it ends (and a restart drops all), so
    // the last step comes from the record: a reconnect never misses it.
    int64_t last_progress = after_step.value_or(job.step());
    for (JobEvent& event : start.backlog) {
      if (event.kind != JobEvent::Kind::kProgress) continue;
      last_progress = std::max(last_progress, event.step);
      Queue(std::move(event));
    }
    if (last_progress < job.step()) {
      JobEvent progress = EventOfRecord(job, JobEvent::Kind::kProgress);
      progress.state = store::JobRecord::RUNNING;
      progress.error.clear();
      progress.snapshot_id.clear();
      progress.unix_ms = current.unix_ms;
      Queue(std::move(progress));
    }
    Queue(std::move(current));
    return absl::OkStatus();
  }

  // Takes the job's new events; requires shared_->mu.
  void OnEventsLocked() ABSL_NO_THREAD_SAFETY_ANALYSIS {
    if (finished_) return;
    for (JobEvent& event :
         service_->jobs_->events().Take(job_id_, &last_seq_)) {
      Queue(std::move(event));
    }
    WriteNextLocked();
  }

  // Appends `event` unless a final state is queued already, or it is
  // progress the client saw (a job resumed after a restart reports the
  // steps after its checkpoint again).
  void Queue(JobEvent event) {
    if (final_queued_) return;
    if (event.kind == JobEvent::Kind::kProgress && after_step_.has_value() &&
        event.step <= *after_step_) {
      return;
    }
    final_queued_ =
        IsFinalJobState(event.state) && event.kind != JobEvent::Kind::kProgress;
    pending_.push_back(std::move(event));
  }

  // Starts the next write, or finishes once the final state is written
  // (or the server shuts down); requires shared_->mu.
  void WriteNextLocked() ABSL_NO_THREAD_SAFETY_ANALYSIS {
    if (finished_ || writing_) return;
    if (pending_.empty()) {
      if (final_queued_) {
        FinishLocked(absl::OkStatus());
      } else if (service_->jobs_->events().Closing(job_id_)) {
        FinishLocked(absl::UnavailableError(
            "the server is shutting down; watch again (with after_step = the "
            "last step seen) once it is back"));
      }
      return;
    }
    ToJobEvent(pending_.front(), &response_);
    response_.set_error(HideDataDir(response_.error(),
                                    service_->options_.data_dir,
                                    service_->options_.blob_dir));
    pending_.pop_front();
    writing_ = true;
    StartWrite(&response_);
  }

  void FinishLocked(const absl::Status& status) ABSL_NO_THREAD_SAFETY_ANALYSIS {
    if (finished_) return;
    finished_ = true;
    Finish(ToGrpcStatus(
        service_->RecordOutcome(context_, "WatchJob", start_, status)));
  }

  BnnServiceImpl* const service_;
  grpc::CallbackServerContext* const context_;
  const std::string job_id_;
  const absl::Time start_;
  const std::shared_ptr<Shared> shared_;
  // Set by Begin; read by OnDone, after every other reaction.
  std::string watcher_key_;
  bool subscribed_ = false;
  uint64_t subscription_ = 0;
  std::optional<int64_t> after_step_;
  // Guarded by shared_->mu.
  uint64_t last_seq_ = 0;
  std::deque<JobEvent> pending_;
  bool final_queued_ = false;
  bool writing_ = false;
  bool finished_ = false;
  v1::JobEvent response_;
};

grpc::ServerWriteReactor<v1::JobEvent>* BnnServiceImpl::WatchJob(
    grpc::CallbackServerContext* context, const v1::WatchJobRequest* request) {
  return new WatchReactor(this, context, *request);
}

}  // namespace bnn::server
