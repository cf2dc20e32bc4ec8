// A typed client for bnn.v1.BnnService: one method per RPC, absl::Status
// errors, a deadline on every call (covering the whole stream of a streaming
// RPC), and chunked client-streaming uploads, appends and snapshot imports.
#ifndef BNN_CLIENT_BNN_CLIENT_H_
#define BNN_CLIENT_BNN_CLIENT_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <absl/status/status.h>
#include <absl/status/statusor.h>
#include <absl/strings/string_view.h>
#include <absl/time/time.h>
#include <absl/types/span.h>
#include <google/protobuf/repeated_ptr_field.h>
#include <grpcpp/channel.h>
#include <grpcpp/client_context.h>
#include <grpcpp/support/status.h>
#include <grpcpp/support/sync_stream.h>

#include "bnn/v1/bnn_service.grpc.pb.h"
#include "bnn/v1/bnn_service.pb.h"

namespace bnn::client {

// The only grpc::Status -> absl::Status conversion in the client: the codes
// share their numbering, the message is kept verbatim.
absl::Status FromGrpcStatus(const grpc::Status& status);

// True for SUCCEEDED, FAILED and CANCELLED: the job will not change again.
// (INTERRUPTED jobs resume when their server runs again.)
bool IsTerminal(v1::JobState state);

// Appends the row-major rows of `features` (num_features values each) to
// `rows`, e.g. PredictRequest.rows or PoolRows.rows. InvalidArgument if
// num_features < 1 or features is not a whole number of rows.
absl::Status AddFeatureRows(
    absl::Span<const double> features, int64_t num_features,
    google::protobuf::RepeatedPtrField<v1::Features>* rows);

// Sets `tensor` to the packed form of the row-major rows of `features`
// (num_features values each): shape [rows, num_features], values in f64.
// InvalidArgument if num_features < 1 or features is not a whole number of
// rows.
absl::Status SetPackedRows(absl::Span<const double> features,
                           int64_t num_features, v1::Tensor* tensor);

class BnnClient {
 public:
  struct Options {
    // Server address, HOST:PORT.
    std::string target = "127.0.0.1:50051";
    // Deadline of every call; for a streaming call (uploads, appends,
    // snapshot export and import) it covers the whole stream.
    absl::Duration rpc_timeout = absl::Seconds(30);
    // Upload and append chunking: a RowChunk holds at most this many rows
    // and roughly at most this many serialised bytes, so a chunk always stays
    // well below gRPC's default 4 MiB message limit whatever the row width.
    // ImportSnapshot sends SnapshotChunks of chunk_bytes bytes.
    int chunk_rows = 4096;
    int64_t chunk_bytes = int64_t{1} << 20;
    // Largest response accepted (predictions for many rows can exceed gRPC's
    // 4 MiB default).
    int max_receive_bytes = 256 << 20;
    // Bearer token sent as `authorization: Bearer <token>` metadata on every
    // call (RFC 6750 section 2.1); empty: no authorization header. Printable
    // ASCII without spaces.
    std::string token;
    // TLS: PEM files of the certificate authorities that sign the server's
    // certificate (tls_ca_file) and of the client's own certificate chain
    // and private key (tls_cert_file, tls_key_file: both or neither), for a
    // server that asks for one. Any of them set: the channel uses TLS, with
    // the system's root certificates when tls_ca_file is empty. All empty:
    // a plaintext channel.
    std::string tls_ca_file;
    std::string tls_cert_file;
    std::string tls_key_file;

    absl::Status Validate() const;
  };

  // Creates a channel to options.target, plaintext or TLS (see Options).
  // Unreadable TLS files fail here (NotFound naming the field and path);
  // connection and handshake failures surface on the first call
  // (UNAVAILABLE), not here.
  static absl::StatusOr<std::unique_ptr<BnnClient>> Create(
      const Options& options);
  // Uses an existing channel (tests, custom credentials). `options.target`
  // and the TLS files are ignored; the token is still sent.
  static absl::StatusOr<std::unique_ptr<BnnClient>> Create(
      std::shared_ptr<grpc::Channel> channel, const Options& options);

