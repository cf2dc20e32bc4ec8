// The prior and likelihood-noise options shared by the methods: the
// Gaussian weight prior N(0, 1/lambda) with its own precision for biases,
// and the Gaussian likelihood's noise precision tau, fixed or (NNG App. C.1)
// learned under a Gamma prior. Declared and validated once; each method
// embeds PriorOptions in its Options and the fields it uses in its schema.
#ifndef BNN_METHODS_PRIOR_H_
#define BNN_METHODS_PRIOR_H_

#include <cstdint>
#include <vector>

#include "absl/status/status.h"

#include "bnn/methods/options.h"
#include "bnn/model/model_spec.h"

namespace bnn {

enum class NoiseModel {
  kFixed,  // tau = noise_precision
  kGamma,  // Gamma(noise_shape, noise_rate) prior on tau, Gamma q(tau)
};

struct PriorOptions {
  // lambda: precision of the Gaussian prior N(0, 1/lambda) on every weight
  // (SLANG §2; 1/eta of NNG eq. 1).
  double prior_precision = 1.0;
  // lambda of the biases (the reference codes use a near-flat one).
  double bias_prior_precision = 1.0;
  // Gaussian likelihood noise: kFixed uses noise_precision (tau, in
  // standardised target units); kGamma puts a Gamma(noise_shape,
  // noise_rate) prior on tau (shape-rate; a0 = b0 = 6 in NNG C.1) and fits a
  // Gamma q(tau) by stochastic natural-gradient steps of size
  // noise_learning_rate. Only methods that declare noise_model learn tau.
  NoiseModel noise_model = NoiseModel::kFixed;
  double noise_precision = 1.0;
  double noise_shape = 6.0;
  double noise_rate = 6.0;
  double noise_learning_rate = 0.01;

  // Names the offending field and bound.
  absl::Status Validate() const;

  // lambda for every entry of theta (model_spec.h layout): bias entries get
  // bias_prior_precision. Vector: any resizable dense vector (Eigen's).
  template <typename Vector>
  void FillPrecisions(const ModelSpec& spec, Vector* out) const {
    const std::vector<bool> bias = spec.BiasMask();
    out->resize(static_cast<int64_t>(bias.size()));
    for (size_t j = 0; j < bias.size(); ++j) {
      (*out)[j] = typename Vector::Scalar(bias[j] ? bias_prior_precision
                                                  : prior_precision);
    }
  }
};

// Names, types and help of the PriorOptions fields, for OptionsSchema::Embed.
const OptionsSchema<PriorOptions>& PriorOptionsSchema();

}  // namespace bnn

#endif  // BNN_METHODS_PRIOR_H_
