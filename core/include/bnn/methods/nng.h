// Noisy natural gradient (Zhang, Sun, Duvenaud, Grosse 2018): natural-
// gradient VI as noisy point-estimate natural
// gradient with an EMA of the true Fisher, in the re-parameterised form of
// eqs. 9-10 (alpha~ = alpha lambda/N, beta~ = beta lambda/N):
//   "noisy_adam"  NNG-FFG, Algorithm 1: factorised Gaussian
//   "noisy_kfac"  NNG-MVG, Algorithm 2: per-layer matrix-variate Gaussian
//   "nng_full"    full covariance (eqs. 9-10), small models only
// All share NngOptions.
#ifndef BNN_METHODS_NNG_H_
#define BNN_METHODS_NNG_H_

#include "bnn/methods/options.h"
#include "bnn/methods/prior.h"

namespace bnn {

class MethodRegistry;

struct NngOptions {
  // S: weight samples per step (Algorithms 1-2 use one).
  int mc_samples = 1;
  // M: minibatch size; gradients and Fisher statistics are minibatch means.
  int batch_size = 32;
  // alpha~: step size of the mean (eq. 10). Regression: 0.01 (§6.1).
  double learning_rate = 0.01;
  // beta~: EMA rate of the Fisher statistics (eq. 9, eq. 12; 1 - beta2 of
  // Alg. 1). Regression: 0.001; active learning: 0.01.
  double beta = 0.001;
  // beta1: bias-corrected momentum on the mean's gradient (Alg. 1; the paper
  // never states its value); 0 disables.
  double momentum = 0.9;
  // lambda: KL weight of the ELBO (eq. 1); 1 is proper Bayes.
  double kl_weight = 1.0;
  // 1/eta: precision of the spherical prior N(0, eta I). noisy_adam and
  // nng_full give biases bias_prior_precision; noisy_kfac needs one
  // spherical prior per layer (eq. 13) and uses prior_precision throughout.
  // The Gaussian likelihood's noise: noise_model fixed (noise_precision) or
  // gamma (App. C.1); the likelihood and the predictive use E_q[tau].
  PriorOptions prior;
  // gamma_ex: extrinsic damping, in the mean's preconditioner only (§3.2).
  double extrinsic_damping = 0.0;
  // T_stats / T_inv: Fisher statistics every stats_interval steps; factor
  // eigendecompositions every inverse_interval steps (noisy_kfac, nng_full).
  int stats_interval = 1;
  int inverse_interval = 1;
  // Initial posterior standard deviation of every weight (the authors' code
  // starts with tiny noise rather than the prior's).
  double init_std = 1e-3;
  // Multiply learning_rate by lr_decay_factor after this fraction of the
  // run (§6.1: x0.1 in the second half); 0 disables.
  double lr_decay_at = 0.0;
  double lr_decay_factor = 0.1;
  // C.2 step-size control: alpha~ = min(learning_rate, sqrt(c_k / v^T F~ v)),
  // c_k = trust_region * trust_region_decay^epoch, with the damped F~ of the
  // update; 0 disables.
  double trust_region = 0.0;
  double trust_region_decay = 0.95;

  absl::Status Validate() const;
};

const OptionsSchema<NngOptions>& NngOptionsSchema();

// "noisy_adam", "noisy_kfac" and "nng_full" (which refuses models above
// FullGaussianPosterior::kMaxDim parameters).
void RegisterNng(MethodRegistry& registry);

}  // namespace bnn

#endif  // BNN_METHODS_NNG_H_
