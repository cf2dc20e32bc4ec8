// Scores of a trained snapshot under the papers' metric conventions
// (Mishkin et al. 2018, Sec. 4, Table 2, App. F.3): test metrics in original
// target units from the Monte Carlo predictive, the negative ELBO per training
// example, and comparisons of marginal variances with a reference posterior.
#ifndef BNN_BENCH_ACCURACY_SCORING_H_
#define BNN_BENCH_ACCURACY_SCORING_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include <Eigen/Core>

#include "bnn/data/dataset.h"
#include "bnn/io/snapshot.h"
#include "bnn/posterior/posterior.h"
#include "bnn/predict/metrics.h"
#include "bnn/predict/predictor.h"

namespace bnn::experiment {

struct RegressionScores {
  // RMSE of the MC-averaged predictive mean, original target units.
  double rmse = 0;
  // Mean over test rows of log (1/S) sum_s N(y | f_s(x), 1/tau_orig) with
  // tau_orig = tau / target_std^2: the test log-likelihood of [10, 14].
  double test_ll = 0;
};
absl::StatusOr<RegressionScores> ScoreRegression(const Snapshot& snapshot,
                                                 const Dataset& test,
                                                 int num_samples,
                                                 uint64_t seed);

// The equal-width confidence bins of ECE (bnn/predict/metrics.h).
using ::bnn::ReliabilityBin;
using ::bnn::ReliabilityDiagram;

inline constexpr int kEceBins = 15;

struct ClassificationScores {
  double nll = 0;  // log-loss of the MC-averaged probabilities, nats
  double accuracy = 0;
  double ece = 0;    // kEceBins equal-width bins
  double brier = 0;  // mean over rows of sum_c (p_c - 1[y = c])^2
  double auroc =
      0;  // binary tasks only (NaN otherwise or if a class is absent)
  std::vector<ReliabilityBin> reliability;  // kEceBins bins
};
absl::StatusOr<ClassificationScores> ScoreClassification(
    const Snapshot& snapshot, const Dataset& test, int num_samples,
    uint64_t seed);
// The same scores of MC-averaged probabilities already computed.
ClassificationScores ScoreProbabilities(const Prediction& prediction,
                                        const Dataset& test);

// The Monte Carlo predictive of `snapshot` on every row of `rows` (raw
// units) with `num_samples` posterior samples and a fresh, seeded set of
// samples (no cache).
absl::StatusOr<Prediction> PredictRows(const Snapshot& snapshot,
                                       const Dataset& rows, int num_samples,
                                       uint64_t seed);

// One point of a ROC curve: the rates of calling a row positive when its
// score is >= threshold.
struct RocPoint {
  double threshold = 0;
  double fpr = 0;
  double tpr = 0;
};
// The ROC curve of `scores` for binary `positive` labels, from (0, 0)
// (threshold +inf) to (1, 1), one point per distinct score, then thinned to
// at most `max_points` (>= 2) points evenly spaced along the curve, always
// keeping both ends. Its trapezoidal area before thinning is bnn::Auroc.
// Empty when either class is absent.
std::vector<RocPoint> RocCurve(absl::Span<const double> scores,
                               absl::Span<const bool> positive,
                               int max_points = 200);

struct NegativeElbo {
  double per_example = 0;  // -ELBO / N_train
  // Standard error of per_example (0 when computed by quadrature).
  double standard_error = 0;
  // "gauss_hermite_<n>" or "monte_carlo_<S>".
  std::string estimator;
};
// -ELBO / N on `train` (raw units). For a Gaussian posterior over a model
// without hidden layers and a Bernoulli likelihood (Bayesian logistic
// regression) the expected log-likelihood is a sum of 1-D Gaussian
// expectations, evaluated by Gauss-Hermite quadrature: deterministic, so
// differences between methods are not buried in Monte Carlo noise. Any other
// model falls back to bnn::EstimateElbo with `mc_samples` samples.
absl::StatusOr<NegativeElbo> NegativeElboPerExample(const Snapshot& snapshot,
                                                    const Dataset& train,
                                                    int mc_samples,
                                                    uint64_t seed);

// Spearman rank correlation (average ranks for ties); NaN if either vector
// is constant or sizes differ.
double SpearmanCorrelation(const Eigen::VectorXd& a, const Eigen::VectorXd& b);

struct VarianceAgreement {
  // Rank correlation of the marginal variances with the reference's.
  double spearman = 0;
  // mean_j log(var_j / reference_var_j): < 0 means shrunken variances.
  double mean_log_ratio = 0;
};
VarianceAgreement CompareMarginalVariances(const Posterior& posterior,
                                           const Posterior& reference);

}  // namespace bnn::experiment

#endif  // BNN_BENCH_ACCURACY_SCORING_H_
