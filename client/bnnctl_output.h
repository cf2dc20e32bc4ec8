// bnnctl's two output forms for every response: JSON for scripts (--json)
// and aligned text for people. The JSON field names are part of bnnctl's
// interface (docs/api.md); enum values are lower-case without their prefix
// ("regression", "succeeded").
#ifndef BNN_CLIENT_BNNCTL_OUTPUT_H_
#define BNN_CLIENT_BNNCTL_OUTPUT_H_

#include <string>
#include <vector>

#include "bnn/v1/bnn_service.pb.h"

#include "client/csv_input.h"
#include "client/json_writer.h"

namespace bnn::client {

// "regression", "classification", "unspecified".
std::string TaskName(v1::Task task);
// "queued", "running", "succeeded", "failed", "cancelled", "unspecified".
std::string JobStateName(v1::JobState state);

void WriteDatasetJson(const v1::DatasetInfo& dataset, JsonWriter* json);
void WriteJobJson(const v1::Job& job, JsonWriter* json);
void WriteMethodJson(const v1::MethodInfo& method, JsonWriter* json);
void WriteSnapshotJson(const v1::SnapshotInfo& snapshot, JsonWriter* json);
// The predictions with their inputs: {"snapshot_id", "num_samples", "seed",
// "linearized", "task", "feature_names", "class_values", "quantile_levels",
// "predictions": [{"x": [...], ...}]}. Regression rows carry mean, std,
// variance, epistemic_variance, aleatoric_variance and quantiles (one per
// level); classification rows probabilities, predicted_class, entropy,
// expected_entropy, mutual_information and variation_ratio. With
// request.per_sample() every row also has sample_outputs. `request` is what
// was asked (its rows are not read: `inputs` holds them with their names).
void WritePredictionsJson(const FeatureTable& inputs,
                          const v1::PredictRequest& request,
                          const v1::PredictResponse& response,
                          JsonWriter* json);
// {"snapshot_id", "heuristic", "pool_rows", "seed", "acquired": [{"index",
// "score"}]}; when the pool came from a CSV file (`pool` non-null) every
// acquired row also has its features "x".
void WriteAcquisitionJson(const v1::AcquireRequest& request,
                          const v1::AcquireResponse& response,
                          const FeatureTable* pool, JsonWriter* json);

std::string FormatDataset(const v1::DatasetInfo& dataset);
std::string FormatDatasetList(const std::vector<v1::DatasetInfo>& datasets);
std::string FormatJob(const v1::Job& job);
std::string FormatMethods(const std::vector<v1::MethodInfo>& methods);
std::string FormatSnapshot(const v1::SnapshotInfo& snapshot);
std::string FormatSnapshotList(const std::vector<v1::SnapshotInfo>& snapshots);
// A table with one column per feature, then `mean std` and one column per
// requested quantile (regression) or one probability column per class, the
// predicted class, the entropy and the mutual information
// (classification). With request.per_sample() a second table follows, one
// line per (row, sample).
std::string FormatPredictions(const FeatureTable& inputs,
                              const v1::PredictRequest& request,
                              const v1::PredictResponse& response);
// `rank index score` (and the features of a CSV pool), then the pool size
// and seed.
std::string FormatAcquisition(const v1::AcquireResponse& response,
                              const FeatureTable* pool);

// True if the response holds class probabilities rather than regression
// moments.
bool IsClassification(const v1::PredictResponse& response);

}  // namespace bnn::client

#endif  // BNN_CLIENT_BNNCTL_OUTPUT_H_
