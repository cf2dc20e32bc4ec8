// The gRPC service: thin handlers that authorize the call (before any
// lookup, so a denial reveals nothing about the ids named), validate the
// request, call the stores, the job runner or the core, convert the status
// once (ToGrpcStatus), record metrics and log failures. Reactions never
// block: disk work (uploads, appends, imports, exports, deletions) runs on an
// I/O pool and Monte Carlo work (Predict, Acquire) on a bounded compute pool,
// whose threads finish the calls.
//
// The handlers of client- and server-streaming RPCs are defined with their
// reactors, in dataset_streams.cc, snapshot_streams.cc and job_streams.cc.
#ifndef BNN_SERVER_API_BNN_V1_BNN_SERVICE_H_
#define BNN_SERVER_API_BNN_V1_BNN_SERVICE_H_

#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include <absl/base/thread_annotations.h>
#include <absl/functional/any_invocable.h>
#include <absl/functional/function_ref.h>
#include <absl/status/status.h>
#include <absl/status/statusor.h>
#include <absl/strings/string_view.h>
#include <absl/synchronization/mutex.h>
#include <absl/time/time.h>
#include <grpcpp/grpcpp.h>

#include "bnn/interrupt.h"
#include "bnn/methods/registry.h"
#include "bnn/predict/acquisition.h"
#include "bnn/v1/bnn_service.grpc.pb.h"

#include "server/admission/compute_rate.h"
#include "server/admission/memory_budget.h"
#include "server/api/bnn_v1/request_validation.h"
#include "server/auth/authenticator.h"
#include "server/common/stream_watch.h"
#include "server/common/thread_pool.h"
#include "server/jobs/job_runner.h"
#include "server/metrics/server_metrics.h"
#include "server/store/dataset_store.h"
#include "server/store/job_store.h"
#include "server/store/model_store.h"
#include "server/store/predictor_cache.h"
#include "server/store/snapshot_store.h"

namespace bnn::server {

// The client-streaming methods are registered raw (bytes in, bytes out) so
// that their reactors parse each message themselves (stream_reader.h).
using BnnServiceBase = v1::BnnService::WithRawCallbackMethod_UploadDataset<
    v1::BnnService::WithRawCallbackMethod_AppendRows<
        v1::BnnService::WithRawCallbackMethod_ImportSnapshot<
            v1::BnnService::CallbackService>>>;

class BnnServiceImpl final : public BnnServiceBase {
 public:
  // Least computation of a Predict or Acquire call in one turn before it
  // gives the turn to another client's waiting call. It yields only between
  // chunks of rows (at most 65536 rows x samples each: milliseconds on the
  // nets of the UCI experiments), so another client's call waits for at
  // most this plus one chunk, instead of the whole call.
  static constexpr absl::Duration kComputeSlice = absl::Milliseconds(2);
  // Calls that may wait for their next turn at once, per compute worker
  // (each keeps its thread and its memory): as many clients computing
  // large calls at once take turns with the others. Beyond them, a call
  // keeps its turn until it ends, as without time slicing.
  static constexpr int kMaxYieldedPerWorker = 4;

  struct Options {
    ServerLimits limits;
    // OpenMP threads per Predict or Acquire call (--threads); 0 = OpenMP
    // default.
    int compute_threads = 0;
    // Predict, Acquire and Evaluate calls computed at once (--compute-workers);
    // later ones wait, each client's in FIFO order, the clients served in turn.
    // A call that has computed for kComputeSlice gives its turn to another
    // client's waiting call between two chunks of rows and continues after
    // it (ThreadPool::Yield).
    int compute_workers = 2;
    // A call that has computed this long continues at nice value
    // long_call_nice (ThreadPool::Options::demote_after); zero: never.
    absl::Duration long_call = absl::Milliseconds(10);
    int long_call_nice = 10;
    // Longest computation of one Predict or Acquire call
    // (--max-request-seconds), not counting the turns it gave to other
    // calls; checked between chunks of rows, as the client's deadline and
    // cancellation are.
    absl::Duration max_request_time = absl::Seconds(60);
    // The server's --data-dir: paths under it are written "<data-dir>/..."
    // in what clients see (HideDataDir); logs keep them.
    std::string data_dir;
    // The server's --blob-dir (empty: inside the data directory), written
    // "<blob-dir>/..." alike.
    std::string blob_dir;
    // Client streams (UploadDataset, AppendRows, ImportSnapshot) open at
    // once (--max-client-streams); further ones are refused.
    int max_client_streams = 16;
    // A client stream waiting longer than this for its next message is
    // ended with DEADLINE_EXCEEDED (--stream-idle-seconds).
    absl::Duration stream_idle_timeout = absl::Seconds(60);
    // WatchJob streams one client (ClientKey) may have open at once
    // (--max-watchers-per-client); further ones are refused with
    // RESOURCE_EXHAUSTED.
    int max_watchers_per_client = 8;
  };

