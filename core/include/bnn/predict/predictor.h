// Predictive distributions from a snapshot by Monte Carlo over the posterior:
// p(y | x) ~= (1/S) sum_s p(y | x, theta_s), theta_s ~ q.
#ifndef BNN_PREDICT_PREDICTOR_H_
#define BNN_PREDICT_PREDICTOR_H_

#include <cstdint>
#include <memory>
#include <vector>

#include "absl/status/statusor.h"
#include "bnn/io/snapshot.h"

namespace bnn {

struct PredictorOptions {
  // Upper bound on samples per request.
  int max_samples = 4096;
  // Rows evaluated per batched forward pass (bounds memory).
  int chunk_rows = 1024;

  absl::Status Validate() const;
};

struct PredictOptions {
  // S: posterior samples; 1 <= S <= PredictorOptions::max_samples.
  int num_samples = 64;
  // Same seed and inputs => bitwise-identical outputs.
  uint64_t seed = 0;
};

struct Prediction {
  int64_t num_rows = 0;
  // Regression (original target units): predictive mean, total variance =
  // epistemic (variance of the sampled means) + aleatoric (1/tau).
  std::vector<double> mean;
  std::vector<double> variance;
  std::vector<double> epistemic_variance;
  std::vector<double> aleatoric_variance;
  // Classification: MC-averaged class probabilities, row-major rows x C, and
  // for every row the predicted class value and predictive entropy.
  int num_classes = 0;
  std::vector<double> probabilities;
  std::vector<double> predicted_class;
  std::vector<double> entropy;
};

// Thread-safe: Predict() is const and may run concurrently.
class Predictor {
 public:
  static absl::StatusOr<std::unique_ptr<Predictor>> Create(
      std::shared_ptr<const Snapshot> snapshot,
      const PredictorOptions& options = {});
  ~Predictor();

  int64_t num_features() const;
  const Snapshot& snapshot() const { return *snapshot_; }

  // `rows` is row-major num_rows x num_features() in raw (unstandardised)
  // units. InvalidArgument on a non-finite value or a bad sample count.
  absl::StatusOr<Prediction> Predict(const std::vector<double>& rows,
                                     int64_t num_rows,
                                     const PredictOptions& options) const;

 private:
  struct Impl;
  Predictor(std::shared_ptr<const Snapshot> snapshot,
            std::unique_ptr<Impl> impl);

  std::shared_ptr<const Snapshot> snapshot_;
  std::unique_ptr<Impl> impl_;
};

}  // namespace bnn

#endif  // BNN_PREDICT_PREDICTOR_H_
