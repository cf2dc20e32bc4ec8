// The Open Inference Protocol's operations, whatever carries them: the gRPC
// service (inference_service.h) and the REST endpoints (http_api.h) both
// authenticate, check and answer through this class, so the two forms
// cannot differ. ModelInfer predicts through BnnServiceImpl::PredictFor,
// the path of bnn.v1 Predict (compute queue, memory admission, predictor):
// with the same snapshot, rows, samples and seed both give the same bits.
//
// Models are the named models of the model store: a model name and a
// version, which is a version number, an alias, or empty for `latest`.
#ifndef BNN_SERVER_API_INFERENCE_V2_INFERENCE_API_H_
#define BNN_SERVER_API_INFERENCE_V2_INFERENCE_API_H_

#include <atomic>
#include <functional>
#include <string>

#include <absl/functional/any_invocable.h>
#include <absl/status/status.h>
#include <absl/status/statusor.h>
#include <absl/strings/string_view.h>
#include <absl/synchronization/mutex.h>
#include <absl/time/time.h>
#include <absl/types/span.h>
#include <grpcpp/server_context.h>

#include "inference/grpc_predict_v2.pb.h"
#include "server/api/bnn_v1/bnn_service.h"
#include "server/api/bnn_v1/request_validation.h"
#include "server/auth/authenticator.h"
#include "server/metrics/server_metrics.h"
#include "server/store/model_store.h"
#include "server/store/snapshot_store.h"

namespace bnn::server::oip {

// What ServerMetadata answers.
inline constexpr absl::string_view kServerName = "bnn-serve";

class InferenceApi {
 public:
  struct Options {
    // The server's request limits (--max-predict-rows,
    // --max-predict-samples, ...).
    ServerLimits limits;
    // The server's --data-dir, written "<data-dir>" in what clients see.
    std::string data_dir;
    // The server's --blob-dir (empty: inside the data directory), written
    // "<blob-dir>" alike.
    std::string blob_dir;
  };

  // Every pointer is borrowed and must outlive the API. `ready` says
  // whether the server is ready (Server::serving()).
  InferenceApi(const Options& options, const Authenticator* auth,
               const ModelStore* models, const SnapshotStore* snapshots,
               BnnServiceImpl* predict, ServerMetrics* metrics,
               std::function<bool()> ready);

  // The caller's name ("" without a token file, or for an RPC that needs no
  // scope) if `rpc` (a method of the service) may be called with the
  // credentials given: the call's metadata, or the values of its HTTP
  // Authorization headers. Unauthenticated or PermissionDenied otherwise.
  absl::StatusOr<std::string> Authorize(const grpc::ServerContextBase& context,
                                        absl::string_view rpc) const;
  absl::StatusOr<std::string> Authorize(
      absl::Span<const absl::string_view> authorization,
      absl::string_view rpc) const;

  // ServerReady: the server serves (health SERVING) and is not draining.
  bool Ready() const;
  void ServerMetadata(inference::ServerMetadataResponse* response) const;
  // Whether the model `name` at `version` is ready: the server is Ready()
  // and the snapshot the version points at can be served (its record reads
  // and its file exists). InvalidArgument for a name or version of another
  // form, NotFound for an unknown model, alias or version (not "not
  // ready": it does not exist).
  absl::StatusOr<bool> ModelReady(const std::string& name,
                                  const std::string& version) const;
  // Its versions (numbers, ascending), platform ("bnn-serve_METHOD") and
  // tensors; errors as ModelReady's, and the snapshot's if it is unreadable.
  absl::Status ModelMetadata(const std::string& name,
                             const std::string& version,
                             inference::ModelMetadataResponse* response) const;
  // Resolves the model, checks `request` (PlanInfer) and predicts through
  // BnnServiceImpl::PredictFor in `call`'s turn; `done` runs on a compute
  // worker, or at once on the calling thread if the request fails its
  // checks, with the status once `response` is filled. `request` and
  // `response` must stay valid until then.
  void ModelInfer(BnnServiceImpl::ForeignCall call,
                  const inference::ModelInferRequest* request,
                  inference::ModelInferResponse* response,
                  absl::AnyInvocable<void(absl::Status) &&> done);

  // Metrics (bnn_rpc_requests_total and latency, labelled `rpc`) and, on
  // failure, a warning or error line naming `rpc` and `peer`; returns the
  // status to send the client (data directory hidden).
  absl::Status RecordOutcome(absl::string_view rpc, absl::string_view peer,
                             absl::Time start, const absl::Status& status);

  // From now on Ready() is false, and calls given cancelled = Cancelled()
  // stop once `cancel_deadline` passes (the REST calls, which gRPC's
  // shutdown does not reach). Server::Shutdown calls it first.
  void BeginShutdown(absl::Time cancel_deadline);
  bool draining() const { return draining_.load(); }
  // Whether calls should stop now: after BeginShutdown, once its deadline
  // passed.
  bool Cancelled() const;

 private:
  // The snapshot a (name, version) pair points at now.
  absl::StatusOr<ResolvedModel> Resolve(const std::string& name,
                                        const std::string& version) const;

  const Options options_;
  const Authenticator* const auth_;
  const ModelStore* const models_;
  const SnapshotStore* const snapshots_;
  BnnServiceImpl* const predict_;
  ServerMetrics* const metrics_;
  const std::function<bool()> ready_;
  std::atomic<bool> draining_{false};
  mutable absl::Mutex mu_;
  absl::Time cancel_deadline_ ABSL_GUARDED_BY(mu_) = absl::InfiniteFuture();
};

}  // namespace bnn::server::oip

#endif  // BNN_SERVER_API_INFERENCE_V2_INFERENCE_API_H_
