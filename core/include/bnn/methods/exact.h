// The optimal Gaussian variational approximations of Bayesian logistic
// regression ("Full-Gaussian Exact" and "MF Exact" of SLANG Table 1; the
// reference for the symmetric KL): maximise the ELBO deterministically with
// L-BFGS, the expected log-likelihood by Gauss-Hermite quadrature on each
// example's 1-D projection x^T theta ~ N(x^T m, x^T Sigma x)
// (SLANG §4.1). Each training step is one L-BFGS iteration over
// the full data set, so `epochs` bounds the iterations.
#ifndef BNN_METHODS_EXACT_H_
#define BNN_METHODS_EXACT_H_

#include "bnn/methods/options.h"
#include "bnn/methods/prior.h"

namespace bnn {

class MethodRegistry;

struct ExactOptions {
  // lambda for weights and for the bias (no likelihood noise).
  PriorOptions prior;
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

// "exact_full" (Sigma = L L^T, L lower triangular) and "exact_diag".
// Initialize() refuses anything but a Bernoulli model without hidden layers,
// and the full variant more than FullGaussianPosterior::kMaxDim parameters.
void RegisterExact(MethodRegistry& registry);

}  // namespace bnn

#endif  // BNN_METHODS_EXACT_H_