  const Options& options() const { return options_; }

  // Streams `header` and then `rows` in chunks. The server validates every
  // row; nothing is stored unless all are valid.
  absl::StatusOr<v1::DatasetInfo> UploadDataset(
      const v1::DatasetHeader& header, absl::Span<const v1::Example> rows);
  // Dense form: `features` is row-major targets.size() x
  // header.num_features(). InvalidArgument if the sizes disagree.
  absl::StatusOr<v1::DatasetInfo> UploadDataset(
      const v1::DatasetHeader& header, absl::Span<const double> features,
      absl::Span<const double> targets);

  // Streams `rows` after an AppendHeader, creating the dataset's next
  // version (returned). With `expected_version`, fails with
  // FailedPrecondition unless that is still the latest version, so two
  // labelling loops cannot interleave their appends unnoticed.
  absl::StatusOr<v1::DatasetInfo> AppendRows(
      absl::string_view dataset_id, absl::Span<const v1::Example> rows,
      std::optional<int64_t> expected_version = std::nullopt);
  // Dense form: `features` is row-major targets.size() x num_features.
  absl::StatusOr<v1::DatasetInfo> AppendRows(
      absl::string_view dataset_id, absl::Span<const double> features,
      int64_t num_features, absl::Span<const double> targets,
      std::optional<int64_t> expected_version = std::nullopt);

  // The latest version unless `version` is set.
  absl::StatusOr<v1::DatasetInfo> GetDataset(
      absl::string_view dataset_id,
      std::optional<int64_t> version = std::nullopt);
  absl::StatusOr<std::vector<v1::DatasetInfo>> ListDatasets();

  // Returns the id of the queued job. For continual learning set
  // dataset_version, parent_snapshot_id and prior_from_parent in `request`.
  absl::StatusOr<std::string> StartTraining(
      const v1::StartTrainingRequest& request);
  absl::StatusOr<v1::Job> GetJob(absl::string_view job_id);
  // A queued job comes back CANCELLED, a running one CANCELLING (it stops
  // when its current step ends), a finished one as it is.
  absl::StatusOr<v1::Job> CancelJob(absl::string_view job_id);
  // One page of jobs, newest first (request.page_token() continues a
  // listing).
  absl::StatusOr<v1::ListJobsResponse> ListJobs(
      const v1::ListJobsRequest& request);
  // Up to `limit` jobs the filters of `request` match, newest first, paging
  // through ListJobs (its page_size and page_token are set here).
  absl::StatusOr<std::vector<v1::Job>> ListAllJobs(v1::ListJobsRequest request,
                                                   int limit);

  // One WatchJob stream: `on_event` sees every event in order until the
  // stream ends after a final state (OK), `timeout` passes
  // (DeadlineExceeded), the server goes away (Unavailable; the job resumes
  // when it is back), or `on_event` returns false (OK, the stream
  // cancelled). With `after_step`, continues a watch that saw progress up
  // to that step.
  absl::Status WatchJob(
      absl::string_view job_id, std::optional<int64_t> after_step,
      absl::Duration timeout,
      const std::function<bool(const v1::JobEvent&)>& on_event);
  // WatchJob until the job reaches a final state, reconnecting whenever a
  // stream ends Unavailable (a server restart or a lost connection; every
  // `reconnect_delay` until it answers) with after_step = the last progress
  // step seen, so `on_event` sees each step's progress at most once and,
  // while the server keeps it, without a gap. Returns the final job
  // (GetJob), or DeadlineExceeded once `timeout` passes.
  absl::StatusOr<v1::Job> WatchJobUntilDone(
      absl::string_view job_id, absl::Duration timeout,
      const std::function<void(const v1::JobEvent&)>& on_event = nullptr,
      absl::Duration reconnect_delay = absl::Milliseconds(500));

