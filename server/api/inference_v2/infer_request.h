// Open Inference Protocol requests to bnn.v1 Predict requests, and Predict
// responses back to output tensors: the model's one input INPUT (FP32 or
// FP64, [batch, features]) becomes the packed rows (`features`, one copy of
// the values) of a PredictRequest, whose response becomes the outputs a
// client asked for. Everything here is checked against the model's snapshot
// record (its task, features and classes), before any computation; messages
// name the request's fields.
#ifndef BNN_SERVER_API_INFERENCE_V2_INFER_REQUEST_H_
#define BNN_SERVER_API_INFERENCE_V2_INFER_REQUEST_H_

#include <string>
#include <vector>

#include <absl/status/status.h>
#include <absl/status/statusor.h>
#include <absl/strings/string_view.h>

#include "bnn/v1/bnn_service.pb.h"

#include "inference/grpc_predict_v2.pb.h"
#include "server/api/bnn_v1/request_validation.h"
#include "store/store.pb.h"

namespace bnn::server::oip {

// The name of the models' one input tensor.
inline constexpr absl::string_view kInputName = "INPUT";
// The request parameters ModelInfer understands.
inline constexpr absl::string_view kNumSamplesParameter = "num_samples";
inline constexpr absl::string_view kSeedParameter = "seed";

// The outputs of a model of `task` (bnn::TaskToString), in the order a
// response without `outputs` lists them.
const std::vector<std::string>& OutputNames(absl::string_view task);
// The metadata of the input and the outputs of a model whose snapshot is
// `meta`.
void AddTensorMetadata(const store::SnapshotMeta& meta,
                       inference::ModelMetadataResponse* response);

// A checked ModelInfer request, ready for BnnServiceImpl::PredictFor.
struct InferPlan {
  // The rows (packed in features), num_samples and seed; no target.
  v1::PredictRequest predict;
  // The outputs to return, in order.
  std::vector<std::string> outputs;
  // Whether the inputs came as raw_input_contents: the outputs go back as
  // raw_output_contents then, as clients that send raw bytes read them.
  bool raw = false;
};

// Checks `request` against the model whose snapshot is `meta` and the
// server's limits: one input INPUT of datatype FP32 or FP64 and shape
// [batch, features] (1 <= batch <= --max-predict-rows), its elements in the
// datatype's contents field or in raw_input_contents (little-endian), all
// finite; parameters num_samples (0..--max-predict-samples) and seed
// (>= 0, an integer or a decimal string of a 64-bit unsigned value) and no
// others; requested outputs among OutputNames(task), no repeats.
// InvalidArgument naming the field, ResourceExhausted naming the limit's
// flag.
absl::StatusOr<InferPlan> PlanInfer(const inference::ModelInferRequest& request,
                                    const store::SnapshotMeta& meta,
                                    const ServerLimits& limits);

// The outputs of `plan` from the Predict response `predicted`, with the
// model's name and version, the request's id and the parameters seed,
// num_samples, snapshot_id and (classifiers) class_values. All outputs are
// FP64: scalars per row of shape [batch], probabilities [batch, classes].
void ToInferResponse(const InferPlan& plan,
                     const v1::PredictResponse& predicted,
                     const std::string& model_name, int64_t model_version,
                     const std::string& id,
                     inference::ModelInferResponse* response);

}  // namespace bnn::server::oip

#endif  // BNN_SERVER_API_INFERENCE_V2_INFER_REQUEST_H_
