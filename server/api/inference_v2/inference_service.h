// inference.GRPCInferenceService, the Open Inference Protocol over gRPC:
// thin handlers that authorise the call (method_scopes.h), answer through
// InferenceApi, convert the status once (ToGrpcStatus) and record metrics
// (labelled with the method's name). ModelInfer computes on the compute
// workers of bnn.v1 Predict and finishes there; the others answer on the
// calling thread (they read in-memory records only).
#ifndef BNN_SERVER_API_INFERENCE_V2_INFERENCE_SERVICE_H_
#define BNN_SERVER_API_INFERENCE_V2_INFERENCE_SERVICE_H_

#include <absl/functional/function_ref.h>
#include <absl/status/status.h>
#include <absl/strings/string_view.h>
#include <grpcpp/grpcpp.h>

#include "inference/grpc_predict_v2.grpc.pb.h"
#include "server/api/inference_v2/inference_api.h"

namespace bnn::server::oip {

class InferenceServiceImpl final
    : public inference::GRPCInferenceService::CallbackService {
 public:
  // `api` is borrowed and must outlive the service, which must outlive the
  // grpc::Server it is registered with.
  explicit InferenceServiceImpl(InferenceApi* api) : api_(api) {}

  grpc::ServerUnaryReactor* ServerLive(
      grpc::CallbackServerContext* context,
      const inference::ServerLiveRequest* request,
      inference::ServerLiveResponse* response) override;
  grpc::ServerUnaryReactor* ServerReady(
      grpc::CallbackServerContext* context,
      const inference::ServerReadyRequest* request,
      inference::ServerReadyResponse* response) override;
  // NOT_FOUND for an unknown model, alias or version; ready = false for
  // one that exists but cannot serve (InferenceApi::ModelReady).
  grpc::ServerUnaryReactor* ModelReady(
      grpc::CallbackServerContext* context,
      const inference::ModelReadyRequest* request,
      inference::ModelReadyResponse* response) override;
  grpc::ServerUnaryReactor* ServerMetadata(
      grpc::CallbackServerContext* context,
      const inference::ServerMetadataRequest* request,
      inference::ServerMetadataResponse* response) override;
  grpc::ServerUnaryReactor* ModelMetadata(
      grpc::CallbackServerContext* context,
      const inference::ModelMetadataRequest* request,
      inference::ModelMetadataResponse* response) override;
  grpc::ServerUnaryReactor* ModelInfer(
      grpc::CallbackServerContext* context,
      const inference::ModelInferRequest* request,
      inference::ModelInferResponse* response) override;

 private:
  // Authorises `rpc`, runs `work` unless denied, and finishes the call.
  grpc::ServerUnaryReactor* Run(grpc::CallbackServerContext* context,
                                absl::string_view rpc,
                                absl::FunctionRef<absl::Status()> work);

  InferenceApi* const api_;
};

}  // namespace bnn::server::oip

#endif  // BNN_SERVER_API_INFERENCE_V2_INFERENCE_SERVICE_H_