  // Polls GetJob, backing off from 50 ms to 1 s between polls, until the job
  // reaches a terminal state (returned whatever it is: check job.state()) or
  // `timeout` passes (DeadlineExceeded naming the last state). `on_poll`, if
  // set, sees every polled job, e.g. to report progress.
  absl::StatusOr<v1::Job> WaitForJob(
      absl::string_view job_id, absl::Duration timeout,
      const std::function<void(const v1::Job&)>& on_poll = nullptr);

  absl::StatusOr<v1::PredictResponse> Predict(
      const v1::PredictRequest& request);
  // Dense form: `features` is row-major num_rows x num_features (num_rows is
  // features.size() / num_features), sent packed (PredictRequest.features).
  // num_samples 0 means the server default; without a seed the server picks
  // one and returns it.
  absl::StatusOr<v1::PredictResponse> Predict(
      absl::string_view snapshot_id, absl::Span<const double> features,
      int64_t num_features, int num_samples,
      std::optional<uint64_t> seed = std::nullopt);

  // The k pool rows the request's heuristic scores highest, best first.
  absl::StatusOr<v1::AcquireResponse> Acquire(
      const v1::AcquireRequest& request);

  // The model's scores on labelled rows (EvaluateResponse: the fields of
  // the snapshot's task).
  absl::StatusOr<v1::EvaluateResponse> Evaluate(
      const v1::EvaluateRequest& request);

  // Every snapshot, or only those trained on `dataset_id` when non-empty.
  absl::StatusOr<std::vector<v1::SnapshotInfo>> ListSnapshots(
      absl::string_view dataset_id = "");
  absl::StatusOr<v1::SnapshotInfo> GetSnapshot(absl::string_view snapshot_id);
  // FailedPrecondition naming the model versions that point at the
  // snapshot, unless `force` (which removes those versions too).
  absl::Status DeleteSnapshot(absl::string_view snapshot_id,
                              bool force = false);

  // Streams the snapshot file; `sink` sees every chunk in order and may stop
  // the transfer by returning an error (which is returned). One deadline,
  // options().rpc_timeout, covers the whole stream.
  absl::Status ExportSnapshot(
      absl::string_view snapshot_id,
      const std::function<absl::Status(absl::string_view)>& sink);
  absl::StatusOr<std::string> ExportSnapshotToString(
      absl::string_view snapshot_id);
  // Writes `path` only once the whole snapshot has arrived (through a
  // temporary file beside it, renamed into place), so a failed export never
  // leaves a truncated file at `path`. Returns the number of bytes written.
  absl::StatusOr<int64_t> ExportSnapshotToFile(absl::string_view snapshot_id,
                                               const std::string& path);
  // The same for a request naming a snapshot or a model reference
  // (request.model(): "NAME", "NAME@ALIAS" or "NAME:VERSION"). `first`, if
  // set, receives the first chunk's description of what was sent
  // (snapshot_id, model_name, model_version; its data cleared).
  absl::Status ExportSnapshot(
      const v1::ExportSnapshotRequest& request,
      const std::function<absl::Status(absl::string_view)>& sink,
      v1::SnapshotChunk* first = nullptr);
  absl::StatusOr<int64_t> ExportSnapshotToFile(
      const v1::ExportSnapshotRequest& request, const std::string& path,
      v1::SnapshotChunk* first = nullptr);

  // Sends a snapshot file in chunks of options().chunk_bytes; the server
  // checks it before storing it under a new id. The file is read as it is
  // sent, so its size is not bounded by memory.
  absl::StatusOr<v1::SnapshotInfo> ImportSnapshot(absl::string_view bytes);
  absl::StatusOr<v1::SnapshotInfo> ImportSnapshotFromFile(
      const std::string& path);

  absl::StatusOr<std::vector<v1::MethodInfo>> ListMethods();

