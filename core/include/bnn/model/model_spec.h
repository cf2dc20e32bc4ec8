// The network architecture and its flat parameter layout. One layout is used
// by every posterior family, every method and every snapshot:
//
//   theta = [ vec(W~_1), vec(W~_2), ..., vec(W~_L) ]
//   W~_l  = [ W_l  b_l ]  (out_l x (in_l + 1)), stored column-major,
//
// so the bias of layer l is the last column of its block. Folding the bias in
// as a column makes the per-example gradient of a layer the single outer
// product delta * [a; 1]^T (Goodfellow's trick, SLANG §4).
#ifndef BNN_MODEL_MODEL_SPEC_H_
#define BNN_MODEL_MODEL_SPEC_H_

#include <cstdint>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

#include "bnn/data/dataset.h"

namespace bnn {

enum class Activation {
  kRelu,       // max(0, x)
  kTanh,       // tanh(x)
  kLeakyTanh,  // tanh(x) + 0.1 x (BALI)
  kIdentity,   // x
};
absl::string_view ActivationToString(Activation a);
// Accepts "relu", "tanh", "leaky_tanh" (or "leaky-tanh"), "identity".
absl::StatusOr<Activation> StringToActivation(absl::string_view name);

enum class Likelihood {
  kGaussian,     // N(y | f, 1/tau), one output
  kBernoulli,    // y ~ Bernoulli(sigmoid(f)), one output (logit)
  kCategorical,  // y ~ Cat(softmax(f)), C outputs (logits)
};
absl::string_view LikelihoodToString(Likelihood l);
absl::StatusOr<Likelihood> StringToLikelihood(absl::string_view name);
// The likelihood a task implies.
Likelihood LikelihoodForTask(Task task);

struct LayerShape {
  int in = 0;          // inputs, excluding the bias column
  int out = 0;         // outputs
  int64_t offset = 0;  // first index of the layer's block in theta
  int64_t size() const { return static_cast<int64_t>(out) * (in + 1); }
  // Index in theta of W~(o, i); i == in addresses the bias.
  int64_t Index(int o, int i) const {
    return offset + static_cast<int64_t>(i) * out + o;
  }
};

// Bounds the service enforces on architectures.
inline constexpr int kMaxHiddenLayers = 16;
inline constexpr int kMaxLayerWidth = 1 << 16;
inline constexpr int64_t kMaxParameters = int64_t{1} << 28;

struct ModelSpec {
  int input_dim = 0;
  // Widths of the hidden layers; empty means a (multinomial) logistic or
  // linear regression.
  std::vector<int> hidden_sizes;
  // One activation per hidden layer (same length as hidden_sizes).
  std::vector<Activation> activations;
  // Outputs: 1 for Gaussian and Bernoulli, C for categorical.
  int output_dim = 1;
  Likelihood likelihood = Likelihood::kGaussian;

  // A spec for `task` with `input_dim` inputs and `num_classes` classes.
  static ModelSpec ForTask(Task task, int input_dim, int num_classes,
                           std::vector<int> hidden_sizes,
                           Activation activation);

  // Names the offending field and bound.
  absl::Status Validate() const;
  std::vector<LayerShape> Layers() const;
  int64_t NumParameters() const;
  // 1 for every bias entry of theta, 0 for weights.
  std::vector<bool> BiasMask() const;
};

}  // namespace bnn

#endif  // BNN_MODEL_MODEL_SPEC_H_
