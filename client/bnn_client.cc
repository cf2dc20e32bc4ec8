#include "client/bnn_client.h"

#include <algorithm>
#include <utility>

#include <absl/strings/str_cat.h>
#include <absl/time/clock.h>
#include <grpcpp/client_context.h>
#include <grpcpp/create_channel.h>
#include <grpcpp/security/credentials.h>
#include <grpcpp/support/channel_arguments.h>
#include <grpcpp/support/sync_stream.h>

namespace bnn::client {
namespace {

// Per-row framing overhead of a repeated message field (tag + length), used
// only to estimate chunk sizes.
constexpr int64_t kRowOverheadBytes = 6;

}  // namespace

absl::Status FromGrpcStatus(const grpc::Status& status) {
  if (status.ok()) return absl::OkStatus();
  return absl::Status(static_cast<absl::StatusCode>(status.error_code()),
                      status.error_message());
}

bool IsTerminal(v1::JobState state) {
  return state == v1::JOB_STATE_SUCCEEDED || state == v1::JOB_STATE_FAILED ||
         state == v1::JOB_STATE_CANCELLED;
}

absl::Status BnnClient::Options::Validate() const {
  if (target.empty()) {
    return absl::InvalidArgumentError("target: must be HOST:PORT, got ''");
  }
  if (rpc_timeout <= absl::ZeroDuration()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "rpc_timeout: must be > 0, got ", absl::FormatDuration(rpc_timeout)));
  }
  if (chunk_rows < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("chunk_rows: must be >= 1, got ", chunk_rows));
  }
  if (chunk_bytes < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("chunk_bytes: must be >= 1, got ", chunk_bytes));
  }
  if (max_receive_bytes < 1) {
    return absl::InvalidArgumentError(absl::StrCat(
        "max_receive_bytes: must be >= 1, got ", max_receive_bytes));
  }
  return absl::OkStatus();
}

absl::StatusOr<std::unique_ptr<BnnClient>> BnnClient::Create(
    const Options& options) {
  if (absl::Status status = options.Validate(); !status.ok()) return status;
  grpc::ChannelArguments args;
  args.SetMaxReceiveMessageSize(options.max_receive_bytes);
  return Create(grpc::CreateCustomChannel(
                    options.target, grpc::InsecureChannelCredentials(), args),
                options);
}

absl::StatusOr<std::unique_ptr<BnnClient>> BnnClient::Create(
    std::shared_ptr<grpc::Channel> channel, const Options& options) {
  if (absl::Status status = options.Validate(); !status.ok()) return status;
  if (channel == nullptr) {
    return absl::InvalidArgumentError("channel: must not be null");
  }
  return std::unique_ptr<BnnClient>(
      new BnnClient(v1::BnnService::NewStub(channel), options));
}

void BnnClient::SetDeadline(grpc::ClientContext* context) const {
  context->set_deadline(absl::ToChronoTime(absl::Now() + options_.rpc_timeout));
}

absl::StatusOr<v1::DatasetInfo> BnnClient::Upload(
    const v1::DatasetHeader& header, int64_t num_rows,
    const std::function<void(int64_t, v1::Example*)>& fill_row) {
  grpc::ClientContext context;
  SetDeadline(&context);
  v1::UploadDatasetResponse response;
  std::unique_ptr<grpc::ClientWriter<v1::UploadDatasetRequest>> writer =
      stub_->UploadDataset(&context, &response);

  v1::UploadDatasetRequest request;
  *request.mutable_header() = header;
  // A failed Write means the server has already ended the call (typically
  // rejecting a row); Finish() below reports why.
  bool open = writer->Write(request);
  int64_t next = 0;
  while (open && next < num_rows) {
    request.Clear();
    v1::RowChunk* chunk = request.mutable_chunk();
    int64_t bytes = 0;
    while (next < num_rows && chunk->rows_size() < options_.chunk_rows &&
           bytes < options_.chunk_bytes) {
      v1::Example* row = chunk->add_rows();
      fill_row(next++, row);
      bytes += static_cast<int64_t>(row->ByteSizeLong()) + kRowOverheadBytes;
    }
    open = writer->Write(request);
  }
  if (open) writer->WritesDone();
  if (absl::Status status = FromGrpcStatus(writer->Finish()); !status.ok()) {
    return status;
  }
  return std::move(*response.mutable_dataset());
}

absl::StatusOr<v1::DatasetInfo> BnnClient::UploadDataset(
    const v1::DatasetHeader& header, absl::Span<const v1::Example> rows) {
  return Upload(header, static_cast<int64_t>(rows.size()),
                [&](int64_t i, v1::Example* row) { *row = rows[i]; });
}

absl::StatusOr<v1::DatasetInfo> BnnClient::UploadDataset(
    const v1::DatasetHeader& header, absl::Span<const double> features,
    absl::Span<const double> targets) {
  const int64_t width = header.num_features();
  if (width < 1 || features.size() != targets.size() * width) {
    return absl::InvalidArgumentError(absl::StrCat(
        "features: expected ", targets.size(), " rows x num_features ", width,
        " values, got ", features.size()));
  }
  return Upload(header, static_cast<int64_t>(targets.size()),
                [&](int64_t i, v1::Example* row) {
                  row->mutable_x()->Add(features.begin() + i * width,
                                        features.begin() + (i + 1) * width);
                  row->set_y(targets[i]);
                });
}

