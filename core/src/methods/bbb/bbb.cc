// -ELBO = -E_q[log p(D | theta)] + KL(q || p), theta = mu + sigma .* eps:
//   d/dmu    = (N/(M S)) sum_s g_s + lambda mu
//   d/dsigma = (N/(M S)) sum_s g_s .* eps_s + lambda sigma - 1/sigma
//   d/drho   = d/dsigma .* sigmoid(rho)           (sigma = softplus(rho))
// with g_s the minibatch gradient of -log p at sample s; Adam on (mu, rho).
#include "bnn/methods/bbb.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "absl/strings/str_cat.h"

#include "bnn/check.h"
#include "bnn/methods/method.h"
#include "bnn/methods/registry.h"
#include "bnn/model/likelihood.h"
#include "bnn/model/network.h"
#include "bnn/posterior/gaussian_families.h"
#include "bnn/status.h"

#include "methods/adam.h"
#include "methods/method_memory.h"
#include "methods/method_state.h"

namespace bnn {
namespace {

class Bbb final : public VariationalMethod {
 public:
  explicit Bbb(const BbbOptions& options) : options_(options) {}

  absl::string_view name() const override { return "bbb"; }
  int batch_size() const override { return options_.batch_size; }
  int samples_per_step() const override { return options_.mc_samples; }
  double noise_precision() const override {
    return options_.prior.noise_precision;
  }
  ParamMap Params() const override {
    return BbbOptionsSchema().ToParams(options_);
  }

  absl::Status Initialize(const ModelSpec& spec, const Dataset& train,
                          Rng& rng) override {
    BNN_RETURN_IF_ERROR(spec.Validate());
    if (train.num_rows() < 1) {
      return absl::InvalidArgumentError("training set is empty");
    }
    network_ = std::make_unique<Network<double>>(spec);
    train_ = &train;
    const int64_t dim = spec.NumParameters();
    mu_ = network_->InitialWeights(rng);
    // softplus^-1(s) = log(exp(s) - 1).
    rho_.setConstant(dim, std::log(std::expm1(options_.init_std)));
    options_.prior.FillPrecisions(spec, &lambda_);
    adam_mu_.Reset(dim);
    adam_rho_.Reset(dim);
    t_ = 0;
    return absl::OkStatus();
  }

  absl::StatusOr<StepStats> Step(const std::vector<int64_t>& batch,
                                 Rng& rng) override {
    ++t_;
    const int m = static_cast<int>(batch.size());
    const int s_count = options_.mc_samples;
    const int64_t dim = mu_.size();
    const double c = static_cast<double>(train_->num_rows()) / (m * s_count);

    sigma_ = rho_.unaryExpr([](double r) { return Softplus(r); });
    eps_.resize(dim, s_count);
    rng.FillNormal(eps_);
    theta_ = (sigma_.asDiagonal() * eps_).colwise() + mu_;

    train_->Gather(batch, &x_, &y_);
    network_->Forward(x_, theta_, &pass_);
    network_->Backward(y_, options_.prior.noise_precision, theta_, pass_,
                       &grads_, &nll_);
    grads_.SumPerSample(s_count, &per_sample_);

    grad_mu_ = c * per_sample_.rowwise().sum() + lambda_.cwiseProduct(mu_);
    grad_rho_ =
        (c * per_sample_.cwiseProduct(eps_).rowwise().sum() +
         lambda_.cwiseProduct(sigma_) - sigma_.cwiseInverse())
            .cwiseProduct(rho_.unaryExpr([](double r) { return Sigmoid(r); }));
    const internal::AdamOptions adam = {
        options_.learning_rate, options_.adam_beta1, options_.adam_beta2,
        options_.adam_epsilon};
    adam_mu_.Step(adam, t_, grad_mu_, &mu_);
    adam_rho_.Step(adam, t_, grad_rho_, &rho_);
    if (!mu_.allFinite() || !rho_.allFinite()) {
      return absl::FailedPreconditionError(absl::StrCat(
          "bbb diverged at step ", t_,
          ": parameters became non-finite; try a smaller learning_rate"));
    }
    StepStats stats;
    stats.loss = nll_.mean();
    return stats;
  }

  MemoryEstimate EstimateMemory(const ModelSpec& spec, int64_t num_rows,
                                int64_t) const override {
    // mu, rho, lambda, Adam's moments of both, sigma, the two gradients and
    // their temporaries; the noise, the samples and the per-sample
    // gradients with a temporary.
    MemoryEstimate e = internal::MinibatchMemory(
        spec, num_rows, {options_.batch_size, options_.mc_samples}, 12,
        "variational parameters, Adam moments and gradients", 4);
    internal::AddExported("exported posterior (mean, variances)",
                          internal::VectorBytes(3, spec.NumParameters(), 8),
                          &e);
    internal::AddCheckpoint("mean, rho and Adam moments",
                            internal::VectorBytes(6, spec.NumParameters(), 8),
                            &e);
    return e;
  }

