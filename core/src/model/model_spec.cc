#include "bnn/model/model_spec.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"

namespace bnn {

absl::string_view ActivationToString(Activation a) {
  switch (a) {
    case Activation::kRelu:
      return "relu";
    case Activation::kTanh:
      return "tanh";
    case Activation::kLeakyTanh:
      return "leaky_tanh";
    case Activation::kIdentity:
      return "identity";
  }
  return "unknown";
}

absl::StatusOr<Activation> StringToActivation(absl::string_view name) {
  if (name == "leaky-tanh") return Activation::kLeakyTanh;
  for (Activation a : {Activation::kRelu, Activation::kTanh,
                       Activation::kLeakyTanh, Activation::kIdentity}) {
    if (name == ActivationToString(a)) return a;
  }
  return absl::InvalidArgumentError(
      absl::StrCat("unknown activation '", name,
                   "'; known activations: relu, tanh, leaky_tanh, identity"));
}

absl::string_view LikelihoodToString(Likelihood l) {
  switch (l) {
    case Likelihood::kGaussian:
      return "gaussian";
    case Likelihood::kBernoulli:
      return "bernoulli";
    case Likelihood::kCategorical:
      return "categorical";
  }
  return "unknown";
}

absl::StatusOr<Likelihood> StringToLikelihood(absl::string_view name) {
  for (Likelihood l : {Likelihood::kGaussian, Likelihood::kBernoulli,
                       Likelihood::kCategorical}) {
    if (name == LikelihoodToString(l)) return l;
  }
  return absl::InvalidArgumentError(
      absl::StrCat("unknown likelihood '", name,
                   "'; known likelihoods: gaussian, bernoulli, categorical"));
}

Likelihood LikelihoodForTask(Task task) {
  switch (task) {
    case Task::kRegression:
      return Likelihood::kGaussian;
    case Task::kBinary:
      return Likelihood::kBernoulli;
    case Task::kMulticlass:
      return Likelihood::kCategorical;
  }
  return Likelihood::kGaussian;
}

ModelSpec ModelSpec::ForTask(Task task, int input_dim, int num_classes,
                             std::vector<int> hidden_sizes,
                             Activation activation) {
  ModelSpec spec;
  spec.input_dim = input_dim;
  spec.activations.assign(hidden_sizes.size(), activation);
  spec.hidden_sizes = std::move(hidden_sizes);
  spec.likelihood = LikelihoodForTask(task);
  spec.output_dim = task == Task::kMulticlass ? num_classes : 1;
  return spec;
}

absl::Status ModelSpec::Validate() const {
  if (input_dim < 1 || input_dim > kMaxLayerWidth) {
    return absl::InvalidArgumentError(absl::StrCat(
        "input_dim = ", input_dim, " must be in [1, ", kMaxLayerWidth, "]"));
  }
  if (hidden_sizes.size() > static_cast<size_t>(kMaxHiddenLayers)) {
    return absl::InvalidArgumentError(
        absl::StrCat("hidden_sizes has ", hidden_sizes.size(),
                     " layers; the limit is ", kMaxHiddenLayers));
  }
  for (size_t i = 0; i < hidden_sizes.size(); ++i) {
    if (hidden_sizes[i] < 1 || hidden_sizes[i] > kMaxLayerWidth) {
      return absl::InvalidArgumentError(
          absl::StrCat("hidden_sizes[", i, "] = ", hidden_sizes[i],
                       " must be in [1, ", kMaxLayerWidth, "]"));
    }
  }
  if (activations.size() != hidden_sizes.size()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "activations has ", activations.size(),
        " entries; expected one per hidden layer (", hidden_sizes.size(), ")"));
  }
  const int expected_out = likelihood == Likelihood::kCategorical ? -1 : 1;
  if (output_dim < 1 || output_dim > kMaxLayerWidth ||
      (expected_out == 1 && output_dim != 1) ||
      (likelihood == Likelihood::kCategorical && output_dim < 2)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "output_dim = ", output_dim, " is invalid for the ",
        LikelihoodToString(likelihood), " likelihood (",
        likelihood == Likelihood::kCategorical ? "needs >= 2 classes"
                                               : "needs exactly 1",
        ")"));
  }
  if (NumParameters() > kMaxParameters) {
    return absl::InvalidArgumentError(
        absl::StrCat("the network has ", NumParameters(),
                     " parameters; the limit is ", kMaxParameters));
  }
  return absl::OkStatus();
}

std::vector<LayerShape> ModelSpec::Layers() const {
  std::vector<LayerShape> layers;
  int in = input_dim;
  int64_t offset = 0;
  auto add = [&](int out) {
    LayerShape l;
    l.in = in;
    l.out = out;
    l.offset = offset;
    offset += l.size();
    layers.push_back(l);
    in = out;
  };
  for (int h : hidden_sizes) add(h);
  add(output_dim);
  return layers;
}

int64_t ModelSpec::NumParameters() const {
  int64_t total = 0;
  int64_t in = input_dim;
  for (int h : hidden_sizes) {
    total += static_cast<int64_t>(h) * (in + 1);
    in = h;
  }
  return total + static_cast<int64_t>(output_dim) * (in + 1);
}

std::vector<bool> ModelSpec::BiasMask() const {
  std::vector<bool> mask(NumParameters(), false);
  for (const LayerShape& l : Layers()) {
    for (int o = 0; o < l.out; ++o) mask[l.Index(o, l.in)] = true;
  }
  return mask;
}

}  // namespace bnn
