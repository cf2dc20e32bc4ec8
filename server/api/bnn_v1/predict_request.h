// Predict and Acquire requests to core options, and core results to
// responses. The checks here need the snapshot or the pool, so they run once
// those are looked up; the core validates the rest (quantile levels, the
// options a task supports, heuristic/task compatibility) with messages that
// already name the request's fields.
#ifndef BNN_SERVER_API_BNN_V1_PREDICT_REQUEST_H_
#define BNN_SERVER_API_BNN_V1_PREDICT_REQUEST_H_

#include <cstdint>
#include <vector>

#include <absl/status/statusor.h>

#include "bnn/io/snapshot.h"
#include "bnn/predict/acquisition.h"
#include "bnn/predict/predictor.h"
#include "bnn/v1/bnn_service.pb.h"

#include "server/api/bnn_v1/request_validation.h"

namespace bnn::server {

// The rows of a request as one row-major matrix, as the core takes them.
// The rows must have been validated (ValidateFeatureRows).
std::vector<double> FeatureMatrix(
    const google::protobuf::RepeatedPtrField<v1::Features>& rows,
    int64_t num_features);

// Validates `request` (its rows, sample count and response size) against
// `snapshot` and the limits and returns the options for Predictor::Predict.
// Without a seed the options carry a random one.
absl::StatusOr<PredictOptions> BuildPredictOptions(
    const v1::PredictRequest& request, const Snapshot& snapshot,
    const ServerLimits& limits);

// Fills every field of `response` from `prediction`, made with `options`
// for the snapshot `snapshot_id`.
void ToPredictResponse(const Prediction& prediction,
                       const PredictOptions& options,
                       absl::string_view snapshot_id, const Snapshot& snapshot,
                       v1::PredictResponse* response);

// Validates `request` against a pool of `pool_rows` rows and returns the
// options for bnn::Acquire. Without a seed the options carry a random one.
absl::StatusOr<AcquireOptions> BuildAcquireOptions(
    const v1::AcquireRequest& request, int64_t pool_rows,
    const ServerLimits& limits);

}  // namespace bnn::server

#endif  // BNN_SERVER_API_BNN_V1_PREDICT_REQUEST_H_
