// The baselines of the BALI paper (Kurle et al., §5 and Table 6): MC
// dropout (Gal & Ghahramani 2016), trained with Adam and weight decay, whose
// predictive averages over dropout masks like a posterior; and MAP, the same
// with dropout 0 (a point estimate served as a degenerate posterior).
#ifndef BNN_METHODS_DROPOUT_H_
#define BNN_METHODS_DROPOUT_H_

#include "bnn/methods/options.h"
#include "bnn/methods/prior.h"

namespace bnn {

class MethodRegistry;

struct DropoutOptions {
  // Adam on the mean minibatch negative log-likelihood (Table 6: 0.001-0.002).
  double learning_rate = 0.001;
  double adam_beta1 = 0.9;
  double adam_beta2 = 0.999;
  double adam_epsilon = 1e-8;
  // L2 coefficient added to the gradient, as Adam's weight_decay (1e-4).
  double weight_decay = 1e-4;
  // Probability of dropping each input unit of every layer but the first
  // (and of the first with drop_inputs); "map" forces 0.
  double dropout = 0.1;
  bool drop_inputs = false;
  int batch_size = 32;
  // tau of a Gaussian likelihood (standardised units); the weight prior is
  // weight_decay.
  PriorOptions prior;

  absl::Status Validate() const;
};

const OptionsSchema<DropoutOptions>& DropoutOptionsSchema();

// "mc_dropout" and "map" (dropout 0, which it refuses to change).
void RegisterDropout(MethodRegistry& registry);

}  // namespace bnn

#endif  // BNN_METHODS_DROPOUT_H_
