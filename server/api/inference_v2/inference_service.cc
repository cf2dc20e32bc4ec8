#include "server/api/inference_v2/inference_service.h"

#include <string>
#include <utility>

#include <absl/time/clock.h>

#include "bnn/status.h"

#include "server/auth/authenticator.h"
#include "server/common/status_util.h"

namespace bnn::server::oip {

grpc::ServerUnaryReactor* InferenceServiceImpl::Run(
    grpc::CallbackServerContext* context, absl::string_view rpc,
    absl::FunctionRef<absl::Status()> work) {
  const absl::Time start = absl::Now();
  absl::Status status = api_->Authorize(*context, rpc).status();
  if (status.ok()) status = work();
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  reactor->Finish(
      ToGrpcStatus(api_->RecordOutcome(rpc, context->peer(), start, status)));
  return reactor;
}

grpc::ServerUnaryReactor* InferenceServiceImpl::ServerLive(
    grpc::CallbackServerContext* context,
    const inference::ServerLiveRequest* /*request*/,
    inference::ServerLiveResponse* response) {
  return Run(context, "ServerLive", [&] {
    response->set_live(true);
    return absl::OkStatus();
  });
}

grpc::ServerUnaryReactor* InferenceServiceImpl::ServerReady(
    grpc::CallbackServerContext* context,
    const inference::ServerReadyRequest* /*request*/,
    inference::ServerReadyResponse* response) {
  return Run(context, "ServerReady", [&] {
    response->set_ready(api_->Ready());
    return absl::OkStatus();
  });
}

grpc::ServerUnaryReactor* InferenceServiceImpl::ModelReady(
    grpc::CallbackServerContext* context,
    const inference::ModelReadyRequest* request,
    inference::ModelReadyResponse* response) {
  return Run(context, "ModelReady", [&]() -> absl::Status {
    BNN_ASSIGN_OR_RETURN(const bool ready,
                         api_->ModelReady(request->name(), request->version()));
    response->set_ready(ready);
    return absl::OkStatus();
  });
}

grpc::ServerUnaryReactor* InferenceServiceImpl::ServerMetadata(
    grpc::CallbackServerContext* context,
    const inference::ServerMetadataRequest* /*request*/,
    inference::ServerMetadataResponse* response) {
  return Run(context, "ServerMetadata", [&] {
    api_->ServerMetadata(response);
    return absl::OkStatus();
  });
}

grpc::ServerUnaryReactor* InferenceServiceImpl::ModelMetadata(
    grpc::CallbackServerContext* context,
    const inference::ModelMetadataRequest* request,
    inference::ModelMetadataResponse* response) {
  return Run(context, "ModelMetadata", [&] {
    return api_->ModelMetadata(request->name(), request->version(), response);
  });
}

grpc::ServerUnaryReactor* InferenceServiceImpl::ModelInfer(
    grpc::CallbackServerContext* context,
    const inference::ModelInferRequest* request,
    inference::ModelInferResponse* response) {
  constexpr absl::string_view kRpc = "ModelInfer";
  const absl::Time start = absl::Now();
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  const absl::StatusOr<std::string> caller = api_->Authorize(*context, kRpc);
  if (!caller.ok()) {
    reactor->Finish(ToGrpcStatus(
        api_->RecordOutcome(kRpc, context->peer(), start, caller.status())));
    return reactor;
  }
  BnnServiceImpl::ForeignCall call;
  call.rpc = std::string(kRpc);
  // Fair turns as for Predict: by token, or by connection without tokens.
  call.client = ClientKey(context->peer(), *caller);
  call.deadline = absl::FromChrono(context->deadline());
  call.cancelled = [context] { return context->IsCancelled(); };
  api_->ModelInfer(std::move(call), request, response,
                   [this, context, reactor, start](absl::Status status) {
                     reactor->Finish(ToGrpcStatus(api_->RecordOutcome(
                         kRpc, context->peer(), start, status)));
                   });
  return reactor;
}

}  // namespace bnn::server::oip
