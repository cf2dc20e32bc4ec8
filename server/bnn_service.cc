#include "server/bnn_service.h"

#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <absl/random/random.h>
#include <absl/strings/str_cat.h>
#include <spdlog/spdlog.h>

#include "bnn/data/dataset.h"
#include "bnn/predict/predictor.h"
#include "bnn/status.h"

#include "server/compute_threads.h"
#include "server/status_util.h"
#include "server/training_request.h"

namespace bnn::server {
namespace {

// Uploads finishing at once share these threads.
constexpr int kUploadThreads = 2;

absl::Status RequireId(absl::string_view field, absl::string_view value) {
  if (value.empty()) {
    return absl::InvalidArgumentError(absl::StrCat(field, " is required"));
  }
  return absl::OkStatus();
}

// Failures that point at the server rather than the request.
bool IsServerError(const absl::Status& status) {
  switch (status.code()) {
    case absl::StatusCode::kInternal:
    case absl::StatusCode::kDataLoss:
    case absl::StatusCode::kUnknown:
    case absl::StatusCode::kUnavailable:
      return true;
    default:
      return false;
  }
}

void ToDatasetInfo(const store::DatasetMeta& meta, v1::DatasetInfo* info) {
  info->set_dataset_id(meta.dataset_id());
  info->set_name(meta.name());
  info->set_task(meta.task() == TaskToString(Task::kRegression)
                     ? v1::TASK_REGRESSION
                     : v1::TASK_CLASSIFICATION);
  info->set_num_rows(meta.num_rows());
  info->set_num_features(meta.num_features());
  info->set_num_classes(meta.num_classes());
  *info->mutable_class_values() = meta.class_values();
  info->set_version(meta.version());
  info->set_hash(meta.hash());
  info->set_created_unix_ms(meta.created_unix_ms());
  *info->mutable_feature_names() = meta.feature_names();
  info->set_target_name(meta.target_name());
}

v1::JobState ToJobState(store::JobRecord::State state) {
  switch (state) {
    case store::JobRecord::QUEUED:
      return v1::JOB_STATE_QUEUED;
    case store::JobRecord::RUNNING:
      return v1::JOB_STATE_RUNNING;
    case store::JobRecord::SUCCEEDED:
      return v1::JOB_STATE_SUCCEEDED;
    case store::JobRecord::FAILED:
      return v1::JOB_STATE_FAILED;
    case store::JobRecord::CANCELLED:
      return v1::JOB_STATE_CANCELLED;
    default:
      return v1::JOB_STATE_UNSPECIFIED;
  }
}

void ToJob(const store::JobRecord& record, v1::Job* job) {
  job->set_job_id(record.job_id());
  job->set_state(ToJobState(record.state()));
  job->set_dataset_id(record.dataset_id());
  job->set_method(record.method());
  *job->mutable_params() = record.params();
  job->set_progress(record.progress());
  job->set_epoch(record.epoch());
  job->set_step(record.step());
  job->set_total_steps(record.total_steps());
  job->set_last_loss(record.last_loss());
  job->set_snapshot_id(record.snapshot_id());
  job->set_error(record.error());
  job->set_created_unix_ms(record.created_unix_ms());
  job->set_started_unix_ms(record.started_unix_ms());
  job->set_finished_unix_ms(record.finished_unix_ms());
}

}  // namespace

// Client-streaming upload. Reactions only validate and append rows; the
// end of the stream hands the dataset to the upload pool, whose thread
// stores it and finishes the call.
class BnnServiceImpl::UploadReactor final
    : public grpc::ServerReadReactor<v1::UploadDatasetRequest> {
 public:
  UploadReactor(BnnServiceImpl* service, grpc::CallbackServerContext* context,
                v1::UploadDatasetResponse* response)
      : service_(service),
        context_(context),
        response_(response),
        start_(absl::Now()) {
    StartRead(&message_);
  }

  void OnReadDone(bool ok) override {
    if (!ok) {
      // End of stream: the client half-closed, or the call is gone.
      if (context_->IsCancelled()) {
        Complete(absl::CancelledError("upload cancelled by the client"));
        return;
      }
      service_->upload_pool_.Schedule([this] { Complete(Commit()); });
      return;
    }
    if (absl::Status status = Consume(); !status.ok()) {
      Complete(status);
      return;
    }
    StartRead(&message_);
  }

  void OnDone() override { delete this; }

 private:
  // Validates one stream message and appends its rows.
  absl::Status Consume() {
    BNN_RETURN_IF_ERROR(
        ValidateUploadMessage(message_, num_messages_++, have_header_));
    if (message_.has_header()) {
      BNN_RETURN_IF_ERROR(ValidateDatasetHeader(message_.header()));
      header_ = std::move(*message_.mutable_header());
      have_header_ = true;
      data_.num_features = header_.num_features();
      data_.feature_names.assign(header_.feature_names().begin(),
                                 header_.feature_names().end());
      data_.target_name = header_.target_name();
      return absl::OkStatus();
    }
    const v1::RowChunk& chunk = message_.chunk();
    BNN_RETURN_IF_ERROR(ValidateRowChunk(chunk, header_.num_features(),
                                         data_.num_rows(),
                                         service_->options_.limits));
    for (const v1::Example& example : chunk.rows()) {
      data_.features.insert(data_.features.end(), example.x().begin(),
                            example.x().end());
      data_.targets.push_back(example.y());
    }
    return absl::OkStatus();
  }

  // Runs on the upload pool.
  absl::Status Commit() {
    BNN_RETURN_IF_ERROR(ValidateUploadComplete(have_header_, data_.num_rows()));
    if (header_.task() == v1::TASK_CLASSIFICATION) {
      BNN_RETURN_IF_ERROR(ValidateClassLabels(data_.targets));
      BNN_RETURN_IF_ERROR(EncodeClassLabels(&data_));
    }
    BNN_RETURN_IF_ERROR(data_.Validate());
    BNN_ASSIGN_OR_RETURN(const store::DatasetMeta meta,
                         service_->datasets_->Create(data_, header_.name()));
    service_->metrics_->datasets().Set(
        static_cast<double>(service_->datasets_->size()));
    spdlog::info("dataset {} '{}' stored: {} rows x {} features",
                 meta.dataset_id(), meta.name(), meta.num_rows(),
                 meta.num_features());
    ToDatasetInfo(meta, response_->mutable_dataset());
    return absl::OkStatus();
  }

  void Complete(const absl::Status& status) {
    service_->RecordOutcome(context_, "UploadDataset", start_, status);
    Finish(ToGrpcStatus(status));
  }

  BnnServiceImpl* const service_;
  grpc::CallbackServerContext* const context_;
  v1::UploadDatasetResponse* const response_;
  const absl::Time start_;
  v1::UploadDatasetRequest message_;
  int64_t num_messages_ = 0;
  bool have_header_ = false;
  v1::DatasetHeader header_;
  Dataset data_;
};

BnnServiceImpl::BnnServiceImpl(const Options& options, DatasetStore* datasets,
                               SnapshotStore* snapshots, JobRunner* jobs,
                               const MethodRegistry* registry,
                               ServerMetrics* metrics)
    : options_(options),
      datasets_(datasets),
      snapshots_(snapshots),
      jobs_(jobs),
      registry_(registry),
      metrics_(metrics),
      upload_pool_(kUploadThreads) {
  metrics_->datasets().Set(static_cast<double>(datasets_->size()));
  metrics_->snapshots().Set(static_cast<double>(snapshots_->size()));
}

void BnnServiceImpl::RecordOutcome(grpc::CallbackServerContext* context,
                                   absl::string_view rpc, absl::Time start,
                                   const absl::Status& status) {
  metrics_->RecordRpc(rpc, status.code(), absl::Now() - start);
  if (status.ok()) return;
  const std::string_view name(rpc.data(), rpc.size());  // fmt-formattable
  if (IsServerError(status)) {
    spdlog::error("{} from {} failed: {}", name, context->peer(),
                  status.ToString());
  } else {
    spdlog::warn("{} from {} rejected: {}", name, context->peer(),
                 status.ToString());
  }
}

grpc::ServerUnaryReactor* BnnServiceImpl::Finish(
    grpc::CallbackServerContext* context, absl::string_view rpc,
    absl::Time start, const absl::Status& status) {
  RecordOutcome(context, rpc, start, status);
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  reactor->Finish(ToGrpcStatus(status));
  return reactor;
}

grpc::ServerReadReactor<v1::UploadDatasetRequest>*
BnnServiceImpl::UploadDataset(grpc::CallbackServerContext* context,
                              v1::UploadDatasetResponse* response) {
  return new UploadReactor(this, context, response);
}

grpc::ServerUnaryReactor* BnnServiceImpl::GetDataset(
    grpc::CallbackServerContext* context, const v1::GetDatasetRequest* request,
    v1::DatasetInfo* response) {
  const absl::Time start = absl::Now();
  return Finish(context, "GetDataset", start, DoGetDataset(*request, response));
}

grpc::ServerUnaryReactor* BnnServiceImpl::ListDatasets(
    grpc::CallbackServerContext* context,
    const v1::ListDatasetsRequest* /*request*/,
    v1::ListDatasetsResponse* response) {
  const absl::Time start = absl::Now();
  return Finish(context, "ListDatasets", start, DoListDatasets(response));
}

grpc::ServerUnaryReactor* BnnServiceImpl::StartTraining(
    grpc::CallbackServerContext* context,
    const v1::StartTrainingRequest* request,
    v1::StartTrainingResponse* response) {
  const absl::Time start = absl::Now();
  return Finish(context, "StartTraining", start,
                DoStartTraining(*request, response));
}

grpc::ServerUnaryReactor* BnnServiceImpl::GetJob(
    grpc::CallbackServerContext* context, const v1::GetJobRequest* request,
    v1::Job* response) {
  const absl::Time start = absl::Now();
  return Finish(context, "GetJob", start, DoGetJob(*request, response));
}

grpc::ServerUnaryReactor* BnnServiceImpl::CancelJob(
    grpc::CallbackServerContext* context, const v1::CancelJobRequest* request,
    v1::Job* response) {
  const absl::Time start = absl::Now();
  return Finish(context, "CancelJob", start, DoCancelJob(*request, response));
}

grpc::ServerUnaryReactor* BnnServiceImpl::Predict(
    grpc::CallbackServerContext* context, const v1::PredictRequest* request,
    v1::PredictResponse* response) {
  const absl::Time start = absl::Now();
  return Finish(context, "Predict", start, DoPredict(*request, response));
}

grpc::ServerUnaryReactor* BnnServiceImpl::ListMethods(
    grpc::CallbackServerContext* context,
    const v1::ListMethodsRequest* /*request*/,
    v1::ListMethodsResponse* response) {
  const absl::Time start = absl::Now();
  return Finish(context, "ListMethods", start, DoListMethods(response));
}

absl::Status BnnServiceImpl::DoGetDataset(const v1::GetDatasetRequest& request,
                                          v1::DatasetInfo* response) {
  BNN_RETURN_IF_ERROR(RequireId("dataset_id", request.dataset_id()));
  BNN_ASSIGN_OR_RETURN(const store::DatasetMeta meta,
                       datasets_->Get(request.dataset_id()));
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
  BNN_ASSIGN_OR_RETURN(const store::DatasetMeta dataset,
                       datasets_->Get(request.dataset_id()));
  BNN_ASSIGN_OR_RETURN(store::JobRecord job,
                       BuildTrainingJob(request, dataset, *registry_));
  BNN_ASSIGN_OR_RETURN(job, jobs_->Submit(std::move(job)));
  response->set_job_id(job.job_id());
  return absl::OkStatus();
}

absl::Status BnnServiceImpl::DoGetJob(const v1::GetJobRequest& request,
                                      v1::Job* response) {
  BNN_RETURN_IF_ERROR(RequireId("job_id", request.job_id()));
  BNN_ASSIGN_OR_RETURN(const store::JobRecord job,
                       jobs_->Get(request.job_id()));
  ToJob(job, response);
  return absl::OkStatus();
}

absl::Status BnnServiceImpl::DoCancelJob(const v1::CancelJobRequest& request,
                                         v1::Job* response) {
  BNN_RETURN_IF_ERROR(RequireId("job_id", request.job_id()));
  BNN_ASSIGN_OR_RETURN(const store::JobRecord job,
                       jobs_->Cancel(request.job_id()));
  ToJob(job, response);
  return absl::OkStatus();
}

absl::Status BnnServiceImpl::DoPredict(const v1::PredictRequest& request,
                                       v1::PredictResponse* response) {
  BNN_RETURN_IF_ERROR(RequireId("snapshot_id", request.snapshot_id()));
  BNN_ASSIGN_OR_RETURN(
      const int num_samples,
      ResolveNumSamples(request.num_samples(), options_.limits));
  BNN_ASSIGN_OR_RETURN(const std::shared_ptr<const Predictor> predictor,
                       snapshots_->GetPredictor(request.snapshot_id()));
  BNN_RETURN_IF_ERROR(ValidatePredictRows(
      request.rows(), predictor->num_features(), options_.limits));

  const int64_t num_rows = request.rows_size();
  std::vector<double> rows;
  rows.reserve(num_rows * predictor->num_features());
  for (const v1::Features& row : request.rows()) {
    rows.insert(rows.end(), row.x().begin(), row.x().end());
  }
  PredictOptions predict_options;
  predict_options.num_samples = num_samples;
  if (request.has_seed()) {
    predict_options.seed = request.seed();
  } else {
    // Returned in the response so that the call can be repeated exactly.
    absl::BitGen gen;
    predict_options.seed = absl::Uniform<uint64_t>(gen);
  }
  UseComputeThreads(options_.compute_threads);
  BNN_ASSIGN_OR_RETURN(const Prediction prediction,
                       predictor->Predict(rows, num_rows, predict_options));

  response->set_snapshot_id(request.snapshot_id());
  response->set_num_samples(num_samples);
  response->set_seed(predict_options.seed);
  const Snapshot& snapshot = predictor->snapshot();
  response->mutable_class_values()->Add(snapshot.class_values.begin(),
                                        snapshot.class_values.end());
  const bool classification = IsClassification(snapshot.task);
  const int num_classes = prediction.num_classes;
  for (int64_t i = 0; i < num_rows; ++i) {
    v1::RowPrediction* out = response->add_predictions();
    if (classification) {
      const double* p = prediction.probabilities.data() + i * num_classes;
      out->mutable_probabilities()->Add(p, p + num_classes);
      out->set_predicted_class(prediction.predicted_class[i]);
      out->set_entropy(prediction.entropy[i]);
    } else {
      out->set_mean(prediction.mean[i]);
      out->set_variance(prediction.variance[i]);
      out->set_epistemic_variance(prediction.epistemic_variance[i]);
      out->set_aleatoric_variance(prediction.aleatoric_variance[i]);
    }
  }
  metrics_->predict_rows().Increment(static_cast<double>(num_rows));
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
