// BALI: Bayesian layerwise inference (Kurle, Klushyn, Herbrich). Every
// layer z = W' x is a multivariate Bayesian linear
// regression of pseudo-targets Y = Z + alpha G / sqrt(EMA(G^2)) on its
// inputs X, with a matrix-normal-inverse-Wishart prior, so its posterior
// q(W, Sigma) = MN(M, R, Sigma) IW(U, u) is closed-form (eq. 16) in EMAs of
// X'X, X'Y and Y'Y (eq. 17, bias-corrected). Weights are sampled as
// W = M + L_R A L_Sigma' with Sigma at the inverse-Wishart mode (eqs. 21-22,
// with the mean the printed eq. 22 omits).
//
// Registered as "bali" / "bali_w" (weight reparameterisation, the paper's
// default) and "bali_l" (local reparameterisation, App. F).
#ifndef BNN_METHODS_BALI_H_
#define BNN_METHODS_BALI_H_

#include "bnn/methods/options.h"

namespace bnn {

class MethodRegistry;

enum class Reparameterization {
  kWeight,  // BALI-W: W ~ MN(M, R, Sigma) per step
  kLocal,   // BALI-L: the mean plus per-example output noise (eq. 68)
};

struct BaliOptions {
  // alpha: step size of the pseudo-targets (eq. 20). Table 4: 0.3.
  double alpha = 0.3;
  // beta: initial EMA update rate (eq. 17), divided by beta_decay_factor
  // after beta_decay_at1 and again after beta_decay_at2 of the run (§5).
  double beta = 0.2;
  double beta_decay_factor = 5.0;
  double beta_decay_at1 = 0.6;
  double beta_decay_at2 = 0.8;
  // B: minibatch size.
  int batch_size = 1024;
  // N_eff / N: the effective data-set size scaling the EMA (Tables 4-5:
  // 1, 1/4, 1/10, 1/50, 1/100).
  double n_eff_fraction = 1.0;
  // sigma_r^2: R_0 = sigma_r^2 I, the prior row covariance (Table 4: 40).
  double prior_variance = 40.0;
  // sigma_u^2 / N_eff: U_0 = sigma_u^2 I (0.01 in every experiment), a noise
  // variance floor of about this value.
  double noise_prior_scale = 0.01;
  // u_0 - D_y: the prior degrees of freedom, never given in the paper; our
  // choice u_0 = D_y + 1 is the smallest integer for which IW(U_0, u_0) has a
  // mean; it hardly matters next to N_eff. M_0 = 0 (also unstated).
  double prior_dof = 1.0;
  // sigma_init: initial weights ~ N(0, sigma_init^2) elementwise (§3.4).
  double init_std = 1.0;
  // "weight" (BALI-W) or "local" (BALI-L, eq. 68).
  Reparameterization reparameterization = Reparameterization::kWeight;

  absl::Status Validate() const;
};

const OptionsSchema<BaliOptions>& BaliOptionsSchema();

// "bali" (reparameterization as given), "bali_w" and "bali_l" (fixed).
void RegisterBali(MethodRegistry& registry);

}  // namespace bnn

#endif  // BNN_METHODS_BALI_H_