absl::StatusOr<v1::DatasetInfo> BnnClient::GetDataset(
    absl::string_view dataset_id) {
  v1::GetDatasetRequest request;
  request.set_dataset_id(std::string(dataset_id));
  v1::DatasetInfo response;
  grpc::ClientContext context;
  SetDeadline(&context);
  if (absl::Status status =
          FromGrpcStatus(stub_->GetDataset(&context, request, &response));
      !status.ok()) {
    return status;
  }
  return response;
}

absl::StatusOr<std::vector<v1::DatasetInfo>> BnnClient::ListDatasets() {
  v1::ListDatasetsResponse response;
  grpc::ClientContext context;
  SetDeadline(&context);
  if (absl::Status status = FromGrpcStatus(
          stub_->ListDatasets(&context, v1::ListDatasetsRequest(), &response));
      !status.ok()) {
    return status;
  }
  return std::vector<v1::DatasetInfo>(
      std::make_move_iterator(response.mutable_datasets()->begin()),
      std::make_move_iterator(response.mutable_datasets()->end()));
}

absl::StatusOr<std::string> BnnClient::StartTraining(
    const v1::StartTrainingRequest& request) {
  v1::StartTrainingResponse response;
  grpc::ClientContext context;
  SetDeadline(&context);
  if (absl::Status status =
          FromGrpcStatus(stub_->StartTraining(&context, request, &response));
      !status.ok()) {
    return status;
  }
  return std::move(*response.mutable_job_id());
}

absl::StatusOr<v1::Job> BnnClient::GetJob(absl::string_view job_id) {
  v1::GetJobRequest request;
  request.set_job_id(std::string(job_id));
  v1::Job response;
  grpc::ClientContext context;
  SetDeadline(&context);
  if (absl::Status status =
          FromGrpcStatus(stub_->GetJob(&context, request, &response));
      !status.ok()) {
    return status;
  }
  return response;
}

absl::StatusOr<v1::Job> BnnClient::CancelJob(absl::string_view job_id) {
  v1::CancelJobRequest request;
  request.set_job_id(std::string(job_id));
  v1::Job response;
  grpc::ClientContext context;
  SetDeadline(&context);
  if (absl::Status status =
          FromGrpcStatus(stub_->CancelJob(&context, request, &response));
      !status.ok()) {
    return status;
  }
  return response;
}

absl::StatusOr<v1::Job> BnnClient::WaitForJob(
    absl::string_view job_id, absl::Duration timeout,
    const std::function<void(const v1::Job&)>& on_poll) {
  const absl::Time deadline = absl::Now() + timeout;
  absl::Duration delay = absl::Milliseconds(50);
  while (true) {
    absl::StatusOr<v1::Job> job = GetJob(job_id);
    if (!job.ok()) return job.status();
    if (on_poll) on_poll(*job);
    if (IsTerminal(job->state())) return job;
    const absl::Time now = absl::Now();
    if (now >= deadline) {
      return absl::DeadlineExceededError(absl::StrCat(
          "job ", job_id, " is still ", v1::JobState_Name(job->state()),
          " after ", absl::FormatDuration(timeout)));
    }
    absl::SleepFor(std::min(delay, deadline - now));
    delay = std::min(delay * 1.5, absl::Seconds(1));
  }
}

absl::StatusOr<v1::PredictResponse> BnnClient::Predict(
    const v1::PredictRequest& request) {
  v1::PredictResponse response;
  grpc::ClientContext context;
  SetDeadline(&context);
  if (absl::Status status =
          FromGrpcStatus(stub_->Predict(&context, request, &response));
      !status.ok()) {
    return status;
  }
  return response;
}

absl::StatusOr<v1::PredictResponse> BnnClient::Predict(
    absl::string_view snapshot_id, absl::Span<const double> features,
    int64_t num_features, int num_samples, std::optional<uint64_t> seed) {
  if (num_features < 1 || features.size() % num_features != 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("features: ", features.size(),
                     " values is not a whole number of rows of num_features ",
                     num_features));
  }
  v1::PredictRequest request;
  request.set_snapshot_id(std::string(snapshot_id));
  request.set_num_samples(num_samples);
  if (seed.has_value()) request.set_seed(*seed);
  for (size_t begin = 0; begin < features.size(); begin += num_features) {
    request.add_rows()->mutable_x()->Add(
        features.begin() + begin, features.begin() + begin + num_features);
  }
  return Predict(request);
}

absl::StatusOr<std::vector<v1::MethodInfo>> BnnClient::ListMethods() {
  v1::ListMethodsResponse response;
  grpc::ClientContext context;
  SetDeadline(&context);
  if (absl::Status status = FromGrpcStatus(
          stub_->ListMethods(&context, v1::ListMethodsRequest(), &response));
      !status.ok()) {
    return status;
  }
  return std::vector<v1::MethodInfo>(
      std::make_move_iterator(response.mutable_methods()->begin()),
      std::make_move_iterator(response.mutable_methods()->end()));
}

}  // namespace bnn::client
