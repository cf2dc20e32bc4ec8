// Training uses an independent mask per example and layer (standard dropout,
// inverted: kept units scaled by 1/(1-p)); the exported DropoutPosterior
// draws one mask per weight sample, shared by the rows of a prediction,
// which is MC dropout's weight-space view.
#include "bnn/methods/dropout.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "absl/strings/str_cat.h"

#include "bnn/check.h"
#include "bnn/model/likelihood.h"
#include "bnn/model/network.h"
#include "bnn/posterior/sample_families.h"
#include "bnn/status.h"

#include "methods/method_memory.h"
#include "model/activation.h"

namespace bnn {
namespace {

class Dropout final : public VariationalMethod {
 public:
  Dropout(const DropoutOptions& options, bool map)
      : options_(options), map_(map) {}

  absl::string_view name() const override {
    return map_ ? "map" : "mc_dropout";
  }
  int batch_size() const override { return options_.batch_size; }
  double noise_precision() const override { return options_.noise_precision; }
  ParamMap Params() const override {
    return DropoutOptionsSchema().ToParams(options_);
  }

  absl::Status Initialize(const ModelSpec& spec, const Dataset& train,
                          Rng& rng) override {
    BNN_RETURN_IF_ERROR(spec.Validate());
    if (train.num_rows() < 1) {
      return absl::InvalidArgumentError("training set is empty");
    }
    spec_ = spec;
    layers_ = spec.Layers();
    train_ = &train;
    theta_ = Network<double>(spec).InitialWeights(rng);
    m_.setZero(theta_.size());
    v_.setZero(theta_.size());
    t_ = 0;
    return absl::OkStatus();
  }

  absl::StatusOr<StepStats> Step(const std::vector<int64_t>& batch,
                                 Rng& rng) override {
    ++t_;
    const int b = static_cast<int>(batch.size());
    const int num = static_cast<int>(layers_.size());
    const double keep = 1.0 - options_.dropout;
    inputs_.resize(num);
    pre_.resize(num);
    masks_.resize(num);
    Eigen::MatrixXd h(b, spec_.input_dim);
    for (int n = 0; n < b; ++n)
      for (int f = 0; f < spec_.input_dim; ++f)
        h(n, f) = train_->row(batch[n])[f];
    for (int l = 0; l < num; ++l) {
      const LayerShape& s = layers_[l];
      masks_[l].setOnes(b, s.in);
      if (Dropped(l)) {
        for (Eigen::Index j = 0; j < s.in; ++j)
          for (int n = 0; n < b; ++n)
            masks_[l](n, j) =
                rng.Uniform() < options_.dropout ? 0.0 : 1.0 / keep;
      }
      inputs_[l].resize(b, s.in + 1);
      inputs_[l].leftCols(s.in) = h.cwiseProduct(masks_[l]);
      inputs_[l].col(s.in).setOnes();
      pre_[l].noalias() = inputs_[l] * Weights(l).transpose();
      if (l + 1 < num) {
        h.resize(b, s.out);
        Activate(spec_.activations[l], pre_[l], h);
      }
    }
    // Mean NLL over the batch and its gradient.
    const int k = spec_.output_dim;
    Eigen::MatrixXd delta(b, k);
    Eigen::VectorXd f(k), g(k);
    double nll = 0;
    for (int n = 0; n < b; ++n) {
      f = pre_.back().row(n).transpose();
      nll += NegLogLikelihood<double>(spec_.likelihood, f.data(), k,
                                      train_->targets[batch[n]],
                                      options_.noise_precision, g.data());
      delta.row(n) = g.transpose() / b;
    }
    grad_ = options_.weight_decay * theta_;
    for (int l = num - 1; l >= 0; --l) {
      const LayerShape& s = layers_[l];
      Eigen::Map<Eigen::MatrixXd>(grad_.data() + s.offset, s.out, s.in + 1) +=
          delta.transpose() * inputs_[l];
      if (l == 0) break;
      Eigen::MatrixXd below =
          (delta * Weights(l).leftCols(s.in)).cwiseProduct(masks_[l]);
      const Eigen::MatrixXd act = inputs_[l].leftCols(s.in).cwiseQuotient(
          masks_[l].unaryExpr([](double v) { return v == 0 ? 1.0 : v; }));
      MultiplyByDerivative(spec_.activations[l - 1], pre_[l - 1], act, below);
      delta = std::move(below);
    }
    // Adam (Kingma & Ba) with bias correction.
    const double b1 = options_.adam_beta1, b2 = options_.adam_beta2;
    m_ = b1 * m_ + (1 - b1) * grad_;
    v_ = b2 * v_ + (1 - b2) * grad_.cwiseAbs2();
    const double c1 = 1 - std::pow(b1, static_cast<double>(t_));
    const double c2 = 1 - std::pow(b2, static_cast<double>(t_));
    theta_ -= (options_.learning_rate * (m_ / c1).array() /
               ((v_ / c2).array().sqrt() + options_.adam_epsilon))
                  .matrix();
    if (!theta_.allFinite()) {
      return absl::FailedPreconditionError(absl::StrCat(
          name(), " diverged at step ", t_,
          ": weights became non-finite; try a smaller learning_rate"));
    }
    StepStats stats;
    stats.loss = nll / b;
    return stats;
  }