  // mu and rho (sigma = softplus(rho): the exported variances are derived,
  // not the state), Adam's moments of both and t, their shared step count.
  absl::Status SaveState(checkpoint::MethodState* state) const override {
    internal::StateWriter w(name(), kStateVersion, state);
    w.Array("mean", mu_);
    w.Array("rho", rho_);
    adam_mu_.SaveState("mean", &w);
    adam_rho_.SaveState("rho", &w);
    w.Int("t", t_);
    return absl::OkStatus();
  }
  absl::Status LoadState(const checkpoint::MethodState& state) override {
    BNN_ASSIGN_OR_RETURN(
        const internal::StateReader r,
        internal::StateReader::Open(state, name(), kStateVersion));
    BNN_RETURN_IF_ERROR(r.Array("mean", &mu_));
    BNN_RETURN_IF_ERROR(r.Array("rho", &rho_));
    BNN_RETURN_IF_ERROR(adam_mu_.LoadState("mean", r));
    BNN_RETURN_IF_ERROR(adam_rho_.LoadState("rho", r));
    return r.Int("t", 0, std::numeric_limits<int64_t>::max(), &t_);
  }

  std::unique_ptr<Posterior> ExportPosterior() const override {
    const Eigen::VectorXd sigma =
        rho_.unaryExpr([](double r) { return Softplus(r); });
    auto p = DiagonalGaussianPosterior::Create(mu_, sigma.cwiseAbs2());
    BNN_CHECK_OK(p.status());  // softplus > 0 and the state is finite
    return std::move(p).value();
  }

 private:
  // Layout version of BBB's checkpoint state.
  static constexpr uint32_t kStateVersion = 1;

  BbbOptions options_;
  std::unique_ptr<Network<double>> network_;
  const Dataset* train_ = nullptr;  // not owned; outlives training

  Eigen::VectorXd mu_, rho_, lambda_;
  internal::AdamState adam_mu_, adam_rho_;
  int64_t t_ = 0;

  // Per-step workspaces.
  Eigen::MatrixXd x_, eps_, theta_, per_sample_;
  Eigen::VectorXd y_, nll_, sigma_, grad_mu_, grad_rho_;
  ForwardPass<double> pass_;
  PerExampleGrads<double> grads_;
};

}  // namespace

absl::Status BbbOptions::Validate() const {
  BNN_RETURN_IF_ERROR(CheckIntRange("mc_samples", mc_samples, 1, 10000));
  BNN_RETURN_IF_ERROR(CheckIntRange("batch_size", batch_size, 1, 1 << 20));
  BNN_RETURN_IF_ERROR(CheckRange("learning_rate", learning_rate, 0, 10));
  BNN_RETURN_IF_ERROR(CheckRange("adam_beta1", adam_beta1, 0, 0.999999, true));
  BNN_RETURN_IF_ERROR(CheckRange("adam_beta2", adam_beta2, 0, 0.999999, true));
  BNN_RETURN_IF_ERROR(CheckPositive("adam_epsilon", adam_epsilon));
  BNN_RETURN_IF_ERROR(prior.Validate());
  return CheckRange("init_std", init_std, 0, 100);
}

const OptionsSchema<BbbOptions>& BbbOptionsSchema() {
  static const auto* schema = [] {
    auto* s = new OptionsSchema<BbbOptions>();
    s->Field("mc_samples", &BbbOptions::mc_samples,
             "S, reparameterised samples per step")
        .Field("batch_size", &BbbOptions::batch_size, "M, minibatch size")
        .Field("learning_rate", &BbbOptions::learning_rate, "Adam step size")
        .Field("adam_beta1", &BbbOptions::adam_beta1, "Adam first-moment decay")
        .Field("adam_beta2", &BbbOptions::adam_beta2,
               "Adam second-moment decay")
        .Field("adam_epsilon", &BbbOptions::adam_epsilon, "Adam epsilon")
        .Embed(&BbbOptions::prior, PriorOptionsSchema(),
               {"prior_precision", "bias_prior_precision", "noise_precision"})
        .Field("init_std", &BbbOptions::init_std,
               "initial posterior standard deviation");
    return s;
  }();
  return *schema;
}

void RegisterBbb(MethodRegistry& registry) {
  BNN_CHECK_OK(registry.Add(
      "bbb",
      "Bayes by Backprop: mean-field Gaussian VI by reparameterisation "
      "gradients and Adam (Blundell et al. 2015)",
      BbbOptionsSchema(), [](const BbbOptions& options) {
        return std::make_unique<Bbb>(options);
      }));
}

}  // namespace bnn
