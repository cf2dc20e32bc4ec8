#include "server/api/bnn_v1/bnn_service.h"

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <absl/strings/str_cat.h>
#include <absl/strings/str_join.h>
#include <spdlog/spdlog.h>

#include "bnn/io/snapshot.h"
#include "bnn/memory.h"
#include "bnn/predict/acquisition.h"
#include "bnn/predict/predictor.h"
#include "bnn/predict/scores.h"
#include "bnn/status.h"
#include "bnn/train/trainer.h"

#include "server/api/bnn_v1/method_scopes.h"
#include "server/api/bnn_v1/predict_request.h"
#include "server/api/bnn_v1/to_wire.h"
#include "server/api/bnn_v1/training_request.h"
#include "server/common/status_util.h"
#include "server/common/user_text.h"
#include "server/jobs/compute_threads.h"

namespace bnn::server {
namespace {

// Threads of the I/O pool: uploads, appends and imports finishing at once
// share them.
constexpr int kIoThreads = 2;

// Failures of `rpc` that point at the server rather than the request.
bool IsServerError(absl::string_view rpc, const absl::Status& status) {
  switch (status.code()) {
    case absl::StatusCode::kDataLoss:
      // Corrupt bytes sent to ImportSnapshot are the client's.
      return rpc != "ImportSnapshot";
    case absl::StatusCode::kInternal:
    case absl::StatusCode::kUnknown:
    case absl::StatusCode::kUnavailable:
      return true;
    default:
      return false;
  }
}

// Stops a computation once the client's deadline or the server's time limit
// passes, or the call is cancelled (by the client, or by the server's
// shutdown once its grace period ends). Between checks, lets the call give
// its turn on `pool` to another client's (ThreadPool::Yield); the time
// waiting for the next turn does not count against `time_limit`.
Interrupt CallInterrupt(ThreadPool* pool, absl::Time client_deadline,
                        std::function<bool()> cancelled, absl::string_view rpc,
                        absl::Time start, absl::Duration time_limit) {
  // Shared by the Interrupt's copies; used by the computing thread only.
  auto yielded = std::make_shared<absl::Duration>();
  const auto check = [cancelled = std::move(cancelled), rpc = std::string(rpc),
                      start, client_deadline, time_limit,
                      yielded]() -> absl::Status {
    const absl::Time now = absl::Now();
    // The deadline first: gRPC also reports a call past its deadline as
    // cancelled.
    if (now >= client_deadline) {
      return absl::DeadlineExceededError(absl::StrCat(
          rpc, " passed the client's deadline after ",
          absl::FormatDuration(absl::Trunc(now - start, absl::Milliseconds(1))),
          " of computation"));
    }
    if (cancelled && cancelled()) {
      return absl::CancelledError(absl::StrCat(rpc, " was cancelled"));
    }
    if (now - start - *yielded >= time_limit) {
      return absl::DeadlineExceededError(absl::StrCat(
          rpc, " computed for longer than the server's limit of ",
          absl::FormatDuration(time_limit), " (--max-request-seconds)"));
    }
    return absl::OkStatus();
  };
  return Interrupt(
      [pool, check, yielded]() -> absl::Status {
        BNN_RETURN_IF_ERROR(check());
        const absl::Duration waited = pool->Yield();
        if (waited == absl::ZeroDuration()) return absl::OkStatus();
        *yielded += waited;
        return check();
      },
      [start, client_deadline, time_limit, yielded] {
        const absl::Time now = absl::Now();
        return std::min(client_deadline - now,
                        time_limit - (now - start - *yielded));
      });
}

}  // namespace

BnnServiceImpl::BnnServiceImpl(const Options& options, DatasetStore* datasets,
                               SnapshotStore* snapshots,
                               PredictorCache* predictors, JobRunner* jobs,
                               const MethodRegistry* registry,
                               ServerMetrics* metrics,
                               MemoryBudget* memory_budget,
                               const Authenticator* auth, ModelStore* models)
    : options_(options),
      datasets_(datasets),
      snapshots_(snapshots),
      predictors_(predictors),
      jobs_(jobs),
      registry_(registry),
      metrics_(metrics),
      memory_budget_(memory_budget),
      auth_(auth),
      models_(models),
      streams_(options.max_client_streams, options.stream_idle_timeout),
      io_pool_(kIoThreads),
      compute_pool_(ThreadPool::Options{
          options.compute_workers,
          /*max_yielded=*/kMaxYieldedPerWorker * options.compute_workers,
          kComputeSlice, /*usage_half_life=*/absl::Seconds(1),
          options.long_call, options.long_call_nice}) {
  metrics_->datasets().Set(static_cast<double>(datasets_->size()));
  metrics_->snapshots().Set(static_cast<double>(snapshots_->size()));
}

absl::StatusOr<std::string> BnnServiceImpl::Authorize(
    grpc::CallbackServerContext* context, absl::string_view rpc) const {
  BNN_ASSIGN_OR_RETURN(const Scope required, RequiredScope(rpc));
  return auth_->Authorize(*context, rpc, required);
}

absl::Status BnnServiceImpl::RecordOutcome(grpc::CallbackServerContext* context,
                                           absl::string_view rpc,
                                           absl::Time start,
                                           const absl::Status& status) {
  metrics_->RecordRpc(rpc, status.code(), absl::Now() - start);
  if (status.ok()) return status;
  const std::string_view name(rpc.data(), rpc.size());  // fmt-formattable
  // Messages quote what clients sent: one escaped line of bounded length.
  const std::string line = SafeText(status.ToString(), kMaxStatusMessageBytes);
  if (IsServerError(rpc, status)) {
    spdlog::error("{} from {} failed: {}", name, context->peer(), line);
  } else {
    spdlog::warn("{} from {} rejected: {}", name, context->peer(), line);
  }
  return HideDataDir(status, options_.data_dir, options_.blob_dir);
}

grpc::ServerUnaryReactor* BnnServiceImpl::Finish(
    grpc::CallbackServerContext* context, absl::string_view rpc,
    absl::Time start, const absl::Status& status) {
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  reactor->Finish(ToGrpcStatus(RecordOutcome(context, rpc, start, status)));
  return reactor;
}

grpc::ServerUnaryReactor* BnnServiceImpl::Run(
    grpc::CallbackServerContext* context, absl::string_view rpc,
    absl::FunctionRef<absl::Status()> work) {
  const absl::Time start = absl::Now();
  absl::Status status = Authorize(context, rpc).status();
  if (status.ok()) status = work();
  return Finish(context, rpc, start, status);
}

grpc::ServerUnaryReactor* BnnServiceImpl::FinishOnPool(
    ThreadPool* pool, grpc::CallbackServerContext* context,
    absl::string_view rpc, absl::Duration time_limit,
    absl::AnyInvocable<absl::Status(const Interrupt&) &&> work) {
  const absl::Time start = absl::Now();
  const absl::StatusOr<std::string> caller = Authorize(context, rpc);
  if (!caller.ok()) return Finish(context, rpc, start, caller.status());
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  // The request and response stay valid until the reactor finishes.
  pool->Schedule(ClientKey(context->peer(), *caller), [this, pool, context,
                                                       reactor, rpc, start,
                                                       time_limit,
                                                       work = std::move(
                                                           work)]() mutable {
    const absl::Time turn = absl::Now();
    if (pool == &compute_pool_)
      metrics_->RecordComputeQueueWait(rpc, turn - start);
    const Interrupt interrupt = CallInterrupt(
        pool, absl::FromChrono(context->deadline()),
        [context] { return context->IsCancelled(); }, rpc, turn, time_limit);
    absl::Status status = interrupt.Check();
    if (status.ok()) {
      status = std::move(work)(interrupt);
    } else {
      status = absl::Status(
          status.code(), absl::StrCat(status.message(), " before it started"));
    }
    reactor->Finish(ToGrpcStatus(RecordOutcome(context, rpc, start, status)));
  });
  return reactor;
}

grpc::ServerUnaryReactor* BnnServiceImpl::GetDataset(
    grpc::CallbackServerContext* context, const v1::GetDatasetRequest* request,
    v1::DatasetInfo* response) {
  return Run(context, "GetDataset",
             [&] { return DoGetDataset(*request, response); });
}

grpc::ServerUnaryReactor* BnnServiceImpl::ListDatasets(
    grpc::CallbackServerContext* context,
    const v1::ListDatasetsRequest* /*request*/,
    v1::ListDatasetsResponse* response) {
  return Run(context, "ListDatasets", [&] { return DoListDatasets(response); });
}

grpc::ServerUnaryReactor* BnnServiceImpl::StartTraining(
    grpc::CallbackServerContext* context,
    const v1::StartTrainingRequest* request,
    v1::StartTrainingResponse* response) {
  return Run(context, "StartTraining",
             [&] { return DoStartTraining(*request, response); });
}

grpc::ServerUnaryReactor* BnnServiceImpl::GetJob(
    grpc::CallbackServerContext* context, const v1::GetJobRequest* request,
    v1::Job* response) {
  return Run(context, "GetJob", [&] { return DoGetJob(*request, response); });
}

grpc::ServerUnaryReactor* BnnServiceImpl::CancelJob(
    grpc::CallbackServerContext* context, const v1::CancelJobRequest* request,
    v1::Job* response) {
  return Run(context, "CancelJob",
             [&] { return DoCancelJob(*request, response); });
}

grpc::ServerUnaryReactor* BnnServiceImpl::ListJobs(
    grpc::CallbackServerContext* context, const v1::ListJobsRequest* request,
    v1::ListJobsResponse* response) {
  return Run(context, "ListJobs",
             [&] { return DoListJobs(*request, response); });
}

absl::StatusOr<std::string> BnnServiceImpl::AdmitWatcher(
    const grpc::CallbackServerContext& context, absl::string_view caller) {
  std::string key = ClientKey(context.peer(), caller);
  absl::MutexLock lock(&watchers_mu_);
  int& open = watchers_[key];
  if (open >= options_.max_watchers_per_client) {
    if (open == 0) watchers_.erase(key);
    return absl::ResourceExhaustedError(
        absl::StrCat("this client has ", open,
                     " WatchJob streams open, the server limit "
                     "(--max-watchers-per-client = ",
                     options_.max_watchers_per_client, "); close one first"));
  }
  ++open;
  return key;
}

void BnnServiceImpl::ReleaseWatcher(const std::string& key) {
  absl::MutexLock lock(&watchers_mu_);
  const auto it = watchers_.find(key);
  if (it == watchers_.end()) return;
  if (--it->second <= 0) watchers_.erase(it);
}

grpc::ServerUnaryReactor* BnnServiceImpl::Predict(
    grpc::CallbackServerContext* context, const v1::PredictRequest* request,
    v1::PredictResponse* response) {
  return FinishOnPool(&compute_pool_, context, "Predict",
                      options_.max_request_time,
                      [this, request, response](const Interrupt& interrupt) {
                        return DoPredict(*request, interrupt, response);
                      });
}

grpc::ServerUnaryReactor* BnnServiceImpl::Acquire(
    grpc::CallbackServerContext* context, const v1::AcquireRequest* request,
    v1::AcquireResponse* response) {
  return FinishOnPool(&compute_pool_, context, "Acquire",
                      options_.max_request_time,
                      [this, request, response](const Interrupt& interrupt) {
                        return DoAcquire(*request, interrupt, response);
                      });
}

grpc::ServerUnaryReactor* BnnServiceImpl::Evaluate(
    grpc::CallbackServerContext* context, const v1::EvaluateRequest* request,
    v1::EvaluateResponse* response) {
  return FinishOnPool(&compute_pool_, context, "Evaluate",
                      options_.max_request_time,
                      [this, request, response](const Interrupt& interrupt) {
                        return DoEvaluate(*request, interrupt, response);
                      });
}

grpc::ServerUnaryReactor* BnnServiceImpl::ListSnapshots(
    grpc::CallbackServerContext* context,
    const v1::ListSnapshotsRequest* request,
    v1::ListSnapshotsResponse* response) {
  return Run(context, "ListSnapshots",
             [&] { return DoListSnapshots(*request, response); });
}

grpc::ServerUnaryReactor* BnnServiceImpl::GetSnapshot(
    grpc::CallbackServerContext* context, const v1::GetSnapshotRequest* request,
    v1::SnapshotInfo* response) {
  return Run(context, "GetSnapshot",
             [&] { return DoGetSnapshot(*request, response); });
}

grpc::ServerUnaryReactor* BnnServiceImpl::DeleteSnapshot(
    grpc::CallbackServerContext* context,
    const v1::DeleteSnapshotRequest* request,
    v1::DeleteSnapshotResponse* /*response*/) {
  return FinishOnPool(
      &io_pool_, context, "DeleteSnapshot", absl::InfiniteDuration(),
      [this, request](const Interrupt&) { return DoDeleteSnapshot(*request); });
}

grpc::ServerUnaryReactor* BnnServiceImpl::PublishModel(
    grpc::CallbackServerContext* context,
    const v1::PublishModelRequest* request, v1::ModelVersion* response) {
  return FinishOnPool(&io_pool_, context, "PublishModel",
                      absl::InfiniteDuration(),
                      [this, request, response](const Interrupt&) {
                        return DoPublishModel(*request, response);
                      });
}

grpc::ServerUnaryReactor* BnnServiceImpl::ListModels(
    grpc::CallbackServerContext* context, const v1::ListModelsRequest* request,
    v1::ListModelsResponse* response) {
  return Run(context, "ListModels",
             [&] { return DoListModels(*request, response); });
}

grpc::ServerUnaryReactor* BnnServiceImpl::GetModel(
    grpc::CallbackServerContext* context, const v1::GetModelRequest* request,
    v1::ModelInfo* response) {
  return Run(context, "GetModel", [&]() -> absl::Status {
    BNN_ASSIGN_OR_RETURN(const Model model, models_->Get(request->name()));
    ToModelInfo(model, /*with_versions=*/true, response);
    return absl::OkStatus();
  });
}

grpc::ServerUnaryReactor* BnnServiceImpl::SetAlias(
    grpc::CallbackServerContext* context, const v1::SetAliasRequest* request,
    v1::ModelInfo* response) {
  return FinishOnPool(
      &io_pool_, context, "SetAlias", absl::InfiniteDuration(),
      [this, request, response](const Interrupt&) -> absl::Status {
        BNN_ASSIGN_OR_RETURN(
            const Model model,
            models_->SetAlias(request->name(), request->alias(),
                              request->version()));
        ToModelInfo(model, /*with_versions=*/true, response);
        return absl::OkStatus();
      });
}

grpc::ServerUnaryReactor* BnnServiceImpl::DeleteAlias(
    grpc::CallbackServerContext* context, const v1::DeleteAliasRequest* request,
    v1::ModelInfo* response) {
  return FinishOnPool(
      &io_pool_, context, "DeleteAlias", absl::InfiniteDuration(),
      [this, request, response](const Interrupt&) -> absl::Status {
        BNN_ASSIGN_OR_RETURN(
            const Model model,
            models_->DeleteAlias(request->name(), request->alias()));
        ToModelInfo(model, /*with_versions=*/true, response);
        return absl::OkStatus();
      });
}

grpc::ServerUnaryReactor* BnnServiceImpl::DeleteModel(
    grpc::CallbackServerContext* context, const v1::DeleteModelRequest* request,
    v1::DeleteModelResponse* /*response*/) {
  return FinishOnPool(&io_pool_, context, "DeleteModel",
                      absl::InfiniteDuration(),
                      [this, request](const Interrupt&) {
                        return models_->Delete(request->name());
                      });
}

grpc::ServerUnaryReactor* BnnServiceImpl::DeleteDataset(
    grpc::CallbackServerContext* context,
    const v1::DeleteDatasetRequest* request,
    v1::DeleteDatasetResponse* response) {
  return FinishOnPool(&io_pool_, context, "DeleteDataset",
                      absl::InfiniteDuration(),
                      [this, request, response](const Interrupt&) {
                        return DoDeleteDataset(*request, response);
                      });
}

grpc::ServerUnaryReactor* BnnServiceImpl::ListMethods(
    grpc::CallbackServerContext* context,
    const v1::ListMethodsRequest* /*request*/,
    v1::ListMethodsResponse* response) {
  return Run(context, "ListMethods", [&] { return DoListMethods(response); });
}

absl::Status BnnServiceImpl::DoGetDataset(const v1::GetDatasetRequest& request,
                                          v1::DatasetInfo* response) {
  BNN_RETURN_IF_ERROR(RequireId("dataset_id", request.dataset_id()));
  BNN_ASSIGN_OR_RETURN(
      const std::optional<int64_t> version,
      RequestedVersion("version", request.has_version(), request.version()));
  BNN_ASSIGN_OR_RETURN(const store::DatasetMeta meta,
                       datasets_->Get(request.dataset_id(), version));
  ToDatasetInfo(meta, response);
  return absl::OkStatus();
}

absl::Status BnnServiceImpl::DoListDatasets(
    v1::ListDatasetsResponse* response) {
  for (const store::DatasetMeta& meta : datasets_->List()) {
    ToDatasetInfo(meta, response->add_datasets());
  }
  return absl::OkStatus();
}

absl::Status BnnServiceImpl::DoStartTraining(
    const v1::StartTrainingRequest& request,
    v1::StartTrainingResponse* response) {
  BNN_RETURN_IF_ERROR(RequireId("dataset_id", request.dataset_id()));
  BNN_ASSIGN_OR_RETURN(
      const std::optional<int64_t> version,
      RequestedVersion("dataset_version", request.has_dataset_version(),
                       request.dataset_version()));
  BNN_ASSIGN_OR_RETURN(const store::DatasetMeta dataset,
                       datasets_->Get(request.dataset_id(), version));
  std::optional<store::SnapshotMeta> parent;
  if (!request.parent_snapshot_id().empty()) {
    BNN_RETURN_IF_ERROR(
        RequireId("parent_snapshot_id", request.parent_snapshot_id()));
    BNN_ASSIGN_OR_RETURN(parent,
                         snapshots_->GetMeta(request.parent_snapshot_id()));
  }
  BNN_ASSIGN_OR_RETURN(
      TrainingJob job,
      BuildTrainingJob(request, dataset, *registry_,
                       parent.has_value() ? &*parent : nullptr));
  // A job that could never fit is refused now; one that fits the budget but
  // not beside other work waits in the queue for memory.
  BNN_ASSIGN_OR_RETURN(const MemoryEstimate estimate,
                       EstimateTrainingMemory(job.plan, *registry_));
  BNN_RETURN_IF_ERROR(memory_budget_->CheckFits("training job", estimate.bytes,
                                                estimate.PartsToString()));
  BNN_ASSIGN_OR_RETURN(const store::JobRecord submitted,
                       jobs_->Submit(std::move(job.record)));
  response->set_job_id(submitted.job_id());
  return absl::OkStatus();
}

absl::Status BnnServiceImpl::DoGetJob(const v1::GetJobRequest& request,
                                      v1::Job* response) {
  BNN_RETURN_IF_ERROR(RequireId("job_id", request.job_id()));
  BNN_ASSIGN_OR_RETURN(const store::JobRecord job,
                       jobs_->Get(request.job_id()));
  ToJob(job, response);
  response->set_error(
      HideDataDir(response->error(), options_.data_dir, options_.blob_dir));
  return absl::OkStatus();
}

absl::Status BnnServiceImpl::DoCancelJob(const v1::CancelJobRequest& request,
                                         v1::Job* response) {
  BNN_RETURN_IF_ERROR(RequireId("job_id", request.job_id()));
  BNN_ASSIGN_OR_RETURN(const store::JobRecord job,
                       jobs_->Cancel(request.job_id()));
  ToJob(job, response);
  response->set_error(
      HideDataDir(response->error(), options_.data_dir, options_.blob_dir));
  return absl::OkStatus();
}

absl::Status BnnServiceImpl::DoListJobs(const v1::ListJobsRequest& request,
                                        v1::ListJobsResponse* response) {
  BNN_ASSIGN_OR_RETURN(const int page_size,
                       ResolveJobsPageSize(request.page_size()));
  BNN_ASSIGN_OR_RETURN(const JobFilter filter, JobFilterOf(request));
  std::optional<JobCursor> after;
  if (!request.page_token().empty()) {
    BNN_ASSIGN_OR_RETURN(after, DecodeJobsPageToken(request.page_token()));
  }
  bool more = false;
  BNN_ASSIGN_OR_RETURN(const std::vector<store::JobRecord> jobs,
                       jobs_->List(filter, after, page_size, &more));
  for (const store::JobRecord& job : jobs) {
    v1::Job* out = response->add_jobs();
    ToJob(job, out);
    // Up to 1000 points per job: GetJob returns them.
    out->clear_loss_curve();
    out->set_error(
        HideDataDir(out->error(), options_.data_dir, options_.blob_dir));
  }
  if (more && !jobs.empty()) {
    response->set_next_page_token(EncodeJobsPageToken(
        JobCursor{jobs.back().created_unix_ms(), jobs.back().job_id()}));
  }
  return absl::OkStatus();
}

void BnnServiceImpl::PredictFor(
    ForeignCall call, Target target, const v1::PredictRequest* request,
    v1::PredictResponse* response,
    absl::AnyInvocable<void(absl::Status) &&> done) {
  const absl::Time start = absl::Now();
  const std::string client = call.client;
  compute_pool_.Schedule(client, [this, call = std::move(call),
                                  target = std::move(target), request, response,
                                  start, done = std::move(done)]() mutable {
    const absl::Time turn = absl::Now();
    metrics_->RecordComputeQueueWait(call.rpc, turn - start);
    const Interrupt interrupt =
        CallInterrupt(&compute_pool_, call.deadline, call.cancelled, call.rpc,
                      turn, options_.max_request_time);
    absl::Status status = interrupt.Check();
    if (status.ok()) {
      status = PredictOn(target, *request, interrupt, call.rpc, response);
    } else {
      status = absl::Status(
          status.code(), absl::StrCat(status.message(), " before it started"));
    }
    std::move(done)(HideDataDir(status, options_.data_dir, options_.blob_dir));
  });
}

absl::Status BnnServiceImpl::DoPredict(const v1::PredictRequest& request,
                                       const Interrupt& interrupt,
                                       v1::PredictResponse* response) {
  BNN_ASSIGN_OR_RETURN(const Target target, ResolveTarget(request));
  return PredictOn(target, request, interrupt, "Predict", response);
}

absl::Status BnnServiceImpl::PredictOn(const Target& target,
                                       const v1::PredictRequest& request,
                                       const Interrupt& interrupt,
                                       absl::string_view rpc,
                                       v1::PredictResponse* response) {
  const absl::Time start = absl::Now();
  // Before the lookup: loading a snapshot decodes its posterior with GEMMs
  // whose blocking, and so whose last bits, depend on the thread count, and
  // the predictor keeps what it decoded.
  UseComputeThreads(options_.compute_threads);
  BNN_ASSIGN_OR_RETURN(const std::shared_ptr<const Predictor> predictor,
                       predictors_->Get(target.snapshot_id));
  const Snapshot& snapshot = predictor->snapshot();
  BNN_ASSIGN_OR_RETURN(const RowMatrix rows,
                       PredictRows(request, snapshot, options_.limits));
  BNN_ASSIGN_OR_RETURN(
      PredictOptions options,
      BuildPredictOptions(request, rows.num_rows, snapshot, options_.limits));
  MemoryEstimate estimate = predictor->EstimateMemory(rows.num_rows, options);
  // The request message and the matrix converted from it.
  estimate.Add(
      "request rows as doubles (message and matrix)",
      MulBytes({2, rows.num_rows, predictor->num_features(), sizeof(double)}));
  estimate.Add("response message", estimate.kept_bytes);
  BNN_ASSIGN_OR_RETURN(
      const MemoryBudget::Reservation reservation,
      memory_budget_->TryReserve(absl::StrCat(rpc, " on ", target.snapshot_id),
                                 estimate.bytes, estimate.PartsToString()));
  // Deadline admission: refused at once if it cannot finish in time.
  const double units = PredictWorkUnits(rows.num_rows, options.num_samples,
                                        snapshot.model.NumParameters());
  BNN_RETURN_IF_ERROR(
      compute_rate_.Admit(absl::StrCat(rpc, " of ", rows.num_rows, " rows x ",
                                       options.num_samples, " samples"),
                          units, interrupt.TimeLeft()));
  // The forward passes' progress: rows done and this thread's CPU time at
  // the first and the latest report, for the rate of a call that is stopped
  // before it finishes (ComputeRate::ObservePartial).
  struct ForwardProgress {
    int64_t first_rows = -1;
    int64_t last_rows = 0;
    absl::Duration first_cpu;
    absl::Duration last_cpu;
  };
  auto progress = std::make_shared<ForwardProgress>();
  options.interrupt =
      interrupt.WithProgress([progress](int64_t done, int64_t /*total*/) {
        const absl::Duration cpu = ThreadCpuTime();
        if (progress->first_rows < 0) {
          progress->first_rows = done;
          progress->first_cpu = cpu;
        }
        progress->last_rows = done;
        progress->last_cpu = cpu;
      });
  const absl::Duration cpu_start = ThreadCpuTime();
  absl::StatusOr<Prediction> predicted =
      predictor->Predict(rows.features, rows.num_rows, options);
  if (!predicted.ok()) {
    if ((absl::IsDeadlineExceeded(predicted.status()) ||
         absl::IsCancelled(predicted.status())) &&
        progress->first_rows >= 0) {
      compute_rate_.ObservePartial(
          units,
          static_cast<double>(progress->last_rows - progress->first_rows) *
              options.num_samples * snapshot.model.NumParameters(),
          progress->last_cpu - progress->first_cpu);
    }
    return predicted.status();
  }
  const Prediction& prediction = *predicted;
  compute_rate_.Observe(units, ThreadCpuTime() - cpu_start);
  ToPredictResponse(prediction, options, target.snapshot_id, snapshot,
                    request.packed_response(), response);
  response->set_model_name(target.model_name);
  response->set_model_version(target.model_version);
  metrics_->predict_rows().Increment(static_cast<double>(rows.num_rows));
  // Labelled by the model a reference named ("unnamed" for a snapshot id).
  metrics_->RecordInference(rpc, snapshot.method, target.model_name,
                            absl::Now() - start, prediction.num_samples);
  PublishCacheCounts();
  return absl::OkStatus();
}

absl::Status BnnServiceImpl::DoAcquire(const v1::AcquireRequest& request,
                                       const Interrupt& interrupt,
                                       v1::AcquireResponse* response) {
  const absl::Time start = absl::Now();
  BNN_ASSIGN_OR_RETURN(const Target target, ResolveTarget(request));
  // Before the lookup, as in DoPredict.
  UseComputeThreads(options_.compute_threads);
  BNN_ASSIGN_OR_RETURN(const std::shared_ptr<const Predictor> predictor,
                       predictors_->Get(target.snapshot_id));
  std::vector<double> request_rows;
  BNN_ASSIGN_OR_RETURN(
      const std::unique_ptr<PoolSource> pool,
      OpenPool(request, predictor->num_features(), &request_rows));
  BNN_ASSIGN_OR_RETURN(
      AcquireOptions options,
      BuildAcquireOptions(request, pool->num_rows(), options_.limits));
  options.interrupt = interrupt;
  const MemoryEstimate estimate =
      EstimateAcquireMemory(*predictor, pool->num_rows(), options);
  BNN_ASSIGN_OR_RETURN(const MemoryBudget::Reservation reservation,
                       memory_budget_->TryReserve(
                           absl::StrCat("Acquire on ", target.snapshot_id),
                           estimate.bytes, estimate.PartsToString()));
  // Deadline admission, as in PredictOn.
  const double units =
      PredictWorkUnits(pool->num_rows(), options.num_samples,
                       predictor->snapshot().model.NumParameters());
  BNN_RETURN_IF_ERROR(compute_rate_.Admit(
      absl::StrCat("Acquire over ", pool->num_rows(), " rows x ",
                   options.num_samples, " samples"),
      units, interrupt.TimeLeft()));
  const absl::Duration cpu_start = ThreadCpuTime();
  BNN_ASSIGN_OR_RETURN(const Acquisition acquisition,
                       bnn::Acquire(*predictor, *pool, options));
  compute_rate_.Observe(units, ThreadCpuTime() - cpu_start);
  response->mutable_indices()->Add(acquisition.indices.begin(),
                                   acquisition.indices.end());
  response->mutable_scores()->Add(acquisition.scores.begin(),
                                  acquisition.scores.end());
  response->set_pool_rows(acquisition.pool_rows);
  response->set_seed(options.seed);
  response->set_snapshot_id(target.snapshot_id);
  response->set_model_name(target.model_name);
  response->set_model_version(target.model_version);
  metrics_->acquire_rows_scored().Increment(
      static_cast<double>(acquisition.pool_rows));
  metrics_->RecordInference("Acquire", predictor->snapshot().method,
                            target.model_name, absl::Now() - start,
                            options.num_samples);
  PublishCacheCounts();
  return absl::OkStatus();
}

absl::StatusOr<std::unique_ptr<PoolSource>> BnnServiceImpl::OpenPool(
    const v1::AcquireRequest& request, int64_t num_features,
    std::vector<double>* rows) const {
  switch (request.pool_case()) {
    case v1::AcquireRequest::kDatasetId: {
      BNN_RETURN_IF_ERROR(RequireId("dataset_id", request.dataset_id()));
      BNN_ASSIGN_OR_RETURN(
          const std::optional<int64_t> version,
          RequestedVersion("dataset_version", request.has_dataset_version(),
                           request.dataset_version()));
      BNN_ASSIGN_OR_RETURN(const store::DatasetMeta meta,
                           datasets_->Get(request.dataset_id(), version));
      if (meta.num_features() != num_features) {
        return absl::InvalidArgumentError(absl::StrCat(
            "dataset_id '", meta.dataset_id(), "' has ", meta.num_features(),
            " features; the snapshot has ", num_features));
      }
      return datasets_->OpenRows(meta.dataset_id(), meta.version());
    }
    case v1::AcquireRequest::kRows: {
      if (request.has_dataset_version()) {
        return absl::InvalidArgumentError(
            "dataset_version is set but the pool is rows in the request; it "
            "selects a version of a pool dataset_id");
      }
      BNN_ASSIGN_OR_RETURN(
          RowMatrix matrix,
          FeatureRows("rows.rows", request.rows().rows(), "rows.features",
                      request.rows().has_features(), request.rows().features(),
                      num_features, PredictRowLimit(options_.limits)));
      *rows = std::move(matrix.features);
      return std::make_unique<SpanPool>(*rows, num_features);
    }
    case v1::AcquireRequest::POOL_NOT_SET:
      break;
  }
  return absl::InvalidArgumentError(
      "the pool is required: set dataset_id (a stored dataset) or rows");
}

absl::StatusOr<store::DatasetMeta> BnnServiceImpl::EvaluationDataset(
    absl::string_view field, absl::string_view dataset_id,
    absl::string_view version_field, bool has_version, int64_t version,
    int64_t num_features) const {
  BNN_RETURN_IF_ERROR(RequireId(field, dataset_id));
  BNN_ASSIGN_OR_RETURN(const std::optional<int64_t> requested,
                       RequestedVersion(version_field, has_version, version));
  BNN_ASSIGN_OR_RETURN(store::DatasetMeta meta,
                       datasets_->Get(dataset_id, requested));
  if (meta.num_features() != num_features) {
    return absl::InvalidArgumentError(absl::StrCat(
        field, " '", meta.dataset_id(), "' has ", meta.num_features(),
        " features; the snapshot has ", num_features));
  }
  const RowLimit limit = PredictRowLimit(options_.limits);
  if (meta.num_rows() > limit.max_rows) {
    return absl::ResourceExhaustedError(absl::StrCat(
        field, " '", meta.dataset_id(), "' has ", meta.num_rows(),
        " rows; the server limit is ", limit.max_rows, " (", limit.flag, ")"));
  }
  return meta;
}

absl::Status BnnServiceImpl::DoEvaluate(const v1::EvaluateRequest& request,
                                        const Interrupt& interrupt,
                                        v1::EvaluateResponse* response) {
  const absl::Time start = absl::Now();
  BNN_ASSIGN_OR_RETURN(const Target target, ResolveTarget(request));
  // Before the lookup, as in DoPredict.
  UseComputeThreads(options_.compute_threads);
  BNN_ASSIGN_OR_RETURN(const std::shared_ptr<const Predictor> predictor,
                       predictors_->Get(target.snapshot_id));
  const Snapshot& snapshot = predictor->snapshot();
  const int64_t num_features = predictor->num_features();
  const bool classification = IsClassification(snapshot.task);
  BNN_ASSIGN_OR_RETURN(EvaluateOptions options,
                       BuildEvaluateOptions(request, options_.limits));
  options.interrupt = interrupt;

  // What to score: sizes first (for admission), rows after.
  RowMatrix rows;
  std::optional<store::DatasetMeta> data_meta;
  switch (request.data_case()) {
    case v1::EvaluateRequest::kDatasetId: {
      BNN_ASSIGN_OR_RETURN(
          data_meta,
          EvaluationDataset("dataset_id", request.dataset_id(),
                            "dataset_version", request.has_dataset_version(),
                            request.dataset_version(), num_features));
      BNN_RETURN_IF_ERROR(CheckEvaluationTask(*data_meta, snapshot));
      rows.num_rows = data_meta->num_rows();
      break;
    }
    case v1::EvaluateRequest::kRows: {
      if (request.has_dataset_version()) {
        return absl::InvalidArgumentError(
            "dataset_version is set but the rows are in the request; it "
            "selects a version of dataset_id");
      }
      BNN_ASSIGN_OR_RETURN(
          rows, LabelledRows("rows.", request.rows(), num_features, 0,
                             PredictRowLimit(options_.limits)));
      if (classification) {
        BNN_RETURN_IF_ERROR(EncodeEvaluationLabels(request.rows().has_targets(),
                                                   snapshot.class_values,
                                                   &rows.targets));
      }
      break;
    }
    case v1::EvaluateRequest::DATA_NOT_SET:
      return absl::InvalidArgumentError(
          "the labelled rows are required: set dataset_id (a stored dataset) "
          "or rows");
  }
  RowMatrix ood;
  std::optional<store::DatasetMeta> ood_meta;
  switch (request.ood_case()) {
    case v1::EvaluateRequest::kOodDatasetId: {
      BNN_ASSIGN_OR_RETURN(
          ood_meta,
          EvaluationDataset("ood_dataset_id", request.ood_dataset_id(),
                            "ood_dataset_version",
                            request.has_ood_dataset_version(),
                            request.ood_dataset_version(), num_features));
      ood.num_rows = ood_meta->num_rows();
      break;
    }
    case v1::EvaluateRequest::kOodRows: {
      BNN_ASSIGN_OR_RETURN(
          ood,
          FeatureRows("ood_rows.rows", request.ood_rows().rows(),
                      "ood_rows.features", request.ood_rows().has_features(),
                      request.ood_rows().features(), num_features,
                      PredictRowLimit(options_.limits)));
      break;
    }
    case v1::EvaluateRequest::OOD_NOT_SET:
      break;
  }
  if (request.has_ood_dataset_version() &&
      request.ood_case() != v1::EvaluateRequest::kOodDatasetId) {
    return absl::InvalidArgumentError(
        "ood_dataset_version is set without ood_dataset_id");
  }
  if (ood.num_rows > 0 && !classification) {
    return absl::InvalidArgumentError(
        "ood_dataset_id/ood_rows apply to classifiers (AUROC of entropy and "
        "mutual information); this snapshot is a regression model");
  }

  MemoryEstimate estimate =
      EstimateEvaluateMemory(*predictor, rows.num_rows, ood.num_rows, options);
  // The rows: the request's message and matrix, or a stored dataset loaded.
  estimate.Add("labelled rows as doubles",
               MulBytes({2, rows.num_rows, num_features + 1, sizeof(double)}));
  estimate.Add("OOD rows as doubles",
               MulBytes({2, ood.num_rows, num_features + 1, sizeof(double)}));
  BNN_ASSIGN_OR_RETURN(const MemoryBudget::Reservation reservation,
                       memory_budget_->TryReserve(
                           absl::StrCat("Evaluate on ", target.snapshot_id),
                           estimate.bytes, estimate.PartsToString()));
  // Deadline admission, as in PredictOn, before a stored dataset is loaded:
  // one draw of S samples and the forward passes of both sets of rows.
  const double units =
      PredictWorkUnits(rows.num_rows + ood.num_rows, options.num_samples,
                       snapshot.model.NumParameters());
  BNN_RETURN_IF_ERROR(compute_rate_.Admit(
      absl::StrCat("Evaluate of ", rows.num_rows + ood.num_rows, " rows x ",
                   options.num_samples, " samples"),
      units, interrupt.TimeLeft()));
  if (data_meta.has_value()) {
    BNN_ASSIGN_OR_RETURN(Dataset data, datasets_->Load(data_meta->dataset_id(),
                                                       data_meta->version()));
    if (classification) {
      // Class indices of the dataset's classes -> the snapshot's.
      for (double& y : data.targets) {
        const double value = data.class_values[static_cast<size_t>(y)];
        const int64_t index = ClassIndex(snapshot.class_values, value);
        if (index < 0) {
          return absl::InvalidArgumentError(absl::StrCat(
              "dataset_id '", data_meta->dataset_id(), "' has label ", value,
              ", which is not a class of the snapshot (its classes are ",
              absl::StrJoin(snapshot.class_values, ", "), ")"));
        }
        y = static_cast<double>(index);
      }
    }
    rows.features = std::move(data.features);
    rows.targets = std::move(data.targets);
  }
  if (ood_meta.has_value()) {
    BNN_ASSIGN_OR_RETURN(Dataset data, datasets_->Load(ood_meta->dataset_id(),
                                                       ood_meta->version()));
    ood.features = std::move(data.features);
  }
  const absl::Duration cpu_start = ThreadCpuTime();
  BNN_ASSIGN_OR_RETURN(
      const Evaluation evaluation,
      bnn::Evaluate(*predictor, rows.features, rows.targets, rows.num_rows,
                    ood.features, ood.num_rows, options));
  compute_rate_.Observe(units, ThreadCpuTime() - cpu_start);
  ToEvaluateResponse(evaluation, options, snapshot, response);
  response->set_snapshot_id(target.snapshot_id);
  response->set_model_name(target.model_name);
  response->set_model_version(target.model_version);
  metrics_->RecordInference("Evaluate", snapshot.method, target.model_name,
                            absl::Now() - start, options.num_samples);
  PublishCacheCounts();
  return absl::OkStatus();
}

void BnnServiceImpl::PublishCacheCounts() {
  const PredictorCache::CacheCounts counts = predictors_->TakeCacheCounts();
  metrics_->predictor_cache_hits().Increment(static_cast<double>(counts.hits));
  metrics_->predictor_cache_misses().Increment(
      static_cast<double>(counts.misses));
}

absl::Status BnnServiceImpl::DoListSnapshots(
    const v1::ListSnapshotsRequest& request,
    v1::ListSnapshotsResponse* response) {
  // A name of a stored dataset filters by its id; anything else by itself
  // (the snapshots of a deleted dataset still name its id).
  const std::string dataset_id =
      request.dataset_id().empty() ? ""
                                   : datasets_->ResolveId(request.dataset_id())
                                         .value_or(request.dataset_id());
  for (const store::SnapshotMeta& meta : snapshots_->List()) {
    if (dataset_id.empty() || meta.dataset_id() == dataset_id) {
      ToSnapshotInfo(meta, response->add_snapshots());
    }
  }
  return absl::OkStatus();
}

absl::Status BnnServiceImpl::DoGetSnapshot(
    const v1::GetSnapshotRequest& request, v1::SnapshotInfo* response) {
  BNN_RETURN_IF_ERROR(RequireId("snapshot_id", request.snapshot_id()));
  BNN_ASSIGN_OR_RETURN(const store::SnapshotMeta meta,
                       snapshots_->GetMeta(request.snapshot_id()));
  ToSnapshotInfo(meta, response);
  return absl::OkStatus();
}

absl::Status BnnServiceImpl::DoDeleteSnapshot(
    const v1::DeleteSnapshotRequest& request) {
  BNN_RETURN_IF_ERROR(RequireId("snapshot_id", request.snapshot_id()));
  BNN_RETURN_IF_ERROR(
      models_->DeleteSnapshot(request.snapshot_id(), request.force()));
  predictors_->Evict(request.snapshot_id());
  metrics_->snapshots().Set(static_cast<double>(snapshots_->size()));
  spdlog::info("snapshot {} deleted", request.snapshot_id());
  return absl::OkStatus();
}

absl::StatusOr<BnnServiceImpl::Target> BnnServiceImpl::ResolveTarget(
    bool by_model, absl::string_view snapshot_id,
    absl::string_view model) const {
  if (!by_model) {
    if (snapshot_id.empty()) {
      return absl::InvalidArgumentError(
          "snapshot_id is required (or a model reference in model)");
    }
    BNN_RETURN_IF_ERROR(RequireId("snapshot_id", snapshot_id));
    return Target{std::string(snapshot_id), "", 0};
  }
  if (model.empty()) {
    return absl::InvalidArgumentError(
        "model is required: NAME, NAME@ALIAS or NAME:VERSION");
  }
  BNN_ASSIGN_OR_RETURN(const ModelRef ref, ParseModelRef("model", model));
  BNN_ASSIGN_OR_RETURN(ResolvedModel resolved, models_->Resolve(ref));
  return Target{std::move(resolved.snapshot_id), std::move(resolved.name),
                resolved.version};
}

absl::Status BnnServiceImpl::DoPublishModel(
    const v1::PublishModelRequest& request, v1::ModelVersion* response) {
  BNN_RETURN_IF_ERROR(ValidateModelName("name", request.name()));
  BNN_RETURN_IF_ERROR(RequireId("snapshot_id", request.snapshot_id()));
  const std::vector<std::string> aliases(request.aliases().begin(),
                                         request.aliases().end());
  BNN_ASSIGN_OR_RETURN(
      const Model model,
      models_->Publish(request.name(), request.snapshot_id(), aliases));
  ToModelVersion(model, LatestVersion(model), response);
  return absl::OkStatus();
}

absl::Status BnnServiceImpl::DoListModels(const v1::ListModelsRequest& request,
                                          v1::ListModelsResponse* response) {
  if (request.page_size() < 0 || request.page_size() > kMaxModelsPageSize) {
    return absl::InvalidArgumentError(absl::StrCat(
        "page_size = ", request.page_size(), " must be in [0, ",
        kMaxModelsPageSize, "] (0 = ", kDefaultModelsPageSize, ")"));
  }
  // The token is the name of the previous page's last model.
  if (!request.page_token().empty() &&
      !ValidateModelName("page_token", request.page_token()).ok()) {
    return absl::InvalidArgumentError(
        "page_token is not a next_page_token of ListModels");
  }
  const int page_size =
      request.page_size() == 0 ? kDefaultModelsPageSize : request.page_size();
  bool more = false;
  BNN_ASSIGN_OR_RETURN(const std::vector<Model> models,
                       models_->List(request.page_token(), page_size, &more));
  for (const Model& model : models) {
    ToModelInfo(model, /*with_versions=*/false, response->add_models());
  }
  if (more) response->set_next_page_token(models.back().info.name());
  return absl::OkStatus();
}

absl::Status BnnServiceImpl::DoDeleteDataset(
    const v1::DeleteDatasetRequest& request,
    v1::DeleteDatasetResponse* response) {
  BNN_RETURN_IF_ERROR(RequireId("dataset_id", request.dataset_id()));
  BNN_ASSIGN_OR_RETURN(const std::string id,
                       datasets_->ResolveId(request.dataset_id()));
  BNN_ASSIGN_OR_RETURN(const std::string deleted,
                       datasets_->Delete(id, request.force()));
  metrics_->datasets().Set(static_cast<double>(datasets_->size()));
  response->set_dataset_id(deleted);
  return absl::OkStatus();
}

absl::Status BnnServiceImpl::DoListMethods(v1::ListMethodsResponse* response) {
  for (const std::string& name : registry_->Names()) {
    BNN_ASSIGN_OR_RETURN(const MethodRegistry::Entry* entry,
                         registry_->Find(name));
    v1::MethodInfo* info = response->add_methods();
    info->set_name(entry->name);
    info->set_description(entry->description);
    for (const ParamInfo& param : entry->params) {
      v1::MethodParam* out = info->add_params();
      out->set_name(param.name);
      out->set_type(param.type);
      out->set_default_value(param.default_value);
      out->set_help(param.help);
    }
  }
  return absl::OkStatus();
}

}  // namespace bnn::server
