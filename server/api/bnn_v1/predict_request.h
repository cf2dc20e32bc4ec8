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
#include "bnn/predict/scores.h"
#include "bnn/v1/bnn_service.pb.h"

#include "server/api/bnn_v1/request_validation.h"
#include "store/store.pb.h"

namespace bnn::server {

// The rows of a Predict request, per row (`rows`) or packed (`features`),
// validated against `snapshot` and the limits and converted into the
// core's row-major matrix (FeatureRows: one path for both forms).
absl::StatusOr<RowMatrix> PredictRows(const v1::PredictRequest& request,
                                      const Snapshot& snapshot,
                                      const ServerLimits& limits);

// Validates `request` (sample count and the size of a response for
// `num_rows` rows) against `snapshot` and the limits and returns the
// options for Predictor::Predict. Without a seed the options carry a random
// one.
absl::StatusOr<PredictOptions> BuildPredictOptions(
    const v1::PredictRequest& request, int64_t num_rows,
    const Snapshot& snapshot, const ServerLimits& limits);

// Fills every field of `response` from `prediction`, made with `options`
// for the snapshot `snapshot_id`: one RowPrediction per row, or with
// `packed` the arrays of PredictResponse.packed.
void ToPredictResponse(const Prediction& prediction,
                       const PredictOptions& options,
                       absl::string_view snapshot_id, const Snapshot& snapshot,
                       bool packed, v1::PredictResponse* response);

// Validates `request` against a pool of `pool_rows` rows and returns the
// options for bnn::Acquire. Without a seed the options carry a random one.
absl::StatusOr<AcquireOptions> BuildAcquireOptions(
    const v1::AcquireRequest& request, int64_t pool_rows,
    const ServerLimits& limits);

// Validates the options of an Evaluate request (sample count, ece_bins:
// 0 = 15, at most 1000) and returns them for bnn::Evaluate. Without a seed
// the options carry a random one.
absl::StatusOr<EvaluateOptions> BuildEvaluateOptions(
    const v1::EvaluateRequest& request, const ServerLimits& limits);

// The stored dataset `meta` can be scored by `snapshot`: both regression
// or both classification (InvalidArgument naming dataset_id otherwise).
absl::Status CheckEvaluationTask(const store::DatasetMeta& meta,
                                 const Snapshot& snapshot);

// Classification labels of an Evaluate request's rows (raw label values,
// at rows.targets[i] if `packed`, else rows.rows[i].y) replaced by the
// index of their class among the snapshot's `class_values`;
// InvalidArgument naming the row for a label that is not a class.
absl::Status EncodeEvaluationLabels(bool packed,
                                    absl::Span<const double> class_values,
                                    std::vector<double>* labels);

// The scores of `evaluation` (made with `options` on `snapshot`) into
// `response`; the target's ids are the caller's.
void ToEvaluateResponse(const Evaluation& evaluation,
                        const EvaluateOptions& options,
                        const Snapshot& snapshot,
                        v1::EvaluateResponse* response);

}  // namespace bnn::server

#endif  // BNN_SERVER_API_BNN_V1_PREDICT_REQUEST_H_