  // Every pointer is borrowed and must outlive the service, which must
  // outlive the grpc::Server it is registered with. Client streams reserve
  // the bytes they buffer from `memory_budget`. `auth` checks every call
  // against the scope method_scopes.h gives its RPC. Snapshots are deleted
  // through `models` (ModelStore::DeleteSnapshot).
  BnnServiceImpl(const Options& options, DatasetStore* datasets,
                 SnapshotStore* snapshots, PredictorCache* predictors,
                 JobRunner* jobs, const MethodRegistry* registry,
                 ServerMetrics* metrics, MemoryBudget* memory_budget,
                 const Authenticator* auth, ModelStore* models);

  // Raw: v1::UploadDatasetRequest messages in, a v1::UploadDatasetResponse
  // out.
  grpc::ServerReadReactor<grpc::ByteBuffer>* UploadDataset(
      grpc::CallbackServerContext* context,
      grpc::ByteBuffer* response) override;
  grpc::ServerUnaryReactor* GetDataset(grpc::CallbackServerContext* context,
                                       const v1::GetDatasetRequest* request,
                                       v1::DatasetInfo* response) override;
  grpc::ServerUnaryReactor* ListDatasets(
      grpc::CallbackServerContext* context,
      const v1::ListDatasetsRequest* request,
      v1::ListDatasetsResponse* response) override;
  // Raw: v1::AppendRowsRequest messages in, a v1::DatasetInfo out.
  grpc::ServerReadReactor<grpc::ByteBuffer>* AppendRows(
      grpc::CallbackServerContext* context,
      grpc::ByteBuffer* response) override;
  grpc::ServerUnaryReactor* StartTraining(
      grpc::CallbackServerContext* context,
      const v1::StartTrainingRequest* request,
      v1::StartTrainingResponse* response) override;
  grpc::ServerUnaryReactor* GetJob(grpc::CallbackServerContext* context,
                                   const v1::GetJobRequest* request,
                                   v1::Job* response) override;
  grpc::ServerUnaryReactor* CancelJob(grpc::CallbackServerContext* context,
                                      const v1::CancelJobRequest* request,
                                      v1::Job* response) override;
  grpc::ServerUnaryReactor* ListJobs(grpc::CallbackServerContext* context,
                                     const v1::ListJobsRequest* request,
                                     v1::ListJobsResponse* response) override;
  // Defined with its reactor in job_streams.cc.
  grpc::ServerWriteReactor<v1::JobEvent>* WatchJob(
      grpc::CallbackServerContext* context,
      const v1::WatchJobRequest* request) override;
  grpc::ServerUnaryReactor* Predict(grpc::CallbackServerContext* context,
                                    const v1::PredictRequest* request,
                                    v1::PredictResponse* response) override;
  grpc::ServerUnaryReactor* Acquire(grpc::CallbackServerContext* context,
                                    const v1::AcquireRequest* request,
                                    v1::AcquireResponse* response) override;
  grpc::ServerUnaryReactor* Evaluate(grpc::CallbackServerContext* context,
                                     const v1::EvaluateRequest* request,
                                     v1::EvaluateResponse* response) override;
  grpc::ServerUnaryReactor* ListSnapshots(
      grpc::CallbackServerContext* context,
      const v1::ListSnapshotsRequest* request,
      v1::ListSnapshotsResponse* response) override;
  grpc::ServerUnaryReactor* GetSnapshot(grpc::CallbackServerContext* context,
                                        const v1::GetSnapshotRequest* request,
                                        v1::SnapshotInfo* response) override;
  grpc::ServerUnaryReactor* DeleteSnapshot(
      grpc::CallbackServerContext* context,
      const v1::DeleteSnapshotRequest* request,
      v1::DeleteSnapshotResponse* response) override;
  grpc::ServerWriteReactor<v1::SnapshotChunk>* ExportSnapshot(
      grpc::CallbackServerContext* context,
      const v1::ExportSnapshotRequest* request) override;
  // Raw: v1::SnapshotChunk messages in, a v1::SnapshotInfo out.
  grpc::ServerReadReactor<grpc::ByteBuffer>* ImportSnapshot(
      grpc::CallbackServerContext* context,
      grpc::ByteBuffer* response) override;
  grpc::ServerUnaryReactor* PublishModel(grpc::CallbackServerContext* context,
                                         const v1::PublishModelRequest* request,
                                         v1::ModelVersion* response) override;
  grpc::ServerUnaryReactor* ListModels(
      grpc::CallbackServerContext* context,
      const v1::ListModelsRequest* request,
      v1::ListModelsResponse* response) override;
  grpc::ServerUnaryReactor* GetModel(grpc::CallbackServerContext* context,
                                     const v1::GetModelRequest* request,
                                     v1::ModelInfo* response) override;
  grpc::ServerUnaryReactor* SetAlias(grpc::CallbackServerContext* context,
                                     const v1::SetAliasRequest* request,
                                     v1::ModelInfo* response) override;
  grpc::ServerUnaryReactor* DeleteAlias(grpc::CallbackServerContext* context,
                                        const v1::DeleteAliasRequest* request,
                                        v1::ModelInfo* response) override;
  grpc::ServerUnaryReactor* DeleteModel(
      grpc::CallbackServerContext* context,
      const v1::DeleteModelRequest* request,
      v1::DeleteModelResponse* response) override;
  grpc::ServerUnaryReactor* DeleteDataset(
      grpc::CallbackServerContext* context,
      const v1::DeleteDatasetRequest* request,
      v1::DeleteDatasetResponse* response) override;
  grpc::ServerUnaryReactor* ListMethods(
      grpc::CallbackServerContext* context,
      const v1::ListMethodsRequest* request,
      v1::ListMethodsResponse* response) override;

