// The optimal Gaussian variational approximations of Bayesian logistic
// regression ("Full-Gaussian Exact" and "MF Exact" of SLANG Table 1; the
// reference for the symmetric KL): maximise the ELBO deterministically with
// L-BFGS, the expected log-likelihood by Gauss-Hermite quadrature on each
// example's 1-D projection x^T theta ~ N(x^T m, x^T Sigma x)
// (reference/slang.md §1.3). Each training step is one L-BFGS iteration over
// the full data set, so `epochs` bounds the iterations.
#ifndef BNN_METHODS_EXACT_H_
#define BNN_METHODS_EXACT_H_

#include <memory>

#include "absl/status/statusor.h"

#include "bnn/methods/method.h"
#include "bnn/methods/options.h"

namespace bnn {

struct ExactOptions {
  // lambda for weights and for the bias.
  double prior_precision = 1.0;
  double bias_prior_precision = 1.0;
  // Gauss-Hermite nodes per expectation (exact for polynomials of degree
  // < 2 n; 32 resolves log sigmoid to ~1e-10 at the variances seen here).
  int quadrature_points = 32;
  // L-BFGS correction pairs.
  int lbfgs_memory = 20;
  // Stop when |grad|_inf <= tolerance * max(1, |-ELBO|).
  double tolerance = 1e-10;

  absl::Status Validate() const;
};

const OptionsSchema<ExactOptions>& ExactOptionsSchema();

// Sigma full (Sigma = L L^T, L lower triangular) or diagonal. Initialize()
// refuses anything but a Bernoulli model without hidden layers, and the full
// variant more than FullGaussianPosterior::kMaxDim parameters.
absl::StatusOr<std::unique_ptr<VariationalMethod>> CreateExact(
    const ExactOptions& options, bool full);

}  // namespace bnn

#endif  // BNN_METHODS_EXACT_H_
