#include "bnn/methods/hmc.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"

#include "bnn/check.h"
#include "bnn/methods/method.h"
#include "bnn/methods/registry.h"
#include "bnn/model/network.h"
#include "bnn/posterior/sample_families.h"
#include "bnn/status.h"

#include "methods/method_memory.h"
#include "methods/method_state.h"

namespace bnn {
namespace {

// Dual averaging of log(step size) toward a target acceptance rate
// (Hoffman & Gelman 2014, Alg. 5, with their constants).
class DualAveraging {
 public:
  explicit DualAveraging(double step, double target)
      : mu_(std::log(10 * step)), target_(target), log_step_(std::log(step)) {}

  double step() const { return std::exp(log_step_); }
  double final_step() const { return std::exp(log_avg_); }

  // The adaptation's running state (mu and the target are the options').
  void SaveState(const std::string& prefix, internal::StateWriter* w) const {
    w->Scalar(prefix + "log_step", log_step_);
    w->Scalar(prefix + "log_avg", log_avg_);
    w->Scalar(prefix + "h", h_);
    w->Int(prefix + "m", m_);
  }
  absl::Status LoadState(const std::string& prefix,
                         const internal::StateReader& r) {
    BNN_RETURN_IF_ERROR(r.Scalar(prefix + "log_step", &log_step_));
    BNN_RETURN_IF_ERROR(r.Scalar(prefix + "log_avg", &log_avg_));
    BNN_RETURN_IF_ERROR(r.Scalar(prefix + "h", &h_));
    return r.Int(prefix + "m", 0, std::numeric_limits<int64_t>::max(), &m_);
  }

  void Update(double accept) {
    ++m_;
    const double eta = 1.0 / (m_ + kT0);
    h_ = (1 - eta) * h_ + eta * (target_ - accept);
    log_step_ = mu_ - std::sqrt(static_cast<double>(m_)) / kGamma * h_;
    const double w = std::pow(static_cast<double>(m_), -kKappa);
    log_avg_ = w * log_step_ + (1 - w) * log_avg_;
  }

 private:
  static constexpr double kGamma = 0.05, kT0 = 10, kKappa = 0.75;
  double mu_, target_, log_step_, log_avg_ = 0, h_ = 0;
  int64_t m_ = 0;
};

class Hmc final : public VariationalMethod {
 public:
  explicit Hmc(const HmcOptions& options) : options_(options) {}

  absl::string_view name() const override { return "hmc"; }
  int batch_size() const override { return static_cast<int>(x_.rows()); }
  int samples_per_step() const override { return options_.chains; }
  double noise_precision() const override {
    return options_.prior.noise_precision;
  }
  ParamMap Params() const override {
    return HmcOptionsSchema().ToParams(options_);
  }

  absl::Status Initialize(const ModelSpec& spec, const Dataset& train,
                          Rng& rng) override {
    BNN_RETURN_IF_ERROR(spec.Validate());
    const int64_t n = train.num_rows();
    if (n < 1) return absl::InvalidArgumentError("training set is empty");
    network_ = std::make_unique<Network<double>>(spec);
    const int64_t dim = network_->num_parameters();
    std::vector<int64_t> all(n);
    std::iota(all.begin(), all.end(), 0);
    train.Gather(all, &x_, &y_);
    options_.prior.FillPrecisions(spec, &lambda_);
    theta_.resize(dim, options_.chains);
    for (int c = 0; c < options_.chains; ++c) {
      Rng chain = rng.Fork(c);
      theta_.col(c) = network_->InitialWeights(chain);
    }
    adapt_.assign(options_.chains,
                  DualAveraging(options_.step_size, options_.target_accept));
    step_.assign(options_.chains, options_.step_size);
    kept_.clear();
    t_ = 0;
    Potential(theta_, &energy_, &grad_);
    return absl::OkStatus();
  }