  // What a Predict, Acquire or ExportSnapshot request names: its
  // snapshot_id, or the snapshot its model reference resolves to now. It is
  // resolved once, so the request keeps its snapshot whatever alias moves
  // happen while it computes.
  struct Target {
    std::string snapshot_id;
    // Empty and 0 without a model reference.
    std::string model_name;
    int64_t model_version = 0;
  };

  // A call of another protocol the server speaks (the Open Inference
  // Protocol, server/api/inference_v2) that predicts as Predict does.
  struct ForeignCall {
    // The RPC, for the metrics and messages ("ModelInfer").
    std::string rpc;
    // The client whose turn on the compute workers the call takes: its
    // token's name, or its peer address without tokens (as for Predict).
    std::string client;
    // The client's deadline; the call stops with DeadlineExceeded past it.
    absl::Time deadline = absl::InfiniteFuture();
    // Whether the client (or the server's shutdown) cancelled the call;
    // checked between chunks of rows. Null: never.
    std::function<bool()> cancelled;
  };
  // Predicts `request`'s rows with the snapshot of `target` exactly as
  // Predict does (the same validation, compute queue and fair turns,
  // interrupts, --max-request-seconds, memory admission, predictor and
  // metrics, labelled call.rpc): `request` carries rows, num_samples and
  // seed, its target fields are ignored. Returns at once; `done` runs on a
  // compute worker with the status (data directory hidden, not yet
  // converted) once `response` is filled or the call failed. `request` and
  // `response` must stay valid until then. The caller has authorised the
  // call.
  void PredictFor(ForeignCall call, Target target,
                  const v1::PredictRequest* request,
                  v1::PredictResponse* response,
                  absl::AnyInvocable<void(absl::Status) &&> done);

