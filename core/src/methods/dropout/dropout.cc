// Training uses an independent mask per example and layer (standard dropout,
// inverted: kept units scaled by 1/(1-p)); the exported DropoutPosterior
// draws one mask per weight sample, shared by the rows of a prediction,
// which is MC dropout's weight-space view.
#include "bnn/methods/dropout.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "absl/strings/str_cat.h"

#include "bnn/check.h"
#include "bnn/methods/method.h"
#include "bnn/methods/registry.h"
#include "bnn/model/network.h"
#include "bnn/posterior/sample_families.h"
#include "bnn/status.h"

#include "methods/adam.h"
#include "methods/method_memory.h"
#include "methods/method_state.h"

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
  double noise_precision() const override {
    return options_.prior.noise_precision;
  }
  ParamMap Params() const override {
    return DropoutOptionsSchema().ToParams(options_);
  }

  absl::Status Initialize(const ModelSpec& spec, const Dataset& train,
                          Rng& rng) override {
    BNN_RETURN_IF_ERROR(spec.Validate());
    if (train.num_rows() < 1) {
      return absl::InvalidArgumentError("training set is empty");
    }
    network_ = std::make_unique<Network<double>>(spec);
    train_ = &train;
    theta_ = network_->InitialWeights(rng);
    adam_.Reset(theta_.size());
    t_ = 0;
    return absl::OkStatus();
  }

  absl::StatusOr<StepStats> Step(const std::vector<int64_t>& batch,
                                 Rng& rng) override {
    ++t_;
    const int b = static_cast<int>(batch.size());
    const std::vector<LayerShape>& layers = network_->layers();
    train_->Gather(batch, &x_, &y_);
    // One inverted-dropout mask per example and layer input.
    const double keep = 1.0 - options_.dropout;
    noise_.input_masks.resize(layers.size());
    for (size_t l = 0; l < layers.size(); ++l) {
      Eigen::MatrixXd& mask = noise_.input_masks[l];
      if (!Dropped(static_cast<int>(l))) {
        mask.resize(0, 0);
        continue;
      }
      mask.resize(b, layers[l].in);
      for (Eigen::Index j = 0; j < mask.cols(); ++j)
        for (int n = 0; n < b; ++n)
          mask(n, j) = rng.Uniform() < options_.dropout ? 0.0 : 1.0 / keep;
    }
    // The gradient of the mean minibatch NLL plus weight decay.
    network_->Forward(x_, theta_, &pass_, &noise_);
    network_->Backward(y_, options_.prior.noise_precision, theta_, pass_,
                       &grads_, &nll_);
    grads_.Sum(&grad_);
    grad_ = grad_ / b + options_.weight_decay * theta_;
    adam_.Step({options_.learning_rate, options_.adam_beta1,
                options_.adam_beta2, options_.adam_epsilon},
               t_, grad_, &theta_);
    if (!theta_.allFinite()) {
      return absl::FailedPreconditionError(absl::StrCat(
          name(), " diverged at step ", t_,
          ": weights became non-finite; try a smaller learning_rate"));
    }
    StepStats stats;
    stats.loss = nll_.mean();
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
    internal::AddCheckpoint("weights and Adam moments",
                            internal::VectorBytes(4, spec.NumParameters(), 8),
                            &e);
    return e;
  }

  // The weights (the dropout posterior in the snapshot's encoding), Adam's
  // moments and t.
  absl::Status SaveState(checkpoint::MethodState* state) const override {
    internal::StateWriter w(name(), kStateVersion, state);
    w.Posterior(*ExportPosterior());
    adam_.SaveState("weights", &w);
    w.Int("t", t_);
    return absl::OkStatus();
  }
  absl::Status LoadState(const checkpoint::MethodState& state) override {
    BNN_ASSIGN_OR_RETURN(
        const internal::StateReader r,
        internal::StateReader::Open(state, name(), kStateVersion));
    BNN_ASSIGN_OR_RETURN(const std::unique_ptr<Posterior> posterior,
                         r.Posterior(network_->spec()));
    if (posterior->family() != "dropout") {
      return r.Error("the posterior is not a dropout posterior");
    }
    theta_ = posterior->mean();  // the weights
    BNN_RETURN_IF_ERROR(adam_.LoadState("weights", r));
    return r.Int("t", 0, std::numeric_limits<int64_t>::max(), &t_);
  }

  std::unique_ptr<Posterior> ExportPosterior() const override {
    std::vector<bool> flags(network_->layers().size());
    for (size_t l = 0; l < flags.size(); ++l)
      flags[l] = Dropped(static_cast<int>(l));
    auto p = DropoutPosterior::Create(network_->spec(), theta_,
                                      options_.dropout, flags);
    BNN_CHECK_OK(p.status());
    return std::move(p).value();
  }

 private:
  // Layout version of the MC dropout / MAP checkpoint state.
  static constexpr uint32_t kStateVersion = 1;

  bool Dropped(int layer) const {
    return options_.dropout > 0 && (layer > 0 || options_.drop_inputs);
  }

  DropoutOptions options_;
  bool map_;
  std::unique_ptr<Network<double>> network_;
  const Dataset* train_ = nullptr;  // not owned; outlives training
  Eigen::VectorXd theta_;
  internal::AdamState adam_;
  int64_t t_ = 0;

  // Per-step workspaces.
  Eigen::MatrixXd x_;
  Eigen::VectorXd y_, nll_, grad_;
  LayerNoise<double> noise_;
  ForwardPass<double> pass_;
  PerExampleGrads<double> grads_;
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
  return prior.Validate();
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
        .Embed(&DropoutOptions::prior, PriorOptionsSchema(),
               {"noise_precision"});
    return s;
  }();
  return *schema;
}

void RegisterDropout(MethodRegistry& registry) {
  for (const bool map : {false, true}) {
    DropoutOptions defaults;
    if (map) defaults.dropout = 0;
    BNN_CHECK_OK(registry.Add(
        map ? "map" : "mc_dropout",
        map ? "MAP point estimate by Adam with weight decay (the BALI paper's "
              "baseline; served as a degenerate posterior)"
            : "MC dropout (Gal & Ghahramani 2016): Adam with weight decay; "
              "predictions average over dropout masks",
        DropoutOptionsSchema(),
        [map](const DropoutOptions& options)
            -> absl::StatusOr<std::unique_ptr<VariationalMethod>> {
          if (map && options.dropout != 0) {
            return absl::InvalidArgumentError(absl::StrCat(
                "method 'map' has dropout = 0; got dropout = ", options.dropout,
                " (use mc_dropout)"));
          }
          return std::unique_ptr<VariationalMethod>(new Dropout(options, map));
        },
        defaults));
  }
}

}  // namespace bnn
