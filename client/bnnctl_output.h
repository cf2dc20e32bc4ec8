// bnnctl's two output forms for every response: JSON for scripts (--json)
// and aligned text for people. The JSON field names are part of bnnctl's
// interface (docs/api.md); enum values are lower-case without their prefix
// ("regression", "succeeded"). JSON objects keep their fields in the order
// written here (nlohmann::ordered_json).
#ifndef BNN_CLIENT_BNNCTL_OUTPUT_H_
#define BNN_CLIENT_BNNCTL_OUTPUT_H_

#include <map>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "bnn/v1/bnn_service.pb.h"

#include "client/csv_input.h"

namespace bnn::client {

// "regression", "classification", "unspecified".
std::string TaskName(v1::Task task);
// "queued", "running", "succeeded", "failed", "cancelled", "interrupted",
// "cancelling", "unspecified".
std::string JobStateName(v1::JobState state);

using Json = nlohmann::ordered_json;

// One line of JSON text for `value`. Doubles are written in a form that
// parses back to the same value, non-finite ones as null (JSON has no NaN);
// 64-bit integers in full; invalid UTF-8 in strings is replaced by U+FFFD,
// so the output is always valid JSON.
std::string JsonText(const Json& value);

Json DatasetJson(const v1::DatasetInfo& dataset);
Json JobJson(const v1::Job& job);
// {"kind" ("current", "progress", "state"), "state", "epoch", "step",
// "total_steps", "loss", "steps_per_second", "eta_seconds", "unix_ms",
// "error", "snapshot_id"}.
Json JobEventJson(const v1::JobEvent& event);
Json MethodJson(const v1::MethodInfo& method);
Json SnapshotJson(const v1::SnapshotInfo& snapshot);
// The predictions with their inputs: {"snapshot_id", "num_samples", "seed",
// "linearized", "task", "feature_names", "class_values", "quantile_levels",
// "predictions": [{"x": [...], ...}]}. Regression rows carry mean, std,
// variance, epistemic_variance, aleatoric_variance and quantiles (one per
// level); classification rows probabilities, predicted_class, entropy,
// expected_entropy, mutual_information and variation_ratio. With
// request.per_sample() every row also has sample_outputs. `request` is what
// was asked (its rows are not read: `inputs` holds them with their names).
Json PredictionsJson(const FeatureTable& inputs,
                     const v1::PredictRequest& request,
                     const v1::PredictResponse& response);
// {"snapshot_id", "heuristic", "pool_rows", "seed", "acquired": [{"index",
// "score"}]}; when the pool came from a CSV file (`pool` non-null) every
// acquired row also has its features "x".
Json AcquisitionJson(const v1::AcquireRequest& request,
                     const v1::AcquireResponse& response,
                     const FeatureTable* pool);
// PredictionsJson and AcquisitionJson add "model_name" and "model_version"
// after "snapshot_id" when the request named a model reference.
// {"snapshot_id", ["model_name", "model_version",] "task", "num_rows",
// "num_samples", "seed", then the scores the response has: "rmse",
// "log_likelihood", "nll", "accuracy", "brier", "ece", "reliability":
// [{"lower", "upper", "count", "mean_confidence", "accuracy"}],
// "auroc_entropy", "auroc_mutual_information", "ood_rows"}.
Json EvaluationJson(const v1::EvaluateResponse& response);
// {"model_name", "version", "snapshot_id", "created_unix_ms", "aliases": []}.
Json ModelVersionJson(const v1::ModelVersion& version);
// {"name", "num_versions", "latest_version", "aliases": {alias: version},
// "created_unix_ms", "updated_unix_ms", "versions": [version, ...]}
// ("versions" empty in lists).
Json ModelJson(const v1::ModelInfo& model);

std::string FormatDataset(const v1::DatasetInfo& dataset);
std::string FormatDatasetList(const std::vector<v1::DatasetInfo>& datasets);
std::string FormatJob(const v1::Job& job);
// `ID STATE METHOD DATASET MODEL PROGRESS LOSS CREATED`, one job per line.
std::string FormatJobList(const std::vector<v1::Job>& jobs);
// Seconds as "M:SS" or "H:MM:SS"; "?" when unknown (negative, huge, NaN).
std::string FormatDuration(double seconds);
// One watch event as a line of text (no newline), for pipes and logs:
// "running step 1200/12000 (10.0%) epoch 400 loss 0.123 450.0 steps/s eta
// 0:24".
std::string FormatJobEventLine(const v1::JobEvent& event);
// The progress bar a terminal redraws in place (no newline): "[####....]
// 10.0%  step 1200/12000  loss 0.123  450.0 steps/s  ETA 0:24  running",
// the bar `width` characters wide.
std::string FormatProgressBar(const v1::JobEvent& event, int width = 30);
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
std::string FormatModel(const v1::ModelInfo& model);
std::string FormatModelList(const std::vector<v1::ModelInfo>& models);
std::string FormatModelVersion(const v1::ModelVersion& version);
// `rank index score` (and the features of a CSV pool), then the pool size
// and seed.
std::string FormatAcquisition(const v1::AcquireResponse& response,
                              const FeatureTable* pool);

// The scores of an evaluation, one `name value` line each (those of the
// snapshot's task), then for a classifier the reliability diagram's bins
// as a table `bin count confidence accuracy`.
std::string FormatEvaluation(const v1::EvaluateResponse& response);

// True if the response holds class probabilities rather than regression
// moments.
bool IsClassification(const v1::PredictResponse& response);

// The method parameters of `train --parent`: a warm start keeps the parent
// snapshot's parameters (GetSnapshot's `params`) unless --param overrides
// them, instead of resetting them to the method's defaults.
struct InheritedParams {
  // What StartTraining is sent: the parent's parameters, then `given` over
  // them. Only `given` when the parent was trained with another method (its
  // parameters need not be that method's).
  std::map<std::string, std::string> params;
  // The parent's parameters sent unchanged, by name.
  std::vector<std::string> kept;
  // One entry per --param that differs from the parent: "NAME OLD -> NEW",
  // or "NAME NEW (new)" for a parameter the parent does not record.
  std::vector<std::string> changed;
  // Whether the parent was trained with the requested method.
  bool same_method = true;
};
InheritedParams InheritParentParams(
    const v1::SnapshotInfo& parent, const std::string& method,
    const std::map<std::string, std::string>& given);
// The line bnnctl prints (on stderr) about `inherited`, e.g. "parameters
// from parent snap-...: kept beta=0.05, rank=2; changed learning_rate 0.05
// -> 0.1".
std::string FormatInheritedParams(const v1::SnapshotInfo& parent,
                                  const std::string& method,
                                  const InheritedParams& inherited);

}  // namespace bnn::client

#endif  // BNN_CLIENT_BNNCTL_OUTPUT_H_
