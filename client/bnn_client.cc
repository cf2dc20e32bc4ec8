#include "client/bnn_client.h"

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <sstream>
#include <utility>

#include <absl/strings/str_cat.h>
#include <absl/time/clock.h>
#include <google/protobuf/unknown_field_set.h>
#include <grpcpp/client_context.h>
#include <grpcpp/create_channel.h>
#include <grpcpp/generic/generic_stub.h>
#include <grpcpp/security/credentials.h>
#include <grpcpp/support/channel_arguments.h>
#include <grpcpp/support/sync_stream.h>

namespace bnn::client {
namespace {

// Per-row framing overhead of a repeated message field (tag + length), used
// only to estimate chunk sizes.
constexpr int64_t kRowOverheadBytes = 6;

// Writes the rows produced by fill_row(i, example) for i in [0, num_rows) as
// RowChunks of at most chunk_rows rows and about chunk_bytes bytes. Returns
// false as soon as a Write fails: the server has then already ended the call
// (typically rejecting a row) and Finish() reports why.
template <typename Request>
bool WriteRowChunks(grpc::ClientWriter<Request>* writer, int64_t num_rows,
                    const std::function<void(int64_t, v1::Example*)>& fill_row,
                    int chunk_rows, int64_t chunk_bytes) {
  Request request;
  int64_t next = 0;
  while (next < num_rows) {
    request.Clear();
    v1::RowChunk* chunk = request.mutable_chunk();
    int64_t bytes = 0;
    while (next < num_rows && chunk->rows_size() < chunk_rows &&
           bytes < chunk_bytes) {
      v1::Example* row = chunk->add_rows();
      fill_row(next++, row);
      bytes += static_cast<int64_t>(row->ByteSizeLong()) + kRowOverheadBytes;
    }
    if (!writer->Write(request)) return false;
  }
  return true;
}

// The dense (features, targets) form as a fill_row callback, after checking
// that features holds targets.size() rows of `width` values.
absl::StatusOr<std::function<void(int64_t, v1::Example*)>> DenseRows(
    absl::Span<const double> features, int64_t width,
    absl::Span<const double> targets) {
  if (width < 1 || features.size() != targets.size() * width) {
    return absl::InvalidArgumentError(absl::StrCat(
        "features: expected ", targets.size(), " rows x num_features ", width,
        " values, got ", features.size()));
  }
  return [features, width, targets](int64_t i, v1::Example* row) {
    row->mutable_x()->Add(features.begin() + i * width,
                          features.begin() + (i + 1) * width);
    row->set_y(targets[i]);
  };
}

// The contents of the PEM file `path` named by Options field `field`; ""
// for an empty path.
absl::StatusOr<std::string> ReadPem(absl::string_view field,
                                    const std::string& path) {
  if (path.empty()) return std::string();
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    return absl::NotFoundError(absl::StrCat(field, ": cannot open ", path));
  }
  std::ostringstream text;
  text << in.rdbuf();
  if (in.bad()) {
    return absl::DataLossError(absl::StrCat(field, ": cannot read ", path));
  }
  return text.str();
}

// Plaintext, or TLS when any TLS file is set.
absl::StatusOr<std::shared_ptr<grpc::ChannelCredentials>> ChannelCredentials(
    const BnnClient::Options& options) {
  if (options.tls_ca_file.empty() && options.tls_cert_file.empty()) {
    return grpc::InsecureChannelCredentials();
  }
  grpc::SslCredentialsOptions ssl;
  absl::StatusOr<std::string> pem = ReadPem("tls_ca_file", options.tls_ca_file);
  if (!pem.ok()) return pem.status();
  ssl.pem_root_certs = *std::move(pem);
  pem = ReadPem("tls_cert_file", options.tls_cert_file);
  if (!pem.ok()) return pem.status();
  ssl.pem_cert_chain = *std::move(pem);
  pem = ReadPem("tls_key_file", options.tls_key_file);
  if (!pem.ok()) return pem.status();
  ssl.pem_private_key = *std::move(pem);
  return grpc::SslCredentials(ssl);
}

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

absl::Status AddFeatureRows(
    absl::Span<const double> features, int64_t num_features,
    google::protobuf::RepeatedPtrField<v1::Features>* rows) {
  if (num_features < 1 || features.size() % num_features != 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("features: ", features.size(),
                     " values is not a whole number of rows of num_features ",
                     num_features));
  }
  rows->Reserve(rows->size() +
                static_cast<int>(features.size() / num_features));
  for (size_t begin = 0; begin < features.size(); begin += num_features) {
    rows->Add()->mutable_x()->Add(features.begin() + begin,
                                  features.begin() + begin + num_features);
  }
  return absl::OkStatus();
}

