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
// The predictions with their inputs: {"snapshot_id", "num_samples", "seed",
// "feature_names", "class_values", "predictions": [{"x": [...], ...}]}.
// Regression rows carry mean, std, variance, epistemic_variance and
// aleatoric_variance; classification rows probabilities, predicted_class and
// entropy.
void WritePredictionsJson(const FeatureTable& inputs,
                          const v1::PredictResponse& response,
                          JsonWriter* json);

std::string FormatDataset(const v1::DatasetInfo& dataset);
std::string FormatDatasetList(const std::vector<v1::DatasetInfo>& datasets);
std::string FormatJob(const v1::Job& job);
std::string FormatMethods(const std::vector<v1::MethodInfo>& methods);
// A table with one column per feature, then `mean std` (regression) or one
// probability column per class and the predicted class (classification).
std::string FormatPredictions(const FeatureTable& inputs,
                              const v1::PredictResponse& response);

// True if the response holds class probabilities rather than regression
// moments.
bool IsClassification(const v1::PredictResponse& response);

}  // namespace bnn::client

#endif  // BNN_CLIENT_BNNCTL_OUTPUT_H_