  // Zero while a compute worker is free; otherwise for how long every one
  // has been busy (ThreadPool::AllBusyFor), for the health watchdog.
  absl::Duration ComputeBusyFor() const { return compute_pool_.AllBusyFor(); }
  // Predict and Acquire calls waiting for their first turn on a compute
  // worker, for the metrics.
  int64_t ComputeQueued() const { return compute_pool_.queued(); }

 private:
  // Client-streaming reactors share the read loop of StreamReader
  // (stream_reader.h).
  template <typename Request, typename Response>
  class StreamReader;
  class UploadReactor;
  class AppendReactor;
  class ImportReactor;
  class ExportReactor;
  class WatchReactor;

  absl::Status DoGetDataset(const v1::GetDatasetRequest& request,
                            v1::DatasetInfo* response);
  absl::Status DoListDatasets(v1::ListDatasetsResponse* response);
  absl::Status DoStartTraining(const v1::StartTrainingRequest& request,
                               v1::StartTrainingResponse* response);
  absl::Status DoGetJob(const v1::GetJobRequest& request, v1::Job* response);
  absl::Status DoCancelJob(const v1::CancelJobRequest& request,
                           v1::Job* response);
  absl::Status DoListJobs(const v1::ListJobsRequest& request,
                          v1::ListJobsResponse* response);
  absl::Status DoPredict(const v1::PredictRequest& request,
                         const Interrupt& interrupt,
                         v1::PredictResponse* response);
  // DoPredict's work once the target is resolved; `rpc` labels the metrics.
  absl::Status PredictOn(const Target& target,
                         const v1::PredictRequest& request,
                         const Interrupt& interrupt, absl::string_view rpc,
                         v1::PredictResponse* response);
  absl::Status DoAcquire(const v1::AcquireRequest& request,
                         const Interrupt& interrupt,
                         v1::AcquireResponse* response);
  absl::Status DoEvaluate(const v1::EvaluateRequest& request,
                          const Interrupt& interrupt,
                          v1::EvaluateResponse* response);
  // A stored dataset an Evaluate request names at `field` (and its version
  // at `version_field`): its metadata, checked to have the snapshot's
  // `num_features` and at most --max-predict-rows rows.
  absl::StatusOr<store::DatasetMeta> EvaluationDataset(
      absl::string_view field, absl::string_view dataset_id,
      absl::string_view version_field, bool has_version, int64_t version,
      int64_t num_features) const;
  absl::Status DoListSnapshots(const v1::ListSnapshotsRequest& request,
                               v1::ListSnapshotsResponse* response);
  absl::Status DoGetSnapshot(const v1::GetSnapshotRequest& request,
                             v1::SnapshotInfo* response);
  absl::Status DoDeleteSnapshot(const v1::DeleteSnapshotRequest& request);
  absl::Status DoPublishModel(const v1::PublishModelRequest& request,
                              v1::ModelVersion* response);
  absl::Status DoListModels(const v1::ListModelsRequest& request,
                            v1::ListModelsResponse* response);
  absl::Status DoDeleteDataset(const v1::DeleteDatasetRequest& request,
                               v1::DeleteDatasetResponse* response);
  absl::Status DoListMethods(v1::ListMethodsResponse* response);

  absl::StatusOr<Target> ResolveTarget(bool by_model,
                                       absl::string_view snapshot_id,
                                       absl::string_view model) const;
  template <typename Request>
  absl::StatusOr<Target> ResolveTarget(const Request& request) const {
    return ResolveTarget(request.target_case() == Request::kModel,
                         request.snapshot_id(), request.model());
  }

