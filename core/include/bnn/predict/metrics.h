// Evaluation metrics of Monte Carlo predictives. Per-sample network outputs
// are laid out sample-major: out[s * n + i] is sample s for row i.
#ifndef BNN_PREDICT_METRICS_H_
#define BNN_PREDICT_METRICS_H_

#include <cstdint>
#include <vector>

#include "absl/types/span.h"

namespace bnn {

// RMSE of the MC-averaged mean against y.
double Rmse(absl::Span<const double> mean, absl::Span<const double> y);

// Mean over rows of log (1/S) sum_s N(y_i | f_si, 1/tau) (log-mean-exp, the
// MC mixture's test log-likelihood). `samples` is S x n sample-major.
double GaussianMixtureLogLikelihood(absl::Span<const double> samples,
                                    int num_samples, absl::Span<const double> y,
                                    double tau);

// Classification metrics on MC-averaged probabilities (row-major n x C) and
// integer labels 0..C-1.
double LogLoss(absl::Span<const double> probs, int num_classes,
               absl::Span<const double> labels);
double Accuracy(absl::Span<const double> probs, int num_classes,
                absl::Span<const double> labels);
// Mean over rows of sum_c (p_c - 1[y = c])^2.
double Brier(absl::Span<const double> probs, int num_classes,
             absl::Span<const double> labels);
// One equal-width bin of the top-class confidence: bin b of B covers
// (b/B, (b+1)/B] (confidence 0 joins the first bin).
struct ReliabilityBin {
  double lower = 0;
  double upper = 0;
  int64_t count = 0;
  double confidence = 0;  // mean top-class probability; 0 when empty
  double accuracy = 0;    // share of correct top-class predictions
};
// The reliability diagram of `bins` (>= 1) equal-width bins.
std::vector<ReliabilityBin> ReliabilityDiagram(absl::Span<const double> probs,
                                               int num_classes,
                                               absl::Span<const double> labels,
                                               int bins = 15);
// Expected calibration error of the top-class confidence with `bins` equal-
// width bins on [0, 1]: sum_b (n_b / n) |acc_b - conf_b| over the bins of
// ReliabilityDiagram.
double ExpectedCalibrationError(absl::Span<const double> probs, int num_classes,
                                absl::Span<const double> labels, int bins = 15);
// The same from the bins of a diagram.
double ExpectedCalibrationError(absl::Span<const ReliabilityBin> bins);
// Area under the ROC curve of `scores` for binary `positive` labels (ties
// count one half). NaN when either class is absent.
double Auroc(absl::Span<const double> scores, absl::Span<const bool> positive);

}  // namespace bnn

#endif  // BNN_PREDICT_METRICS_H_
