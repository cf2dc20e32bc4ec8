// The REST (JSON) form of the Open Inference Protocol's messages, as the
// specification's HTTP/REST section defines them, to and from the gRPC
// messages, so that both forms share one set of checks (infer_request.h).
// Tensor data may be nested arrays (the tensor's natural form) or flat;
// either way it is flattened in row-major order.
#ifndef BNN_SERVER_API_INFERENCE_V2_JSON_CODEC_H_
#define BNN_SERVER_API_INFERENCE_V2_JSON_CODEC_H_

#include <string>

#include <absl/status/statusor.h>
#include <absl/strings/string_view.h>

#include "inference/grpc_predict_v2.pb.h"

namespace bnn::server::oip {

// $inference_request -> ModelInferRequest (without model name and version,
// which the URL gives). InvalidArgument naming the JSON field for a body
// that is not JSON, a field of the wrong type or an unknown field; FP32 and
// FP64 data go to fp32_contents and fp64_contents, data of any other
// datatype is left out (the datatype is refused by PlanInfer).
absl::StatusOr<inference::ModelInferRequest> ParseInferRequest(
    absl::string_view body);

// $inference_response; FP64 contents (or raw FP64 output contents) as
// numbers, printed to round-trip exactly.
std::string InferResponseJson(const inference::ModelInferResponse& response);
// $metadata_server_response and $metadata_model_response.
std::string ServerMetadataJson(
    const inference::ServerMetadataResponse& response);
std::string ModelMetadataJson(const inference::ModelMetadataResponse& response);
// {"error": message}.
std::string ErrorJson(absl::string_view message);

}  // namespace bnn::server::oip

#endif  // BNN_SERVER_API_INFERENCE_V2_JSON_CODEC_H_