  MemoryEstimate EstimateMemory(const ModelSpec& spec, int64_t num_rows,
                                int64_t) const override {
    const int64_t b = std::min<int64_t>(options_.batch_size, num_rows);
    int64_t inputs = 0;
    for (const LayerShape& shape : spec.Layers()) inputs += shape.in;
    MemoryEstimate e = internal::MinibatchMemory(
        spec, num_rows, {options_.batch_size}, 6,
        "weights, Adam moments, gradient and temporaries", 0);
    e.Add("dropout masks (B x sum of layer inputs)", MulBytes({b, inputs, 8}));
    internal::AddExported("exported posterior (weights)",
                          internal::VectorBytes(1, spec.NumParameters(), 8),
                          &e);
    return e;
  }

  std::unique_ptr<Posterior> ExportPosterior() const override {
    std::vector<bool> flags(layers_.size());
    for (size_t l = 0; l < layers_.size(); ++l)
      flags[l] = Dropped(static_cast<int>(l));
    auto p = DropoutPosterior::Create(spec_, theta_, options_.dropout, flags);
    BNN_CHECK_OK(p.status());
    return std::move(p).value();
  }

 private:
  bool Dropped(int layer) const {
    return options_.dropout > 0 && (layer > 0 || options_.drop_inputs);
  }
  Eigen::Map<const Eigen::MatrixXd> Weights(int l) const {
    return Eigen::Map<const Eigen::MatrixXd>(theta_.data() + layers_[l].offset,
                                             layers_[l].out, layers_[l].in + 1);
  }

  DropoutOptions options_;
  bool map_;
  ModelSpec spec_;
  std::vector<LayerShape> layers_;
  const Dataset* train_ = nullptr;  // not owned; outlives training
  Eigen::VectorXd theta_, m_, v_, grad_;
  int64_t t_ = 0;
  std::vector<Eigen::MatrixXd> inputs_, pre_, masks_;
};

}  // namespace

absl::Status DropoutOptions::Validate() const {
  BNN_RETURN_IF_ERROR(CheckRange("learning_rate", learning_rate, 0, 10));
  BNN_RETURN_IF_ERROR(CheckRange("adam_beta1", adam_beta1, 0, 0.999999, true));
  BNN_RETURN_IF_ERROR(CheckRange("adam_beta2", adam_beta2, 0, 0.999999, true));
  BNN_RETURN_IF_ERROR(CheckPositive("adam_epsilon", adam_epsilon));
  BNN_RETURN_IF_ERROR(CheckRange("weight_decay", weight_decay, 0, 1e6, true));
  BNN_RETURN_IF_ERROR(CheckRange("dropout", dropout, 0, 0.99, true));
  BNN_RETURN_IF_ERROR(CheckIntRange("batch_size", batch_size, 1, 1 << 20));
  return CheckPositive("noise_precision", noise_precision);
}

const OptionsSchema<DropoutOptions>& DropoutOptionsSchema() {
  static const auto* schema = [] {
    auto* s = new OptionsSchema<DropoutOptions>();
    s->Field("learning_rate", &DropoutOptions::learning_rate, "Adam step size")
        .Field("adam_beta1", &DropoutOptions::adam_beta1,
               "Adam first-moment decay")
        .Field("adam_beta2", &DropoutOptions::adam_beta2,
               "Adam second-moment decay")
        .Field("adam_epsilon", &DropoutOptions::adam_epsilon, "Adam epsilon")
        .Field("weight_decay", &DropoutOptions::weight_decay,
               "L2 coefficient added to the gradient")
        .Field("dropout", &DropoutOptions::dropout,
               "drop probability of each layer input unit (map: 0)")
        .Field("drop_inputs", &DropoutOptions::drop_inputs,
               "also drop the raw input features")
        .Field("batch_size", &DropoutOptions::batch_size, "minibatch size")
        .Field("noise_precision", &DropoutOptions::noise_precision,
               "tau, Gaussian noise precision (standardised units)");
    return s;
  }();
  return *schema;
}

absl::StatusOr<std::unique_ptr<VariationalMethod>> CreateDropout(
    const DropoutOptions& options, bool map) {
  BNN_RETURN_IF_ERROR(options.Validate());
  if (map && options.dropout != 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "method 'map' has dropout = 0; got dropout = ", options.dropout,
        " (use mc_dropout)"));
  }
  return std::unique_ptr<VariationalMethod>(new Dropout(options, map));
}

}  // namespace bnn