absl::Status SetPackedRows(absl::Span<const double> features,
                           int64_t num_features, v1::Tensor* tensor) {
  if (num_features < 1 || features.size() % num_features != 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("features: ", features.size(),
                     " values is not a whole number of rows of num_features ",
                     num_features));
  }
  tensor->Clear();
  tensor->add_shape(static_cast<int64_t>(features.size()) / num_features);
  tensor->add_shape(num_features);
  tensor->mutable_f64()->Add(features.begin(), features.end());
  return absl::OkStatus();
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
  // A metadata value may not hold control characters, and a bearer token
  // (RFC 6750 section 2.1) no spaces.
  for (char c : token) {
    if (c < 0x21 || c > 0x7E) {
      return absl::InvalidArgumentError(
          "token: must be printable ASCII without spaces");
    }
  }
  if (tls_cert_file.empty() != tls_key_file.empty()) {
    return absl::InvalidArgumentError(
        "tls_cert_file, tls_key_file: give both (the client's certificate "
        "chain and its private key) or neither");
  }
  return absl::OkStatus();
}

absl::StatusOr<std::unique_ptr<BnnClient>> BnnClient::Create(
    const Options& options) {
  if (absl::Status status = options.Validate(); !status.ok()) return status;
  absl::StatusOr<std::shared_ptr<grpc::ChannelCredentials>> credentials =
      ChannelCredentials(options);
  if (!credentials.ok()) return credentials.status();
  grpc::ChannelArguments args;
  args.SetMaxReceiveMessageSize(options.max_receive_bytes);
  return Create(grpc::CreateCustomChannel(options.target, *credentials, args),
                options);
}

absl::StatusOr<std::unique_ptr<BnnClient>> BnnClient::Create(
    std::shared_ptr<grpc::Channel> channel, const Options& options) {
  if (absl::Status status = options.Validate(); !status.ok()) return status;
  if (channel == nullptr) {
    return absl::InvalidArgumentError("channel: must not be null");
  }
  return std::unique_ptr<BnnClient>(new BnnClient(std::move(channel), options));
}

void BnnClient::PrepareContext(grpc::ClientContext* context,
                               absl::Duration timeout) const {
  context->set_deadline(absl::ToChronoTime(absl::Now() + timeout));
  if (!options_.token.empty()) {
    context->AddMetadata("authorization",
                         absl::StrCat("Bearer ", options_.token));
  }
}

template <typename Request, typename Response>
absl::StatusOr<Response> BnnClient::Unary(
    grpc::Status (v1::BnnService::Stub::*rpc)(grpc::ClientContext*,
                                              const Request&, Response*),
    const Request& request) {
  Response response;
  grpc::ClientContext context;
  PrepareContext(&context);
  if (absl::Status status =
          FromGrpcStatus((stub_.get()->*rpc)(&context, request, &response));
      !status.ok()) {
    return status;
  }
  return response;
}

template <typename Request, typename Response>
absl::StatusOr<Response> BnnClient::StreamRows(
    std::unique_ptr<grpc::ClientWriter<Request>> (v1::BnnService::Stub::*rpc)(
        grpc::ClientContext*, Response*),
    const Request& header, int64_t num_rows,
    const std::function<void(int64_t, v1::Example*)>& fill_row) {
  grpc::ClientContext context;
  PrepareContext(&context);
  Response response;
  std::unique_ptr<grpc::ClientWriter<Request>> writer =
      (stub_.get()->*rpc)(&context, &response);
  if (writer->Write(header) &&
      WriteRowChunks(writer.get(), num_rows, fill_row, options_.chunk_rows,
                     options_.chunk_bytes)) {
    writer->WritesDone();
  }
  if (absl::Status status = FromGrpcStatus(writer->Finish()); !status.ok()) {
    return status;
  }
  return response;
}

