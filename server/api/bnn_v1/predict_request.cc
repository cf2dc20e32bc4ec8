#include "server/api/bnn_v1/predict_request.h"

#include <string>
#include <vector>

#include <absl/random/random.h>
#include <absl/strings/str_cat.h>
#include <absl/strings/str_join.h>

#include "bnn/data/dataset.h"
#include "bnn/status.h"

namespace bnn::server {
namespace {

// The scalar fields of a RowPrediction, for the response size estimate.
constexpr int64_t kScalarsPerRow = 9;

// The request's seed, or a random one (returned in the response, so that
// the call can be repeated exactly).
template <typename Request>
uint64_t SeedOf(const Request& request) {
  if (request.has_seed()) return request.seed();
  absl::BitGen gen;
  return absl::Uniform<uint64_t>(gen);
}

// Outputs per sample: class probabilities, or one regression mean.
int64_t OutputsOf(const Snapshot& snapshot) {
  return IsClassification(snapshot.task)
             ? static_cast<int64_t>(snapshot.class_values.size())
             : 1;
}

// `values` as a float64 tensor of `shape`.
void ToTensor(absl::Span<const double> values, absl::Span<const int64_t> shape,
              v1::Tensor* out) {
  out->mutable_shape()->Add(shape.begin(), shape.end());
  out->mutable_f64()->Add(values.begin(), values.end());
}

}  // namespace

absl::StatusOr<RowMatrix> PredictRows(const v1::PredictRequest& request,
                                      const Snapshot& snapshot,
                                      const ServerLimits& limits) {
  return FeatureRows("rows", request.rows(), "features", request.has_features(),
                     request.features(), snapshot.model.input_dim,
                     PredictRowLimit(limits));
}

absl::StatusOr<PredictOptions> BuildPredictOptions(
    const v1::PredictRequest& request, int64_t num_rows,
    const Snapshot& snapshot, const ServerLimits& limits) {
  BNN_ASSIGN_OR_RETURN(const int num_samples,
                       ResolveNumSamples(request.num_samples(), limits));
  PredictOptions options;
  options.num_samples = num_samples;
  options.seed = SeedOf(request);
  // A seed the server drew is never asked for again: keep its samples out
  // of the cache, where they would only evict reusable draws.
  options.cache_samples = request.has_seed();
  options.linearized = request.linearized();
  options.quantiles.assign(request.quantiles().begin(),
                           request.quantiles().end());
  options.per_sample = request.per_sample();
  const int64_t outputs = OutputsOf(snapshot);
  const int64_t values_per_row =
      kScalarsPerRow + outputs + request.quantiles_size() +
      (options.per_sample ? num_samples * outputs : 0);
  BNN_RETURN_IF_ERROR(ValidateResponseSize(num_rows, values_per_row, limits));
  return options;
}

void ToPredictResponse(const Prediction& prediction,
                       const PredictOptions& options,
                       absl::string_view snapshot_id, const Snapshot& snapshot,
                       bool packed, v1::PredictResponse* response) {
  response->set_snapshot_id(std::string(snapshot_id));
  response->set_num_samples(prediction.num_samples);
  response->set_seed(options.seed);
  response->mutable_class_values()->Add(snapshot.class_values.begin(),
                                        snapshot.class_values.end());
  const bool classification = IsClassification(snapshot.task);
  const int64_t num_rows = prediction.num_rows;
  const int64_t outputs = classification ? prediction.num_classes : 1;
  const int64_t num_quantiles = static_cast<int64_t>(options.quantiles.size());
  if (packed) {
    v1::PackedPredictions* out = response->mutable_packed();
    if (classification) {
      ToTensor(prediction.probabilities, {num_rows, outputs},
               out->mutable_probabilities());
      ToTensor(prediction.predicted_class, {num_rows},
               out->mutable_predicted_class());
      ToTensor(prediction.entropy, {num_rows}, out->mutable_entropy());
      ToTensor(prediction.expected_entropy, {num_rows},
               out->mutable_expected_entropy());
      ToTensor(prediction.mutual_information, {num_rows},
               out->mutable_mutual_information());
      ToTensor(prediction.variation_ratio, {num_rows},
               out->mutable_variation_ratio());
    } else {
      ToTensor(prediction.mean, {num_rows}, out->mutable_mean());
      ToTensor(prediction.variance, {num_rows}, out->mutable_variance());
      ToTensor(prediction.epistemic_variance, {num_rows},
               out->mutable_epistemic_variance());
      ToTensor(prediction.aleatoric_variance, {num_rows},
               out->mutable_aleatoric_variance());
      if (num_quantiles > 0) {
        ToTensor(prediction.quantiles, {num_rows, num_quantiles},
                 out->mutable_quantiles());
      }
    }
    if (!prediction.sample_outputs.empty()) {
      // The core's sample-major layout as it is.
      std::vector<int64_t> shape = {prediction.num_samples, num_rows};
      if (classification) shape.push_back(outputs);
      ToTensor(prediction.sample_outputs, shape, out->mutable_sample_outputs());
    }
    return;
  }
  response->mutable_predictions()->Reserve(static_cast<int>(num_rows));
  for (int64_t i = 0; i < num_rows; ++i) {
    v1::RowPrediction* out = response->add_predictions();
    if (classification) {
      const double* p = prediction.probabilities.data() + i * outputs;
      out->mutable_probabilities()->Add(p, p + outputs);
      out->set_predicted_class(prediction.predicted_class[i]);
      out->set_entropy(prediction.entropy[i]);
      out->set_expected_entropy(prediction.expected_entropy[i]);
      out->set_mutual_information(prediction.mutual_information[i]);
      out->set_variation_ratio(prediction.variation_ratio[i]);
    } else {
      out->set_mean(prediction.mean[i]);
      out->set_variance(prediction.variance[i]);
      out->set_epistemic_variance(prediction.epistemic_variance[i]);
      out->set_aleatoric_variance(prediction.aleatoric_variance[i]);
      const double* q = prediction.quantiles.data() + i * num_quantiles;
      out->mutable_quantiles()->Add(q, q + num_quantiles);
    }
    if (!prediction.sample_outputs.empty()) {
      // The core's layout is sample-major over all rows; a row's outputs
      // are one stretch of `outputs` values per sample.
      out->mutable_sample_outputs()->Reserve(
          static_cast<int>(prediction.num_samples * outputs));
      for (int s = 0; s < prediction.num_samples; ++s) {
        const double* v =
            prediction.sample_outputs.data() + (s * num_rows + i) * outputs;
        out->mutable_sample_outputs()->Add(v, v + outputs);
      }
    }
  }
}

absl::StatusOr<AcquireOptions> BuildAcquireOptions(
    const v1::AcquireRequest& request, int64_t pool_rows,
    const ServerLimits& limits) {
  if (request.k() < 1 || request.k() > pool_rows) {
    return absl::InvalidArgumentError(
        absl::StrCat("k = ", request.k(), " must be in [1, ", pool_rows,
                     "], the pool's rows"));
  }
  AcquireOptions options;
  options.k = request.k();
  BNN_ASSIGN_OR_RETURN(options.heuristic,
                       StringToHeuristic(request.heuristic()));
  BNN_ASSIGN_OR_RETURN(options.num_samples,
                       ResolveNumSamples(request.num_samples(), limits));
  options.seed = SeedOf(request);
  options.cache_samples = request.has_seed();
  options.diversity_power = request.diversity_power();
  BNN_RETURN_IF_ERROR(options.Validate());
  return options;
}

absl::StatusOr<EvaluateOptions> BuildEvaluateOptions(
    const v1::EvaluateRequest& request, const ServerLimits& limits) {
  EvaluateOptions options;
  BNN_ASSIGN_OR_RETURN(options.num_samples,
                       ResolveNumSamples(request.num_samples(), limits));
  if (request.ece_bins() < 0 || request.ece_bins() > kMaxEceBins) {
    return absl::InvalidArgumentError(
        absl::StrCat("ece_bins = ", request.ece_bins(), " must be in [0, ",
                     kMaxEceBins, "] (0 = ", kDefaultEceBins, ")"));
  }
  options.ece_bins =
      request.ece_bins() == 0 ? kDefaultEceBins : request.ece_bins();
  options.seed = SeedOf(request);
  options.cache_samples = request.has_seed();
  BNN_RETURN_IF_ERROR(options.Validate());
  return options;
}

absl::Status CheckEvaluationTask(const store::DatasetMeta& meta,
                                 const Snapshot& snapshot) {
  const bool dataset_classification = meta.task() != "regression";
  if (dataset_classification == IsClassification(snapshot.task)) {
    return absl::OkStatus();
  }
  return absl::InvalidArgumentError(absl::StrCat(
      "dataset_id '", meta.dataset_id(), "' is a ", meta.task(),
      " dataset; the snapshot is a ",
      IsClassification(snapshot.task) ? "classifier" : "regression model"));
}

absl::Status EncodeEvaluationLabels(bool packed,
                                    absl::Span<const double> class_values,
                                    std::vector<double>* labels) {
  for (size_t i = 0; i < labels->size(); ++i) {
    double& y = (*labels)[i];
    const int64_t index = ClassIndex(class_values, y);
    if (index < 0) {
      return absl::InvalidArgumentError(absl::StrCat(
          packed ? absl::StrCat("rows.targets[", i, "]")
                 : absl::StrCat("rows.rows[", i, "].y"),
          " = ", y, " is not a class of the snapshot; its classes are ",
          absl::StrJoin(class_values, ", ")));
    }
    y = static_cast<double>(index);
  }
  return absl::OkStatus();
}

void ToEvaluateResponse(const Evaluation& evaluation,
                        const EvaluateOptions& options,
                        const Snapshot& snapshot,
                        v1::EvaluateResponse* response) {
  response->set_num_samples(evaluation.num_samples);
  response->set_seed(options.seed);
  response->set_task(IsClassification(snapshot.task) ? v1::TASK_CLASSIFICATION
                                                     : v1::TASK_REGRESSION);
  response->set_num_rows(evaluation.num_rows);
  if (evaluation.rmse) response->set_rmse(*evaluation.rmse);
  if (evaluation.log_likelihood) {
    response->set_log_likelihood(*evaluation.log_likelihood);
  }
  if (evaluation.nll) response->set_nll(*evaluation.nll);
  if (evaluation.accuracy) response->set_accuracy(*evaluation.accuracy);
  if (evaluation.brier) response->set_brier(*evaluation.brier);
  if (evaluation.ece) response->set_ece(*evaluation.ece);
  for (const ReliabilityBin& bin : evaluation.reliability) {
    v1::ReliabilityBin* out = response->add_reliability();
    out->set_lower(bin.lower);
    out->set_upper(bin.upper);
    out->set_count(bin.count);
    out->set_mean_confidence(bin.confidence);
    out->set_accuracy(bin.accuracy);
  }
  if (evaluation.auroc_entropy) {
    response->set_auroc_entropy(*evaluation.auroc_entropy);
  }
  if (evaluation.auroc_mutual_information) {
    response->set_auroc_mutual_information(
        *evaluation.auroc_mutual_information);
  }
  response->set_ood_rows(evaluation.ood_rows);
}

}  // namespace bnn::server
