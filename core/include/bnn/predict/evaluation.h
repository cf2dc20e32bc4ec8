// Posterior-quality measures used by the experiments: the ELBO of a snapshot
// on a data set and the symmetric KL between two Gaussian posteriors.
#ifndef BNN_PREDICT_EVALUATION_H_
#define BNN_PREDICT_EVALUATION_H_

#include "absl/status/statusor.h"
#include <Eigen/Core>

#include "bnn/data/dataset.h"
#include "bnn/io/snapshot.h"
#include "bnn/posterior/posterior.h"
#include "bnn/random.h"

namespace bnn {

// The per-parameter prior precision a snapshot was trained with, from its
// "prior_precision" and "bias_prior_precision" parameters (1 when absent).
absl::StatusOr<Eigen::VectorXd> PriorPrecision(const Snapshot& snapshot);

struct ElboEstimate {
  // E_q[log p(D | theta)] by Monte Carlo, its standard error, the
  // closed-form KL(q || p) and ELBO = expected_log_likelihood - kl.
  double expected_log_likelihood = 0;
  double standard_error = 0;
  double kl = 0;
  double elbo = 0;
};

// The ELBO of `snapshot` on `data` (raw units; standardised with the
// snapshot's standardisation, so a regression ELBO is in the units the model
// was fitted in), with `num_samples` posterior samples. Unbiased for the
// expected log-likelihood. Unimplemented for families without a density.
absl::StatusOr<ElboEstimate> EstimateElbo(const Snapshot& snapshot,
                                          const Dataset& data, int num_samples,
                                          Rng& rng);

// (KL(a || b) + KL(b || a)) / 2 between Gaussian posteriors of the same
// dimension (dense; D <= Posterior::kMaxDenseDim). The SLANG paper's
// symmetric KL (Mishkin et al. 2018, Table 1; the authors' table scripts)
// is this average.
absl::StatusOr<double> SymmetricKl(const Posterior& a, const Posterior& b);

}  // namespace bnn

#endif  // BNN_PREDICT_EVALUATION_H_