  absl::StatusOr<StepStats> Step(const std::vector<int64_t>&,
                                 Rng& rng) override {
    ++t_;
    const int chains = options_.chains;
    const int64_t dim = theta_.rows();
    Eigen::MatrixXd p(dim, chains);
    rng.FillNormal(p);
    const Eigen::VectorXd kinetic0 =
        0.5 * p.colwise().squaredNorm().transpose();
    // Step sizes jittered uniformly by +-20% each iteration: with a fixed
    // trajectory length a Gaussian direction whose period divides it is
    // explored badly (Neal 2011, §5.4.2.2).
    Eigen::ArrayXd eps(chains);
    for (int c = 0; c < chains; ++c) eps[c] = step_[c] * rng.Uniform(0.8, 1.2);
    Eigen::MatrixXd q = theta_;
    Eigen::VectorXd energy = energy_;
    Eigen::MatrixXd grad = grad_;
    // Leapfrog: half momentum step, L position/momentum steps, half step.
    p -= 0.5 * grad * eps.matrix().asDiagonal();
    for (int l = 0; l < options_.leapfrog_steps; ++l) {
      q += p * eps.matrix().asDiagonal();
      Potential(q, &energy, &grad);
      const double scale = l + 1 < options_.leapfrog_steps ? 1.0 : 0.5;
      p -= scale * grad * eps.matrix().asDiagonal();
    }
    const Eigen::VectorXd kinetic1 =
        0.5 * p.colwise().squaredNorm().transpose();
    for (int c = 0; c < chains; ++c) {
      const double log_ratio =
          (energy_[c] + kinetic0[c]) - (energy[c] + kinetic1[c]);
      const double accept =
          std::isfinite(log_ratio) ? std::min(1.0, std::exp(log_ratio)) : 0.0;
      if (rng.Uniform() < accept) {
        theta_.col(c) = q.col(c);
        energy_[c] = energy[c];
        grad_.col(c) = grad.col(c);
      }
      if (t_ <= options_.warmup) {
        adapt_[c].Update(accept);
        step_[c] =
            t_ == options_.warmup ? adapt_[c].final_step() : adapt_[c].step();
      }
    }
    if (t_ > options_.warmup && (t_ - options_.warmup) % options_.thin == 0 &&
        static_cast<int>(kept_.size()) < options_.max_samples * chains) {
      for (int c = 0; c < chains; ++c) kept_.push_back(theta_.col(c));
    }
    StepStats stats;
    stats.loss = nll_mean_;
    return stats;
  }

  MemoryEstimate EstimateMemory(const ModelSpec& spec, int64_t num_rows,
                                int64_t total_steps) const override {
    const int64_t dim = spec.NumParameters();
    const int64_t chains = options_.chains;
    // Every iteration runs all N rows for every chain (batch_size() is N):
    // the prior precisions; per chain the state, gradient, momentum and
    // proposal with its gradient.
    MemoryEstimate e = internal::MinibatchMemory(
        spec, num_rows, {num_rows, chains}, 1, "prior precisions", 5);
    const int64_t iterations =
        std::max<int64_t>(0, total_steps - options_.warmup) / options_.thin;
    const int64_t kept =
        std::max<int64_t>(1,
                          std::min<int64_t>(options_.max_samples, iterations)) *
        chains;
    // The kept states, and the exported D x K copy of them.
    e.Add(absl::StrCat("kept samples (D x ", kept, ")"),
          internal::VectorBytes(kept, dim, 8));
    internal::AddExported("exported sample set",
                          internal::VectorBytes(kept + 1, dim, 8), &e);
    // The kept samples and the chains' states and gradients (the sample set
    // exported to save the samples is within the 4 x state).
    internal::AddCheckpoint("kept samples and chain states",
                            internal::VectorBytes(kept + 2 * chains, dim, 8),
                            &e);
    return e;
  }

  // Per chain the state, its potential and gradient, the step size and its
  // dual-averaging state; the kept samples (the sample-set posterior in the
  // snapshot's encoding, once there are any) and t. (The loss a step
  // reports is that of its own last proposal.)
  absl::Status SaveState(checkpoint::MethodState* state) const override {
    internal::StateWriter w(name(), kStateVersion, state);
    w.Array("theta", theta_);
    w.Array("grad", grad_);
    w.Array("energy", energy_);
    w.Array("step_size", step_);
    for (size_t c = 0; c < adapt_.size(); ++c) {
      adapt_[c].SaveState(absl::StrCat("chain", c, ".adapt."), &w);
    }
    w.Int("kept", static_cast<int64_t>(kept_.size()));
    if (!kept_.empty()) w.Posterior(*ExportPosterior());
    w.Int("t", t_);
    return absl::OkStatus();
  }
  absl::Status LoadState(const checkpoint::MethodState& state) override {
    BNN_ASSIGN_OR_RETURN(
        const internal::StateReader r,
        internal::StateReader::Open(state, name(), kStateVersion));
    BNN_RETURN_IF_ERROR(r.Array("theta", &theta_));
    BNN_RETURN_IF_ERROR(r.Array("grad", &grad_));
    BNN_RETURN_IF_ERROR(r.Array("energy", &energy_));
    BNN_RETURN_IF_ERROR(r.Array("step_size", step_.size(), &step_));
    for (size_t c = 0; c < adapt_.size(); ++c) {
      BNN_RETURN_IF_ERROR(
          adapt_[c].LoadState(absl::StrCat("chain", c, ".adapt."), r));
    }
    int64_t kept = 0;
    BNN_RETURN_IF_ERROR(r.Int(
        "kept", 0, int64_t{options_.max_samples} * options_.chains, &kept));
    kept_.clear();
    if (kept > 0) {
      BNN_ASSIGN_OR_RETURN(const std::unique_ptr<Posterior> posterior,
                           r.Posterior(network_->spec()));
      const auto* set = dynamic_cast<const SampleSetPosterior*>(&*posterior);
      if (set == nullptr || set->samples().cols() != kept) {
        return r.Error(
            absl::StrCat("the posterior is not a set of ", kept, " samples"));
      }
      for (Eigen::Index k = 0; k < kept; ++k) {
        kept_.push_back(set->samples().col(k));
      }
    }
    return r.Int("t", 0, std::numeric_limits<int64_t>::max(), &t_);
  }

