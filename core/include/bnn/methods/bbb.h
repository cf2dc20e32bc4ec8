// Bayes by Backprop (Blundell et al. 2015): mean-field Gaussian VI by
// reparameterisation gradients of the ELBO and Adam; the deep-net baseline of
// all three papers. sigma = softplus(rho).
#ifndef BNN_METHODS_BBB_H_
#define BNN_METHODS_BBB_H_

#include "bnn/methods/options.h"
#include "bnn/methods/prior.h"

namespace bnn {

class MethodRegistry;

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
  // lambda for weights and for biases; tau of a Gaussian likelihood
  // (standardised units).
  PriorOptions prior;
  // Initial posterior standard deviation of every parameter.
  double init_std = 1e-3;

  absl::Status Validate() const;
};

const OptionsSchema<BbbOptions>& BbbOptionsSchema();

// "bbb".
void RegisterBbb(MethodRegistry& registry);

}  // namespace bnn

#endif  // BNN_METHODS_BBB_H_
