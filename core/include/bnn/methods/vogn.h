// The Gaussian natural-gradient VI baselines of SLANG's Table 1 (Mishkin et
// al. 2018, App. A): full-covariance and mean-field, with the empirical
// Fisher (VOGN, SLANG eq. 2) or the exact Hessian (VON, eqs. 12-13):
//
//   theta_s ~ q;  C = (N/(M S)) sum_{i,s} curvature_i(theta_s)
//   P   <- (1 - beta) P + beta (C + Lambda)        (full: P; mean-field: diag)
//   mu  <- mu - alpha P^-1 (m^ + Lambda mu)        (m^: momentum, as SLANG)
//
// "vogn_full", "von_full", "vogn_diag" and "von_diag" share these options.
#ifndef BNN_METHODS_VOGN_H_
#define BNN_METHODS_VOGN_H_

#include "bnn/methods/options.h"
#include "bnn/methods/prior.h"

namespace bnn {

class MethodRegistry;

struct VognOptions {
  // S: Monte Carlo weight samples per step.
  int mc_samples = 12;
  // M: minibatch size.
  int batch_size = 32;
  // alpha_0: mean step size.
  double learning_rate = 0.05;
  // beta_0: precision step size.
  double beta = 0.05;
  // omega in alpha_t = alpha_0 / (1 + t^omega) (also for beta); 0 disables.
  double decay = 0.0;
  // gamma: bias-corrected EMA of the likelihood gradient; 0 disables.
  double momentum = 0.0;
  // lambda for weights and for biases; tau of a Gaussian likelihood
  // (standardised units).
  PriorOptions prior;
  // Initial precision P_0 = init_precision I (Sigma_0 = I by default, as the
  // reference MATLAB code).
  double init_precision = 1.0;

  absl::Status Validate() const;
};

const OptionsSchema<VognOptions>& VognOptionsSchema();

// The four variants. The full ones refuse models with more than
// FullGaussianPosterior::kMaxDim parameters; the Hessian ones need a model
// without hidden layers (where it is exact). Both are checked in
// Initialize().
void RegisterVogn(MethodRegistry& registry);

}  // namespace bnn

#endif  // BNN_METHODS_VOGN_H_
