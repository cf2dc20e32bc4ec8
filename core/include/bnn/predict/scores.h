// Scores of a predictor on labelled rows, the measures of the papers'
// experiments and of the Evaluate RPC: RMSE and the Monte Carlo mixture's
// test log-likelihood for regression; accuracy, NLL, Brier, ECE with its
// reliability diagram for classification and, given out-of-distribution
// rows, the AUROC of entropy and of mutual information at telling them
// from the labelled rows. Every number comes from bnn/predict/metrics.h.
#ifndef BNN_PREDICT_SCORES_H_
#define BNN_PREDICT_SCORES_H_

#include <cstdint>
#include <optional>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"

#include "bnn/interrupt.h"
#include "bnn/memory.h"
#include "bnn/predict/metrics.h"
#include "bnn/predict/predictor.h"

namespace bnn {

struct EvaluateOptions {
  // S: posterior samples of every prediction; one draw serves the labelled
  // and the out-of-distribution rows.
  int num_samples = 64;
  // Same seed, S and rows => bitwise-identical scores.
  uint64_t seed = 0;
  // Keep the draw in the predictor's cache (PredictOptions::cache_samples).
  bool cache_samples = true;
  // Equal-width confidence bins of the ECE and the reliability diagram.
  int ece_bins = 15;
  // Checked between chunks of rows (Predictor::Predict); a non-OK status
  // ends the call with it.
  Interrupt interrupt;

  absl::Status Validate() const;
};

// Scores that do not apply to the task are absent.
struct Evaluation {
  int64_t num_rows = 0;
  int num_samples = 0;
  // Regression, original target units: Rmse of the predictive mean,
  // GaussianMixtureLogLikelihood of the per-sample means with the model's
  // noise precision in those units (tau / target_std^2), nll = -it.
  std::optional<double> rmse;
  std::optional<double> log_likelihood;
  // Both tasks (classification: LogLoss of the MC-averaged probabilities).
  std::optional<double> nll;
  // Classification.
  std::optional<double> accuracy;
  std::optional<double> brier;
  std::optional<double> ece;
  std::vector<ReliabilityBin> reliability;
  // Classification with OOD rows (the positives): Auroc of the predictive
  // entropy and of the mutual information.
  std::optional<double> auroc_entropy;
  std::optional<double> auroc_mutual_information;
  int64_t ood_rows = 0;
};

// Scores `predictor` on `num_rows` rows (row-major, raw units) with targets
// `targets`: regression values in original units, or class indices
// 0..C-1 of the snapshot's class_values. `ood_rows` (num_ood_rows rows,
// possibly none) are out-of-distribution rows of a classifier; a
// regression model refuses them (InvalidArgument). Errors as
// Predictor::Predict's, and InvalidArgument for a class index out of range.
absl::StatusOr<Evaluation> Evaluate(const Predictor& predictor,
                                    absl::Span<const double> rows,
                                    absl::Span<const double> targets,
                                    int64_t num_rows,
                                    absl::Span<const double> ood_rows,
                                    int64_t num_ood_rows,
                                    const EvaluateOptions& options);

// Peak heap bytes of Evaluate, estimated before it allocates: the larger of
// the labelled rows' prediction (the weight samples drawn once, a chunk's
// forward pass, the arrays, every sample's mean for regression) and the OOD
// rows' prediction with the same samples while the labelled rows' arrays
// are kept; and the scores (kept_bytes). Not the caller's rows.
MemoryEstimate EstimateEvaluateMemory(const Predictor& predictor,
                                      int64_t num_rows, int64_t num_ood_rows,
                                      const EvaluateOptions& options);

}  // namespace bnn

#endif  // BNN_PREDICT_SCORES_H_
