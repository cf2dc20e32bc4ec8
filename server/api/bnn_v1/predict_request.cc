#include "server/api/bnn_v1/predict_request.h"

#include <absl/random/random.h>
#include <absl/strings/str_cat.h>

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

}  // namespace

std::vector<double> FeatureMatrix(
    const google::protobuf::RepeatedPtrField<v1::Features>& rows,
    int64_t num_features) {
  std::vector<double> matrix;
  matrix.reserve(rows.size() * num_features);
  for (const v1::Features& row : rows) {
    matrix.insert(matrix.end(), row.x().begin(), row.x().end());
  }
  return matrix;
}

absl::StatusOr<PredictOptions> BuildPredictOptions(
    const v1::PredictRequest& request, const Snapshot& snapshot,
    const ServerLimits& limits) {
  BNN_ASSIGN_OR_RETURN(const int num_samples,
                       ResolveNumSamples(request.num_samples(), limits));
  BNN_RETURN_IF_ERROR(ValidateFeatureRows("rows", request.rows(),
                                          snapshot.model.input_dim, limits));
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
  BNN_RETURN_IF_ERROR(
      ValidateResponseSize(request.rows_size(), values_per_row, limits));
  return options;
}

void ToPredictResponse(const Prediction& prediction,
                       const PredictOptions& options,
                       absl::string_view snapshot_id, const Snapshot& snapshot,
                       v1::PredictResponse* response) {
  response->set_snapshot_id(std::string(snapshot_id));
  response->set_num_samples(prediction.num_samples);
  response->set_seed(options.seed);
  response->mutable_class_values()->Add(snapshot.class_values.begin(),
                                        snapshot.class_values.end());
  const bool classification = IsClassification(snapshot.task);
  const int64_t num_rows = prediction.num_rows;
  const int64_t outputs = classification ? prediction.num_classes : 1;
  const int64_t num_quantiles = static_cast<int64_t>(options.quantiles.size());
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

}  // namespace bnn::server