absl::StatusOr<v1::DatasetInfo> BnnClient::Upload(
    const v1::DatasetHeader& header, int64_t num_rows,
    const std::function<void(int64_t, v1::Example*)>& fill_row) {
  v1::UploadDatasetRequest first;
  *first.mutable_header() = header;
  absl::StatusOr<v1::UploadDatasetResponse> response = StreamRows(
      &v1::BnnService::Stub::UploadDataset, first, num_rows, fill_row);
  if (!response.ok()) return response.status();
  return std::move(*response->mutable_dataset());
}

absl::StatusOr<v1::DatasetInfo> BnnClient::UploadDataset(
    const v1::DatasetHeader& header, absl::Span<const v1::Example> rows) {
  return Upload(header, static_cast<int64_t>(rows.size()),
                [&](int64_t i, v1::Example* row) { *row = rows[i]; });
}

absl::StatusOr<v1::DatasetInfo> BnnClient::UploadDataset(
    const v1::DatasetHeader& header, absl::Span<const double> features,
    absl::Span<const double> targets) {
  auto fill_row = DenseRows(features, header.num_features(), targets);
  if (!fill_row.ok()) return fill_row.status();
  return Upload(header, static_cast<int64_t>(targets.size()), *fill_row);
}

absl::StatusOr<v1::DatasetInfo> BnnClient::Append(
    absl::string_view dataset_id, std::optional<int64_t> expected_version,
    int64_t num_rows,
    const std::function<void(int64_t, v1::Example*)>& fill_row) {
  v1::AppendRowsRequest first;
  first.mutable_header()->set_dataset_id(std::string(dataset_id));
  if (expected_version.has_value()) {
    first.mutable_header()->set_expected_version(*expected_version);
  }
  return StreamRows(&v1::BnnService::Stub::AppendRows, first, num_rows,
                    fill_row);
}

absl::StatusOr<v1::DatasetInfo> BnnClient::AppendRows(
    absl::string_view dataset_id, absl::Span<const v1::Example> rows,
    std::optional<int64_t> expected_version) {
  return Append(dataset_id, expected_version, static_cast<int64_t>(rows.size()),
                [&](int64_t i, v1::Example* row) { *row = rows[i]; });
}

absl::StatusOr<v1::DatasetInfo> BnnClient::AppendRows(
    absl::string_view dataset_id, absl::Span<const double> features,
    int64_t num_features, absl::Span<const double> targets,
    std::optional<int64_t> expected_version) {
  auto fill_row = DenseRows(features, num_features, targets);
  if (!fill_row.ok()) return fill_row.status();
  return Append(dataset_id, expected_version,
                static_cast<int64_t>(targets.size()), *fill_row);
}

absl::StatusOr<v1::DatasetInfo> BnnClient::GetDataset(
    absl::string_view dataset_id, std::optional<int64_t> version) {
  v1::GetDatasetRequest request;
  request.set_dataset_id(std::string(dataset_id));
  if (version.has_value()) request.set_version(*version);
  return Unary(&v1::BnnService::Stub::GetDataset, request);
}

absl::StatusOr<std::vector<v1::DatasetInfo>> BnnClient::ListDatasets() {
  absl::StatusOr<v1::ListDatasetsResponse> response =
      Unary(&v1::BnnService::Stub::ListDatasets, v1::ListDatasetsRequest());
  if (!response.ok()) return response.status();
  return std::vector<v1::DatasetInfo>(
      std::make_move_iterator(response->mutable_datasets()->begin()),
      std::make_move_iterator(response->mutable_datasets()->end()));
}

absl::StatusOr<std::string> BnnClient::StartTraining(
    const v1::StartTrainingRequest& request) {
  absl::StatusOr<v1::StartTrainingResponse> response =
      Unary(&v1::BnnService::Stub::StartTraining, request);
  if (!response.ok()) return response.status();
  return std::move(*response->mutable_job_id());
}

absl::StatusOr<v1::Job> BnnClient::GetJob(absl::string_view job_id) {
  v1::GetJobRequest request;
  request.set_job_id(std::string(job_id));
  return Unary(&v1::BnnService::Stub::GetJob, request);
}

