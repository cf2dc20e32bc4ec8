// Bayes by Backprop (Blundell et al. 2015): mean-field Gaussian VI by
// reparameterisation gradients of the ELBO and Adam; the deep-net baseline of
// all three papers. sigma = softplus(rho).
#ifndef BNN_METHODS_BBB_H_
#define BNN_METHODS_BBB_H_

#include <memory>

#include "absl/status/statusor.h"

#include "bnn/methods/method.h"
#include "bnn/methods/options.h"

namespace bnn {

struct BbbOptions {
  // S: reparameterised weight samples per step.
  int mc_samples = 10;
  // M: minibatch size; the data term is scaled by N/M.
  int batch_size = 32;
  // Adam step size and moment decay rates (Kingma & Ba).
  double learning_rate = 0.01;
  double adam_beta1 = 0.9;
  double adam_beta2 = 0.999;
  double adam_epsilon = 1e-8;
  // lambda for weights and for biases.
  double prior_precision = 1.0;
  double bias_prior_precision = 1.0;
  // tau of a Gaussian likelihood (standardised units).
  double noise_precision = 1.0;
  // Initial posterior standard deviation of every parameter.
  double init_std = 1e-3;

  absl::Status Validate() const;
};

const OptionsSchema<BbbOptions>& BbbOptionsSchema();

absl::StatusOr<std::unique_ptr<VariationalMethod>> CreateBbb(
    const BbbOptions& options);

}  // namespace bnn

#endif  // BNN_METHODS_BBB_H_