  // The pool of an Acquire request: a stored dataset version read in place,
  // or the request's rows copied into `rows`, which must outlive the pool.
  absl::StatusOr<std::unique_ptr<PoolSource>> OpenPool(
      const v1::AcquireRequest& request, int64_t num_features,
      std::vector<double>* rows) const;
  // Adds the predictors' new sample-cache lookups to the counters.
  void PublishCacheCounts();

  // The caller's name (its token's; "" without a token file) if the call's
  // credentials grant the scope `rpc` needs (method_scopes.h);
  // Unauthenticated or PermissionDenied otherwise. Every handler calls it
  // first (through Run, FinishOnPool, StreamReader::Start or the export
  // reactor), before it reads a message or looks anything up.
  absl::StatusOr<std::string> Authorize(grpc::CallbackServerContext* context,
                                        absl::string_view rpc) const;

  // Takes one of the options_.max_watchers_per_client WatchJob slots of
  // the call's client (ClientKey of `caller`) and returns the key to
  // release it with; ResourceExhausted naming the flag when none is free.
  absl::StatusOr<std::string> AdmitWatcher(
      const grpc::CallbackServerContext& context, absl::string_view caller);
  void ReleaseWatcher(const std::string& key);

  // Metrics and, on failure, a log line (SafeText) for one finished RPC;
  // returns the status to send the client (HideDataDir).
  absl::Status RecordOutcome(grpc::CallbackServerContext* context,
                             absl::string_view rpc, absl::Time start,
                             const absl::Status& status);
  // Finishes a unary RPC with `status` and returns its reactor.
  grpc::ServerUnaryReactor* Finish(grpc::CallbackServerContext* context,
                                   absl::string_view rpc, absl::Time start,
                                   const absl::Status& status);
  // Authorizes a unary RPC, runs `work` on the calling thread unless denied,
  // and finishes the RPC with the status.
  grpc::ServerUnaryReactor* Run(grpc::CallbackServerContext* context,
                                absl::string_view rpc,
                                absl::FunctionRef<absl::Status()> work);
  // Authorizes a unary RPC (finishing it at once if denied), returns its
  // reactor and runs `work` on `pool`, in the turn of the call's client
  // (ClientKey), whose thread finishes the RPC with the status `work`
  // returns. A call cancelled (or past its deadline) while it waited is not
  // worked on. `work` gets an Interrupt that stops it with DeadlineExceeded
  // once the client's deadline or `time_limit` of computation passes, and
  // with Cancelled once the client cancels (or the server's shutdown grace
  // ends); between its checks the call may give its turn to another
  // client's (ThreadPool::Yield), time not counted against `time_limit`.
  grpc::ServerUnaryReactor* FinishOnPool(
      ThreadPool* pool, grpc::CallbackServerContext* context,
      absl::string_view rpc, absl::Duration time_limit,
      absl::AnyInvocable<absl::Status(const Interrupt&) &&> work);

  const Options options_;
  DatasetStore* const datasets_;
  SnapshotStore* const snapshots_;
  PredictorCache* const predictors_;
  JobRunner* const jobs_;
  const MethodRegistry* const registry_;
  ServerMetrics* const metrics_;
  MemoryBudget* const memory_budget_;
  const Authenticator* const auth_;
  ModelStore* const models_;
  // The open client streams: their number and idle time.
  StreamWatch streams_;
  // Disk work: the messages of uploads, appends and imports (parsing,
  // validation, writes to temporary files) and their ends (hashing,
  // decoding, commits), export reads and deletions.
  ThreadPool io_pool_;
  // Predict and Acquire, options_.compute_workers at a time, fair across
  // clients, time-sliced between chunks of rows (kComputeSlice).
  ThreadPool compute_pool_;
  // How fast Predict and Acquire computed lately, to refuse at once a call
  // that cannot finish before its deadline (server/admission/compute_rate.h).
  ComputeRate compute_rate_;
  // Open WatchJob streams per client.
  absl::Mutex watchers_mu_;
  std::map<std::string, int> watchers_ ABSL_GUARDED_BY(watchers_mu_);
};

}  // namespace bnn::server

#endif  // BNN_SERVER_API_BNN_V1_BNN_SERVICE_H_