  // Named models (docs/api.md#named-models). Publishes `snapshot_id` as the
  // next version of model `name` and points `aliases` at it.
  absl::StatusOr<v1::ModelVersion> PublishModel(
      absl::string_view name, absl::string_view snapshot_id,
      const std::vector<std::string>& aliases = {});
  // Every model (without its versions), following the pages of ListModels.
  absl::StatusOr<std::vector<v1::ModelInfo>> ListModels();
  // A model with every version.
  absl::StatusOr<v1::ModelInfo> GetModel(absl::string_view name);
  // Points `alias` at `version`; returns the model.
  absl::StatusOr<v1::ModelInfo> SetAlias(absl::string_view name,
                                         absl::string_view alias,
                                         int64_t version);
  absl::StatusOr<v1::ModelInfo> DeleteAlias(absl::string_view name,
                                            absl::string_view alias);
  absl::Status DeleteModel(absl::string_view name);

  // Deletes a dataset (by id or name) and returns its id. FailedPrecondition
  // naming the snapshots and queued or running jobs that use it, unless
  // `force`.
  absl::StatusOr<std::string> DeleteDataset(absl::string_view dataset_id,
                                            bool force = false);

  // The grpc.health.v1 status of `service` ("" = the server as a whole):
  // "SERVING", "NOT_SERVING", "UNKNOWN" or "SERVICE_UNKNOWN". The health
  // service needs no token.
  absl::StatusOr<std::string> CheckHealth(absl::string_view service = "");

 private:
  BnnClient(std::shared_ptr<grpc::Channel> channel, const Options& options)
      : channel_(channel),
        stub_(v1::BnnService::NewStub(channel)),
        options_(options) {}

  // Every call's deadline (now + options_.rpc_timeout, or + `timeout`) and
  // authorization metadata.
  void PrepareContext(grpc::ClientContext* context) const {
    PrepareContext(context, options_.rpc_timeout);
  }
  void PrepareContext(grpc::ClientContext* context,
                      absl::Duration timeout) const;

  // One unary call of `rpc` (a synchronous method of the stub) with the
  // deadline set.
  template <typename Request, typename Response>
  absl::StatusOr<Response> Unary(
      grpc::Status (v1::BnnService::Stub::*rpc)(grpc::ClientContext*,
                                                const Request&, Response*),
      const Request& request);

  // Streams the header and then the rows produced by fill_row(i, example)
  // for i in [0, num_rows).
  absl::StatusOr<v1::DatasetInfo> Upload(
      const v1::DatasetHeader& header, int64_t num_rows,
      const std::function<void(int64_t, v1::Example*)>& fill_row);
  absl::StatusOr<v1::DatasetInfo> Append(
      absl::string_view dataset_id, std::optional<int64_t> expected_version,
      int64_t num_rows,
      const std::function<void(int64_t, v1::Example*)>& fill_row);
  // One client-streaming call of `rpc` (UploadDataset or AppendRows):
  // `header`, then the rows in RowChunks, under one deadline.
  template <typename Request, typename Response>
  absl::StatusOr<Response> StreamRows(
      std::unique_ptr<grpc::ClientWriter<Request>> (v1::BnnService::Stub::*rpc)(
          grpc::ClientContext*, Response*),
      const Request& header, int64_t num_rows,
      const std::function<void(int64_t, v1::Example*)>& fill_row);
  // Streams SnapshotChunks filled by next_chunk(&data) until it returns
  // false; an error from it cancels the call and is returned.
  absl::StatusOr<v1::SnapshotInfo> Import(
      const std::function<absl::StatusOr<bool>(std::string*)>& next_chunk);

  std::shared_ptr<grpc::Channel> channel_;
  std::unique_ptr<v1::BnnService::Stub> stub_;
  const Options options_;
};

}  // namespace bnn::client

#endif  // BNN_CLIENT_BNN_CLIENT_H_