absl::StatusOr<v1::Job> BnnClient::CancelJob(absl::string_view job_id) {
  v1::CancelJobRequest request;
  request.set_job_id(std::string(job_id));
  return Unary(&v1::BnnService::Stub::CancelJob, request);
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

absl::StatusOr<v1::ListJobsResponse> BnnClient::ListJobs(
    const v1::ListJobsRequest& request) {
  return Unary(&v1::BnnService::Stub::ListJobs, request);
}

absl::StatusOr<std::vector<v1::Job>> BnnClient::ListAllJobs(
    v1::ListJobsRequest request, int limit) {
  constexpr int kMaxPageSize = 1000;
  std::vector<v1::Job> jobs;
  request.clear_page_token();
  while (static_cast<int>(jobs.size()) < limit) {
    request.set_page_size(
        std::min(kMaxPageSize, limit - static_cast<int>(jobs.size())));
    absl::StatusOr<v1::ListJobsResponse> page = ListJobs(request);
    if (!page.ok()) return page.status();
    for (v1::Job& job : *page->mutable_jobs()) jobs.push_back(std::move(job));
    if (page->next_page_token().empty()) break;
    request.set_page_token(page->next_page_token());
  }
  return jobs;
}

absl::Status BnnClient::WatchJob(
    absl::string_view job_id, std::optional<int64_t> after_step,
    absl::Duration timeout,
    const std::function<bool(const v1::JobEvent&)>& on_event) {
  grpc::ClientContext context;
  PrepareContext(&context, timeout);
  v1::WatchJobRequest request;
  request.set_job_id(std::string(job_id));
  if (after_step.has_value()) request.set_after_step(*after_step);
  std::unique_ptr<grpc::ClientReader<v1::JobEvent>> reader =
      stub_->WatchJob(&context, request);
  v1::JobEvent event;
  while (reader->Read(&event)) {
    if (!on_event(event)) {
      context.TryCancel();
      while (reader->Read(&event)) {
      }
      reader->Finish().IgnoreError();
      return absl::OkStatus();
    }
  }
  return FromGrpcStatus(reader->Finish());
}

absl::StatusOr<v1::Job> BnnClient::WatchJobUntilDone(
    absl::string_view job_id, absl::Duration timeout,
    const std::function<void(const v1::JobEvent&)>& on_event,
    absl::Duration reconnect_delay) {
  const absl::Time deadline = absl::Now() + timeout;
  std::optional<int64_t> last_step;
  bool done = false;
  while (true) {
    const absl::Status status = WatchJob(
        job_id, last_step, deadline - absl::Now(),
        [&](const v1::JobEvent& event) {
          if (event.kind() == v1::JobEvent::KIND_PROGRESS) {
            last_step = event.step();
          }
          done = done || (event.kind() != v1::JobEvent::KIND_PROGRESS &&
                          IsTerminal(event.state()));
          if (on_event) on_event(event);
          return true;
        });
    if (done) return GetJob(job_id);
    if (!absl::IsUnavailable(status)) {
      if (absl::IsDeadlineExceeded(status) || status.ok()) {
        return absl::DeadlineExceededError(
            absl::StrCat("job ", job_id, " did not finish within ",
                         absl::FormatDuration(timeout)));
      }
      return status;
    }
    const absl::Time now = absl::Now();
    if (now >= deadline) {
      return absl::DeadlineExceededError(
          absl::StrCat("job ", job_id, " did not finish within ",
                       absl::FormatDuration(timeout),
                       "; the server is unavailable: ", status.message()));
    }
    absl::SleepFor(std::min(reconnect_delay, deadline - now));
  }
}

absl::StatusOr<v1::PredictResponse> BnnClient::Predict(
    const v1::PredictRequest& request) {
  return Unary(&v1::BnnService::Stub::Predict, request);
}

absl::StatusOr<v1::PredictResponse> BnnClient::Predict(
    absl::string_view snapshot_id, absl::Span<const double> features,
    int64_t num_features, int num_samples, std::optional<uint64_t> seed) {
  v1::PredictRequest request;
  request.set_snapshot_id(std::string(snapshot_id));
  request.set_num_samples(num_samples);
  if (seed.has_value()) request.set_seed(*seed);
  if (absl::Status status =
          SetPackedRows(features, num_features, request.mutable_features());
      !status.ok()) {
    return status;
  }
  return Predict(request);
}

absl::StatusOr<v1::AcquireResponse> BnnClient::Acquire(
    const v1::AcquireRequest& request) {
  return Unary(&v1::BnnService::Stub::Acquire, request);
}

absl::StatusOr<v1::EvaluateResponse> BnnClient::Evaluate(
    const v1::EvaluateRequest& request) {
  return Unary(&v1::BnnService::Stub::Evaluate, request);
}

absl::StatusOr<std::vector<v1::SnapshotInfo>> BnnClient::ListSnapshots(
    absl::string_view dataset_id) {
  v1::ListSnapshotsRequest request;
  request.set_dataset_id(std::string(dataset_id));
  absl::StatusOr<v1::ListSnapshotsResponse> response =
      Unary(&v1::BnnService::Stub::ListSnapshots, request);
  if (!response.ok()) return response.status();
  return std::vector<v1::SnapshotInfo>(
      std::make_move_iterator(response->mutable_snapshots()->begin()),
      std::make_move_iterator(response->mutable_snapshots()->end()));
}

absl::StatusOr<v1::SnapshotInfo> BnnClient::GetSnapshot(
    absl::string_view snapshot_id) {
  v1::GetSnapshotRequest request;
  request.set_snapshot_id(std::string(snapshot_id));
  return Unary(&v1::BnnService::Stub::GetSnapshot, request);
}

absl::Status BnnClient::DeleteSnapshot(absl::string_view snapshot_id,
                                       bool force) {
  v1::DeleteSnapshotRequest request;
  request.set_snapshot_id(std::string(snapshot_id));
  request.set_force(force);
  return Unary(&v1::BnnService::Stub::DeleteSnapshot, request).status();
}

absl::Status BnnClient::ExportSnapshot(
    absl::string_view snapshot_id,
    const std::function<absl::Status(absl::string_view)>& sink) {
  v1::ExportSnapshotRequest request;
  request.set_snapshot_id(std::string(snapshot_id));
  return ExportSnapshot(request, sink);
}

absl::Status BnnClient::ExportSnapshot(
    const v1::ExportSnapshotRequest& request,
    const std::function<absl::Status(absl::string_view)>& sink,
    v1::SnapshotChunk* first) {
  grpc::ClientContext context;
  PrepareContext(&context);
  std::unique_ptr<grpc::ClientReader<v1::SnapshotChunk>> reader =
      stub_->ExportSnapshot(&context, request);
  v1::SnapshotChunk chunk;
  absl::Status sink_status;
  for (bool is_first = true; sink_status.ok() && reader->Read(&chunk);
       is_first = false) {
    if (is_first && first != nullptr) {
      *first = chunk;
      first->clear_data();
    }
    sink_status = sink(chunk.data());
  }
  if (!sink_status.ok()) {
    // Finish() would otherwise wait for the rest of the stream.
    context.TryCancel();
    reader->Finish().IgnoreError();
    return sink_status;
  }
  return FromGrpcStatus(reader->Finish());
}

absl::StatusOr<std::string> BnnClient::ExportSnapshotToString(
    absl::string_view snapshot_id) {
  std::string bytes;
  if (absl::Status status = ExportSnapshot(snapshot_id,
                                           [&bytes](absl::string_view data) {
                                             bytes.append(data.data(),
                                                          data.size());
                                             return absl::OkStatus();
                                           });
      !status.ok()) {
    return status;
  }
  return bytes;
}

absl::StatusOr<int64_t> BnnClient::ExportSnapshotToFile(
    absl::string_view snapshot_id, const std::string& path) {
  v1::ExportSnapshotRequest request;
  request.set_snapshot_id(std::string(snapshot_id));
  return ExportSnapshotToFile(request, path);
}

absl::StatusOr<int64_t> BnnClient::ExportSnapshotToFile(
    const v1::ExportSnapshotRequest& request, const std::string& path,
    v1::SnapshotChunk* first) {
  const std::string partial = path + ".partial";
  int64_t written = 0;
  absl::Status status;
  {
    std::ofstream out(partial, std::ios::binary | std::ios::trunc);
    if (!out) {
      return absl::PermissionDeniedError(
          absl::StrCat("cannot write ", partial));
    }
    status = ExportSnapshot(
        request,
        [&](absl::string_view data) {
          out.write(data.data(), static_cast<std::streamsize>(data.size()));
          written += static_cast<int64_t>(data.size());
          return out ? absl::OkStatus()
                     : absl::DataLossError(
                           absl::StrCat("cannot write ", partial));
        },
        first);
    out.close();
    if (status.ok() && !out) {
      status = absl::DataLossError(absl::StrCat("cannot write ", partial));
    }
  }
  if (status.ok() && std::rename(partial.c_str(), path.c_str()) != 0) {
    status = absl::DataLossError(
        absl::StrCat("cannot rename ", partial, " to ", path));
  }
  if (!status.ok()) {
    std::remove(partial.c_str());
    return status;
  }
  return written;
}

absl::StatusOr<v1::SnapshotInfo> BnnClient::Import(
    const std::function<absl::StatusOr<bool>(std::string*)>& next_chunk) {
  grpc::ClientContext context;
  PrepareContext(&context);
  v1::SnapshotInfo response;
  std::unique_ptr<grpc::ClientWriter<v1::SnapshotChunk>> writer =
      stub_->ImportSnapshot(&context, &response);
  v1::SnapshotChunk chunk;
  while (true) {
    absl::StatusOr<bool> more = next_chunk(chunk.mutable_data());
    if (!more.ok()) {
      // Cancelling (rather than finishing the stream) guarantees that the
      // server never sees a complete-looking, truncated upload.
      context.TryCancel();
      writer->Finish().IgnoreError();
      return more.status();
    }
    if (!*more) {
      writer->WritesDone();
      break;
    }
    // A failed Write means the server has already ended the call.
    if (!writer->Write(chunk)) break;
  }
  if (absl::Status status = FromGrpcStatus(writer->Finish()); !status.ok()) {
    return status;
  }
  return response;
}

absl::StatusOr<v1::SnapshotInfo> BnnClient::ImportSnapshot(
    absl::string_view bytes) {
  const size_t chunk_bytes = static_cast<size_t>(options_.chunk_bytes);
  size_t offset = 0;
  return Import([&](std::string* data) -> absl::StatusOr<bool> {
    if (offset >= bytes.size()) return false;
    const size_t size = std::min(chunk_bytes, bytes.size() - offset);
    data->assign(bytes.data() + offset, size);
    offset += size;
    return true;
  });
}

absl::StatusOr<v1::SnapshotInfo> BnnClient::ImportSnapshotFromFile(
    const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return absl::NotFoundError(absl::StrCat("cannot open ", path));
  const size_t chunk_bytes = static_cast<size_t>(options_.chunk_bytes);
  return Import([&](std::string* data) -> absl::StatusOr<bool> {
    data->resize(chunk_bytes);
    in.read(data->data(), static_cast<std::streamsize>(chunk_bytes));
    if (in.bad())
      return absl::DataLossError(absl::StrCat("cannot read ", path));
    data->resize(static_cast<size_t>(in.gcount()));
    return !data->empty();
  });
}

absl::StatusOr<std::vector<v1::MethodInfo>> BnnClient::ListMethods() {
  absl::StatusOr<v1::ListMethodsResponse> response =
      Unary(&v1::BnnService::Stub::ListMethods, v1::ListMethodsRequest());
  if (!response.ok()) return response.status();
  return std::vector<v1::MethodInfo>(
      std::make_move_iterator(response->mutable_methods()->begin()),
      std::make_move_iterator(response->mutable_methods()->end()));
}

absl::StatusOr<v1::ModelVersion> BnnClient::PublishModel(
    absl::string_view name, absl::string_view snapshot_id,
    const std::vector<std::string>& aliases) {
  v1::PublishModelRequest request;
  request.set_name(std::string(name));
  request.set_snapshot_id(std::string(snapshot_id));
  for (const std::string& alias : aliases) request.add_aliases(alias);
  return Unary(&v1::BnnService::Stub::PublishModel, request);
}

absl::StatusOr<std::vector<v1::ModelInfo>> BnnClient::ListModels() {
  std::vector<v1::ModelInfo> models;
  v1::ListModelsRequest request;
  do {
    absl::StatusOr<v1::ListModelsResponse> page =
        Unary(&v1::BnnService::Stub::ListModels, request);
    if (!page.ok()) return page.status();
    for (v1::ModelInfo& model : *page->mutable_models()) {
      models.push_back(std::move(model));
    }
    request.set_page_token(page->next_page_token());
  } while (!request.page_token().empty());
  return models;
}

absl::StatusOr<v1::ModelInfo> BnnClient::GetModel(absl::string_view name) {
  v1::GetModelRequest request;
  request.set_name(std::string(name));
  return Unary(&v1::BnnService::Stub::GetModel, request);
}

absl::StatusOr<v1::ModelInfo> BnnClient::SetAlias(absl::string_view name,
                                                  absl::string_view alias,
                                                  int64_t version) {
  v1::SetAliasRequest request;
  request.set_name(std::string(name));
  request.set_alias(std::string(alias));
  request.set_version(version);
  return Unary(&v1::BnnService::Stub::SetAlias, request);
}

absl::StatusOr<v1::ModelInfo> BnnClient::DeleteAlias(absl::string_view name,
                                                     absl::string_view alias) {
  v1::DeleteAliasRequest request;
  request.set_name(std::string(name));
  request.set_alias(std::string(alias));
  return Unary(&v1::BnnService::Stub::DeleteAlias, request);
}

absl::Status BnnClient::DeleteModel(absl::string_view name) {
  v1::DeleteModelRequest request;
  request.set_name(std::string(name));
  return Unary(&v1::BnnService::Stub::DeleteModel, request).status();
}

absl::StatusOr<std::string> BnnClient::DeleteDataset(
    absl::string_view dataset_id, bool force) {
  v1::DeleteDatasetRequest request;
  request.set_dataset_id(std::string(dataset_id));
  request.set_force(force);
  absl::StatusOr<v1::DeleteDatasetResponse> response =
      Unary(&v1::BnnService::Stub::DeleteDataset, request);
  if (!response.ok()) return response.status();
  return response->dataset_id();
}

absl::StatusOr<std::string> BnnClient::CheckHealth(absl::string_view service) {
  // grpc.health.v1 is not packaged as a proto; its two messages are one
  // field each: HealthCheckRequest{string service = 1} and
  // HealthCheckResponse{ServingStatus status = 1}.
  google::protobuf::UnknownFieldSet request;
  if (!service.empty()) request.AddLengthDelimited(1, std::string(service));
  std::string request_bytes;
  request.SerializeToString(&request_bytes);
  grpc::GenericStub stub(channel_);
  grpc::CompletionQueue cq;
  grpc::ClientContext context;
  context.set_deadline(absl::ToChronoTime(absl::Now() + options_.rpc_timeout));
  grpc::Slice slice(request_bytes);
  std::unique_ptr<grpc::GenericClientAsyncResponseReader> call =
      stub.PrepareUnaryCall(&context, "/grpc.health.v1.Health/Check",
                            grpc::ByteBuffer(&slice, 1), &cq);
  call->StartCall();
  grpc::ByteBuffer response;
  grpc::Status status;
  call->Finish(&response, &status, nullptr);
  void* tag = nullptr;
  bool ok = false;
  cq.Next(&tag, &ok);
  cq.Shutdown();
  if (!status.ok()) return FromGrpcStatus(status);
  std::vector<grpc::Slice> slices;
  std::string response_bytes;
  if (response.Dump(&slices).ok()) {
    for (const grpc::Slice& s : slices) {
      response_bytes.append(reinterpret_cast<const char*>(s.begin()), s.size());
    }
  }
  google::protobuf::UnknownFieldSet fields;
  if (!fields.ParseFromString(response_bytes)) {
    return absl::InternalError("the health check response does not parse");
  }
  uint64_t value = 0;  // UNKNOWN when the field is absent
  for (int i = 0; i < fields.field_count(); ++i) {
    if (fields.field(i).number() == 1 &&
        fields.field(i).type() == google::protobuf::UnknownField::TYPE_VARINT) {
      value = fields.field(i).varint();
    }
  }
  constexpr const char* kNames[] = {"UNKNOWN", "SERVING", "NOT_SERVING",
                                    "SERVICE_UNKNOWN"};
  if (value >= 4) return absl::StrCat("status ", value);
  return std::string(kNames[value]);
}

}  // namespace bnn::client
