// Scores of a trained snapshot under the papers' metric conventions
// (reference/slang.md §9.4, §9.6, §13): test metrics in original target
// units from the Monte Carlo predictive, the negative ELBO per training
// example, and comparisons of marginal variances with a reference posterior.
#ifndef BNN_BENCH_ACCURACY_SCORING_H_
#define BNN_BENCH_ACCURACY_SCORING_H_

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include <Eigen/Core>

#include "bnn/data/dataset.h"
#include "bnn/io/snapshot.h"
#include "bnn/posterior/posterior.h"

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

struct ClassificationScores {
  double nll = 0;  // log-loss of the MC-averaged probabilities, nats
  double accuracy = 0;
  double ece = 0;  // 15 equal-width bins
  double auroc =
      0;  // binary tasks only (NaN otherwise or if a class is absent)
};
absl::StatusOr<ClassificationScores> ScoreClassification(
    const Snapshot& snapshot, const Dataset& test, int num_samples,
    uint64_t seed);

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