  std::unique_ptr<Posterior> ExportPosterior() const override {
    // Before any post-warm-up state exists, the chains' current states.
    Eigen::MatrixXd samples;
    if (kept_.empty()) {
      samples = theta_;
    } else {
      samples.resize(theta_.rows(), static_cast<Eigen::Index>(kept_.size()));
      for (size_t k = 0; k < kept_.size(); ++k) samples.col(k) = kept_[k];
    }
    auto p = SampleSetPosterior::Create(std::move(samples));
    BNN_CHECK_OK(p.status());
    return std::move(p).value();
  }

 private:
  // Layout version of HMC's checkpoint state.
  static constexpr uint32_t kStateVersion = 1;

  // U(w) = -log p(D | w) - log p(w) (up to a constant) and its gradient for
  // every column of `theta` (one forward/backward for all chains).
  void Potential(const Eigen::MatrixXd& theta, Eigen::VectorXd* energy,
                 Eigen::MatrixXd* grad) {
    network_->Forward(x_, theta, &pass_);
    network_->Backward(y_, options_.prior.noise_precision, theta, pass_,
                       &grads_, &nll_);
    grads_.SumPerSample(static_cast<int>(theta.cols()), grad);
    *grad += lambda_.asDiagonal() * theta;
    const int64_t n = x_.rows();
    energy->resize(theta.cols());
    for (Eigen::Index c = 0; c < theta.cols(); ++c) {
      (*energy)[c] = nll_.segment(c * n, n).sum() +
                     0.5 * theta.col(c).dot(lambda_.cwiseProduct(theta.col(c)));
    }
    nll_mean_ = nll_.mean();
  }

  HmcOptions options_;
  std::unique_ptr<Network<double>> network_;
  Eigen::MatrixXd x_;
  Eigen::VectorXd y_, lambda_;
  Eigen::MatrixXd theta_, grad_;  // current state per chain (columns)
  Eigen::VectorXd energy_;
  std::vector<DualAveraging> adapt_;
  std::vector<double> step_;
  std::vector<Eigen::VectorXd> kept_;
  int64_t t_ = 0;
  double nll_mean_ = 0;
  ForwardPass<double> pass_;
  PerExampleGrads<double> grads_;
  Eigen::VectorXd nll_;
};

}  // namespace

absl::Status HmcOptions::Validate() const {
  BNN_RETURN_IF_ERROR(CheckIntRange("chains", chains, 1, 256));
  BNN_RETURN_IF_ERROR(CheckIntRange("warmup", warmup, 0, 10000000));
  BNN_RETURN_IF_ERROR(CheckIntRange("thin", thin, 1, 1000000));
  BNN_RETURN_IF_ERROR(
      CheckIntRange("leapfrog_steps", leapfrog_steps, 1, 10000));
  BNN_RETURN_IF_ERROR(CheckRange("step_size", step_size, 0, 10));
  BNN_RETURN_IF_ERROR(CheckRange("target_accept", target_accept, 0, 0.999));
  BNN_RETURN_IF_ERROR(prior.Validate());
  return CheckIntRange("max_samples", max_samples, 1, 10000000);
}

const OptionsSchema<HmcOptions>& HmcOptionsSchema() {
  static const auto* schema = [] {
    auto* s = new OptionsSchema<HmcOptions>();
    s->Field("chains", &HmcOptions::chains, "independent chains")
        .Field("warmup", &HmcOptions::warmup,
               "adaptation iterations per chain (discarded)")
        .Field("thin", &HmcOptions::thin, "keep every thin-th state")
        .Field("leapfrog_steps", &HmcOptions::leapfrog_steps,
               "leapfrog steps per iteration")
        .Field("step_size", &HmcOptions::step_size,
               "initial leapfrog step size")
        .Field("target_accept", &HmcOptions::target_accept,
               "target acceptance rate of the adaptation")
        .Embed(&HmcOptions::prior, PriorOptionsSchema(),
               {"prior_precision", "bias_prior_precision", "noise_precision"})
        .Field("max_samples", &HmcOptions::max_samples,
               "kept samples per chain, at most");
    return s;
  }();
  return *schema;
}

void RegisterHmc(MethodRegistry& registry) {
  BNN_CHECK_OK(registry.Add(
      "hmc",
      "Hamiltonian Monte Carlo (multiple chains, dual-averaging step size, "
      "thinning): a sample-set posterior, the evaluation reference",
      HmcOptionsSchema(), [](const HmcOptions& options) {
        return std::make_unique<Hmc>(options);
      }));
}

}  // namespace bnn
