// Noisy natural gradient (Zhang et al. 2018, §3): the mean takes noisy
// point-estimate natural-gradient steps preconditioned by an EMA of the true
// Fisher (targets sampled from the model, footnote 1), and the posterior
// covariance is (lambda/N)(F + gamma_in)^-1 with gamma_in = lambda/(N eta),
// sampled around the mean each step:
//
//   w ~ q;  v = grad log p(y | x, w) - gamma_in w   (w: the sampled weights)
//   F <- (1 - beta~) F + beta~ E[g g^T]             (g at sampled targets)
//   mu <- mu + alpha~ (F + gamma)^-1 v~,   gamma = gamma_in + gamma_ex
//
// with v~ the bias-corrected momentum of v, in three structures of F.
#include "bnn/methods/nng.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <limits>
#include <vector>

#include "absl/strings/str_cat.h"
#include <Eigen/Cholesky>

#include "bnn/check.h"
#include "bnn/methods/method.h"
#include "bnn/methods/registry.h"
#include "bnn/model/likelihood.h"
#include "bnn/model/network.h"
#include "bnn/posterior/gaussian_families.h"
#include "bnn/posterior/kronecker_chain.h"
#include "bnn/status.h"

#include "methods/method_memory.h"
#include "methods/method_state.h"
#include "methods/nng/kfac.h"

namespace bnn {
namespace {

// The Gaussian likelihood's noise precision: fixed, or E_q[tau] of a Gamma
// q(tau) (App. C.1) updated by stochastic natural-gradient steps (for a
// conjugate exponential family these move the natural parameters toward
// the minibatch estimate of the optimum: a = a0 + N/2,
// b = b0 + (1/2) sum_i E_q(w)[(y_i - yhat_i)^2]).
class LearnedNoise {
 public:
  explicit LearnedNoise(const PriorOptions& o)
      : learn_(o.noise_model == NoiseModel::kGamma),
        fixed_(o.noise_precision),
        a0_(o.noise_shape),
        b0_(o.noise_rate),
        rho_(o.noise_learning_rate),
        shape_(o.noise_shape),
        rate_(o.noise_rate) {}

  double precision() const { return learn_ ? shape_ / rate_ : fixed_; }

  // q(tau)'s shape and rate (their initial values when not learned).
  void SaveState(internal::StateWriter* w) const {
    w->Scalar("noise_shape", shape_);
    w->Scalar("noise_rate", rate_);
  }
  absl::Status LoadState(const internal::StateReader& r) {
    BNN_RETURN_IF_ERROR(r.Scalar("noise_shape", &shape_));
    return r.Scalar("noise_rate", &rate_);
  }

  // mean_sq_residual: minibatch (and sample) mean of (y - yhat)^2.
  void Update(double mean_sq_residual, int64_t n) {
    if (!learn_) return;
    const double target_shape = a0_ + 0.5 * static_cast<double>(n);
    const double target_rate =
        b0_ + 0.5 * static_cast<double>(n) * mean_sq_residual;
    shape_ = (1 - rho_) * shape_ + rho_ * target_shape;
    rate_ = (1 - rho_) * rate_ + rho_ * target_rate;
  }

 private:
  bool learn_;
  double fixed_, a0_, b0_, rho_;
  double shape_, rate_;
};

class NngBase : public VariationalMethod {
 public:
  explicit NngBase(const NngOptions& options)
      : options_(options), noise_(options.prior) {}

  int batch_size() const override { return options_.batch_size; }
  int samples_per_step() const override { return options_.mc_samples; }
  double noise_precision() const override { return noise_.precision(); }
  ParamMap Params() const override {
    return NngOptionsSchema().ToParams(options_);
  }
  void SetSchedule(int64_t steps_per_epoch, int64_t total_steps) override {
    steps_per_epoch_ = std::max<int64_t>(1, steps_per_epoch);
    total_steps_ = total_steps;
  }

  MemoryEstimate EstimateMemory(const ModelSpec& spec, int64_t num_rows,
                                int64_t) const override {
    // Two backward passes: the likelihood's and the sampled targets' (true
    // Fisher) gradients.
    MemoryEstimate e = internal::MinibatchMemory(
        spec, num_rows, {options_.batch_size, options_.mc_samples, 8, 2}, 6,
        "mean, prior, momentum and step vectors", 1);
    AddFamilyMemory(
        spec,
        std::min<int64_t>(options_.batch_size, num_rows) * options_.mc_samples,
        &e);
    internal::AddCheckpoint(
        "mean, momentum and Fisher statistics",
        AddBytes(internal::VectorBytes(2, spec.NumParameters(), 8),
                 FamilyStateBytes(spec)),
        &e);
    return e;
  }

  // The mean, momentum, t, the noise's q(tau), then the family's Fisher
  // statistics (SaveFamily). The schedule's position is t against the
  // total_steps SetSchedule gives again on resuming.
  absl::Status SaveState(checkpoint::MethodState* state) const override {
    internal::StateWriter w(name(), kStateVersion, state);
    w.Array("mean", mu_);
    w.Array("momentum", momentum_);
    w.Int("t", t_);
    noise_.SaveState(&w);
    SaveFamily(&w);
    return absl::OkStatus();
  }
  absl::Status LoadState(const checkpoint::MethodState& state) override {
    BNN_ASSIGN_OR_RETURN(
        const internal::StateReader r,
        internal::StateReader::Open(state, name(), kStateVersion));
    BNN_RETURN_IF_ERROR(r.Array("mean", &mu_));
    BNN_RETURN_IF_ERROR(r.Array("momentum", &momentum_));
    BNN_RETURN_IF_ERROR(
        r.Int("t", 0, std::numeric_limits<int64_t>::max(), &t_));
    BNN_RETURN_IF_ERROR(noise_.LoadState(r));
    return LoadFamily(r);
  }

  absl::Status Initialize(const ModelSpec& spec, const Dataset& train,
                          Rng& rng) override {
    BNN_RETURN_IF_ERROR(spec.Validate());
    if (train.num_rows() < 1) {
      return absl::InvalidArgumentError("training set is empty");
    }
    network_ = std::make_unique<Network<double>>(spec);
    train_ = &train;
    n_ = static_cast<double>(train.num_rows());
    scale_ = options_.kl_weight / n_;  // lambda / N
    mu_ = network_->InitialWeights(rng);
    const int64_t dim = mu_.size();
    options_.prior.FillPrecisions(spec, &gamma_in_);
    if (!PerParameterPrior()) {
      gamma_in_.setConstant(options_.prior.prior_precision);
    }
    gamma_in_ *= scale_;
    momentum_.setZero(dim);
    t_ = 0;
    return InitializeFisher();
  }

  absl::StatusOr<StepStats> Step(const std::vector<int64_t>& batch,
                                 Rng& rng) override {
    ++t_;
    const int m = static_cast<int>(batch.size());
    const int s_count = options_.mc_samples;
    train_->Gather(batch, &x_, &y_);
    StepStats stats;
    using Clock = std::chrono::steady_clock;
    auto lap = [last = Clock::now()](double* phase) mutable {
      const auto now = Clock::now();
      *phase += std::chrono::duration<double>(now - last).count();
      last = now;
    };
    SampleWeights(s_count, rng, &theta_);
    lap(&stats.phases.sampling);
    const double tau = noise_.precision();
    network_->Forward(x_, theta_, &pass_);
    network_->Backward(y_, tau, theta_, pass_, &grads_, &nll_);
    // v = mean gradient of log p minus the intrinsic decay at the sampled
    // weights, not at the mean (Alg. 1-2).
    grads_.Sum(&v_);
    v_ *= -1.0 / (m * s_count);
    v_ -= gamma_in_.cwiseProduct(theta_.rowwise().mean());
    if (network_->spec().likelihood == Likelihood::kGaussian) {
      double sq = 0;
      for (int r = 0; r < m * s_count; ++r) {
        const double res = y_[r % m] - pass_.output()(r, 0);
        sq += res * res;
      }
      noise_.Update(sq / (m * s_count), train_->num_rows());
    }
    lap(&stats.phases.forward_backward);
    if (t_ % options_.stats_interval == 0) {
      // True Fisher: gradients at targets sampled from the model.
      sampled_.resize(m * s_count);
      const int k = network_->spec().output_dim;
      for (int r = 0; r < m * s_count; ++r) {
        const Eigen::VectorXd f = pass_.output().row(r).transpose();
        sampled_[r] = SampleTarget<double>(network_->spec().likelihood,
                                           f.data(), k, tau, rng);
      }
      network_->Backward(sampled_, tau, theta_, pass_, &fisher_grads_, nullptr);
      lap(&stats.phases.forward_backward);
      UpdateFisher(fisher_grads_);
      lap(&stats.phases.statistics);
    }
    if (t_ % options_.inverse_interval == 0 || t_ == 1) {
      BNN_RETURN_IF_ERROR(RefreshFactors());
      lap(&stats.phases.factorization);
    }
    const double gamma1 = options_.momentum;
    momentum_ = gamma1 * momentum_ + (1 - gamma1) * v_;
    v_ = momentum_ / (1 - std::pow(gamma1, static_cast<double>(t_)));
    Precondition(v_, &update_);
    mu_ += StepSize(v_.dot(update_)) * update_;
    if (!mu_.allFinite()) {
      return absl::FailedPreconditionError(absl::StrCat(
          name(), " diverged at step ", t_,
          ": the mean became non-finite; try a smaller learning_rate"));
    }
    stats.loss = nll_.mean();
    return stats;
  }

 protected:
  // True if biases get bias_prior_precision (false for noisy_kfac).
  virtual bool PerParameterPrior() const { return true; }
  // The family's part of EstimateMemory: Fisher statistics and their
  // factorisations, sampling temporaries and the exported posterior (also
  // set as kept_bytes), for `rows` = M * S rows per step.
  virtual void AddFamilyMemory(const ModelSpec& spec, int64_t rows,
                               MemoryEstimate* e) const = 0;
  // Layout version of the checkpoint state of the three NNG methods.
  static constexpr uint32_t kStateVersion = 1;
  // The family's Fisher statistics and whatever factorisations of them are
  // refreshed on a schedule, in and out of a checkpoint, and their bytes.
  virtual void SaveFamily(internal::StateWriter* w) const = 0;
  virtual absl::Status LoadFamily(const internal::StateReader& r) = 0;
  virtual int64_t FamilyStateBytes(const ModelSpec& spec) const = 0;
  virtual absl::Status InitializeFisher() = 0;
  virtual void SampleWeights(int s, Rng& rng, Eigen::MatrixXd* out) = 0;
  virtual void UpdateFisher(const PerExampleGrads<double>& g) = 0;
  virtual absl::Status RefreshFactors() { return absl::OkStatus(); }
  // out = (F + gamma)^-1 v.
  virtual void Precondition(const Eigen::VectorXd& v, Eigen::VectorXd* out) = 0;

  // alpha~ with the lr drop and, optionally, the KL trust region of C.2:
  // min(alpha~, sqrt(c_k / v^T F~ v)) where v^T F~ v = g^T (F~^-1 g) is the
  // squared damped-Fisher norm of the unit step.
  double StepSize(double natural_norm_sq) const {
    double alpha = options_.learning_rate;
    if (options_.lr_decay_at > 0 &&
        t_ > options_.lr_decay_at * static_cast<double>(total_steps_)) {
      alpha *= options_.lr_decay_factor;
    }
    if (options_.trust_region > 0 && natural_norm_sq > 0) {
      const double epoch = static_cast<double>((t_ - 1) / steps_per_epoch_);
      const double c =
          options_.trust_region * std::pow(options_.trust_region_decay, epoch);
      alpha = std::min(alpha, std::sqrt(c / natural_norm_sq));
    }
    return alpha;
  }

  // Initial Fisher level giving every weight the standard deviation
  // init_std: (lambda/N) / (f0 + gamma_in) = init_std^2.
  double InitialFisher(double gamma_in) const {
    return std::max(
        0.0, scale_ / (options_.init_std * options_.init_std) - gamma_in);
  }

  NngOptions options_;
  LearnedNoise noise_;
  std::unique_ptr<Network<double>> network_;
  const Dataset* train_ = nullptr;  // not owned; outlives training
  double n_ = 0, scale_ = 0;
  Eigen::VectorXd mu_, gamma_in_, momentum_;
  int64_t t_ = 0;
  int64_t steps_per_epoch_ = 1, total_steps_ = 0;

  Eigen::MatrixXd x_, theta_;
  Eigen::VectorXd y_, nll_, v_, update_, sampled_;
  ForwardPass<double> pass_;
  PerExampleGrads<double> grads_, fisher_grads_;
};

// NNG-FFG (Algorithm 1): f is an EMA of squared sampled-target gradients;
// w ~ N(mu, (lambda/N) / (f + gamma_in)); no square root in the
// preconditioner, unlike Adam (eq. 11).
class NoisyAdam final : public NngBase {
 public:
  using NngBase::NngBase;
  absl::string_view name() const override { return "noisy_adam"; }

  std::unique_ptr<Posterior> ExportPosterior() const override {
    auto p = DiagonalGaussianPosterior::Create(
        mu_, (scale_ / (f_ + gamma_in_).array()).matrix());
    BNN_CHECK_OK(p.status());
    return std::move(p).value();
  }

 private:
  absl::Status InitializeFisher() override {
    f_ = gamma_in_.unaryExpr([this](double g) { return InitialFisher(g); });
    return absl::OkStatus();
  }
  void SaveFamily(internal::StateWriter* w) const override {
    w->Array("fisher_diagonal", f_);
  }
  absl::Status LoadFamily(const internal::StateReader& r) override {
    return r.Array("fisher_diagonal", &f_);
  }
  int64_t FamilyStateBytes(const ModelSpec& spec) const override {
    return internal::VectorBytes(1, spec.NumParameters(), sizeof(double));
  }
  void SampleWeights(int s, Rng& rng, Eigen::MatrixXd* out) override {
    const Eigen::VectorXd sd = (scale_ / (f_ + gamma_in_).array()).sqrt();
    out->resize(mu_.size(), s);
    rng.FillNormal(*out);
    *out = (sd.asDiagonal() * *out).colwise() + mu_;
  }
  void UpdateFisher(const PerExampleGrads<double>& g) override {
    g.SquaredSum(&sq_);
    const double b = options_.beta;
    f_ = (1 - b) * f_ + (b / g.count()) * sq_;
  }
  void Precondition(const Eigen::VectorXd& v, Eigen::VectorXd* out) override {
    *out = v.cwiseQuotient(
        (f_ + gamma_in_).array().matrix() +
        Eigen::VectorXd::Constant(v.size(), options_.extrinsic_damping));
  }
  void AddFamilyMemory(const ModelSpec& spec, int64_t,
                       MemoryEstimate* e) const override {
    const int64_t dim = spec.NumParameters();
    // f, the squared sums and the sampling standard deviations.
    e->Add("Fisher diagonal and its temporaries (3 x D)",
           internal::VectorBytes(3, dim, sizeof(double)));
    internal::AddExported("exported posterior (mean, variances)",
                          internal::VectorBytes(2, dim, sizeof(double)), e);
  }

  Eigen::VectorXd f_, sq_;
};

// NNG-MVG (Algorithm 2): per layer, A = E[a a^T] (inputs, bias folded in)
// and S = E[g g^T] (pre-activation gradients at sampled targets);
// Cov(vec W~) = (lambda/N) [A^g_in]^-1 (x) [S^g_in]^-1 with the pi-split
// damping (kfac.h).
class NoisyKfac : public NngBase {
 public:
  using NngBase::NngBase;
  absl::string_view name() const override { return "noisy_kfac"; }

  std::unique_ptr<Posterior> ExportPosterior() const override {
    std::vector<KroneckerPosterior::Layer> layers;
    const auto& shapes = network_->layers();
    for (size_t l = 0; l < shapes.size(); ++l) {
      // C_in = (lambda/N) P_A P_A^T, C_out = P_S P_S^T.
      const Eigen::MatrixXd pa =
          std::sqrt(scale_) * factors_[l].InputRoot(gamma_in_[0]);
      const Eigen::MatrixXd ps = factors_[l].OutputRoot(gamma_in_[0]);
      const Eigen::MatrixXd c_in = pa * pa.transpose();
      const Eigen::MatrixXd c_out = ps * ps.transpose();
      layers.push_back(
          {Eigen::Map<const Eigen::MatrixXd>(mu_.data() + shapes[l].offset,
                                             shapes[l].out, shapes[l].in + 1),
           Eigen::LLT<Eigen::MatrixXd>(c_out).matrixL(),
           Eigen::LLT<Eigen::MatrixXd>(c_in).matrixL()});
    }
    auto p = KroneckerPosterior::Create(network_->spec(), std::move(layers));
    BNN_CHECK_OK(p.status());
    return std::move(p).value();
  }

 protected:
  bool PerParameterPrior() const override { return false; }

  absl::Status InitializeFisher() override {
    // A0 = S0 = c I with (lambda/N) / (c + sqrt(g_in))^2 = init_std^2.
    const double c = std::max(
        0.0, std::sqrt(scale_) / options_.init_std - std::sqrt(gamma_in_[0]));
    factors_ = internal::InitialKfacFactors(network_->layers(), c);
    return internal::RefreshKfacFactors(&factors_);
  }
  absl::Status RefreshFactors() override {
    return internal::RefreshKfacFactors(&factors_);
  }
  // Per layer A and S, and their eigendecompositions and pi as of the last
  // refresh (every T_inv = inverse_interval steps, Zhang et al. 2018,
  // Alg. 2: not those of the current A and S).
  void SaveFamily(internal::StateWriter* w) const override {
    for (size_t l = 0; l < factors_.size(); ++l) {
      const internal::KfacFactors& f = factors_[l];
      const std::string p = absl::StrCat("layer", l, ".");
      w->Array(p + "a", f.a);
      w->Array(p + "s", f.s);
      w->Array(p + "qa", f.qa);
      w->Array(p + "qs", f.qs);
      w->Array(p + "da", f.da);
      w->Array(p + "ds", f.ds);
      w->Scalar(p + "pi", f.pi);
    }
  }
  absl::Status LoadFamily(const internal::StateReader& r) override {
    for (size_t l = 0; l < factors_.size(); ++l) {
      internal::KfacFactors& f = factors_[l];
      const std::string p = absl::StrCat("layer", l, ".");
      BNN_RETURN_IF_ERROR(r.Array(p + "a", &f.a));
      BNN_RETURN_IF_ERROR(r.Array(p + "s", &f.s));
      BNN_RETURN_IF_ERROR(r.Array(p + "qa", &f.qa));
      BNN_RETURN_IF_ERROR(r.Array(p + "qs", &f.qs));
      BNN_RETURN_IF_ERROR(r.Array(p + "da", &f.da));
      BNN_RETURN_IF_ERROR(r.Array(p + "ds", &f.ds));
      BNN_RETURN_IF_ERROR(r.Scalar(p + "pi", &f.pi));
    }
    return absl::OkStatus();
  }
  int64_t FamilyStateBytes(const ModelSpec& spec) const override {
    int64_t values = 0;
    for (const LayerShape& shape : spec.Layers()) {
      const int64_t a = shape.in + 1, s = shape.out;
      values += 2 * (a * a + s * s) + a + s;
    }
    return MulBytes({values, sizeof(double)});
  }
  void SampleWeights(int s, Rng& rng, Eigen::MatrixXd* out) override {
    internal::SampleKfac(network_->layers(), factors_, mu_, scale_,
                         gamma_in_[0], s, rng, out);
  }
  void UpdateFisher(const PerExampleGrads<double>& g) override {
    internal::UpdateKfacStatistics(g, options_.beta, &factors_);
  }
  void Precondition(const Eigen::VectorXd& v, Eigen::VectorXd* out) override {
    internal::PreconditionKfac(network_->layers(), factors_,
                               gamma_in_[0] + options_.extrinsic_damping, v,
                               out);
  }
  void AddFamilyMemory(const ModelSpec& spec, int64_t,
                       MemoryEstimate* e) const override {
    AddFactorMemory(spec, e);
    int64_t exported = spec.NumParameters();
    for (const LayerShape& shape : spec.Layers()) {
      // Mean, out and in factors.
      exported += shape.size() + int64_t{shape.in + 1} * (shape.in + 1) +
                  int64_t{shape.out} * shape.out;
    }
    internal::AddExported(
        "exported posterior (layer means and Cholesky factors)",
        MulBytes({exported, sizeof(double)}), e);
  }
  // A, S and their eigenvectors per layer; an eigendecomposition, the
  // damped roots and the exported layer's covariances transiently.
  static void AddFactorMemory(const ModelSpec& spec, MemoryEstimate* e) {
    int64_t factors = 0, widest = 0;
    for (const LayerShape& shape : spec.Layers()) {
      const int64_t a = int64_t{shape.in + 1} * (shape.in + 1);
      const int64_t s = int64_t{shape.out} * shape.out;
      factors += a + s;
      widest = std::max(widest, a + s);
    }
    e->Add("Kronecker factors and eigenvectors (2 x sum (in+1)^2 + out^2)",
           internal::VectorBytes(2, factors, sizeof(double)));
    e->Add("factorisation temporaries (largest layer)",
           internal::VectorBytes(6, widest, sizeof(double)));
  }

  std::vector<internal::KfacFactors> factors_;
};

// NNG-BlkTri (§3.5): noisy K-FAC with Martens & Grosse's (2015, §4.3)
// block-tridiagonal approximation of the Fisher. Besides noisy K-FAC's
// per-layer A_l, S_l it keeps the adjacent layers' cross moments
// A_{l,l+1} = E[a_l a_{l+1}^T] and S_{l,l+1} = E[g_l g_{l+1}^T] (the same
// EMA, eq. 12), damps the diagonal blocks as eq. 13 does, and uses the
// approximation F whose inverse is block-tridiagonal (a chain over the
// layers): q = N(mu, (lambda/N) F_{g_in}^-1), sampled through
// F^-1 = Xi^T Lambda Xi, and mean steps F_g^-1 v~ with g = g_in + g_ex
// (kfac.h, BuildKfacChain; kronecker_chain.h). With zero cross moments it
// is noisy K-FAC.
class NngBlkTri final : public NoisyKfac {
 public:
  using NoisyKfac::NoisyKfac;
  absl::string_view name() const override { return "nng_blktri"; }

  std::unique_ptr<Posterior> ExportPosterior() const override {
    auto p =
        KroneckerChainPosterior::Create(network_->spec(), mu_, sample_chain_);
    BNN_CHECK_OK(p.status());
    return std::move(p).value();
  }

 private:
  absl::Status InitializeFisher() override {
    cross_ = internal::InitialKfacCrossFactors(network_->layers());
    BNN_RETURN_IF_ERROR(NoisyKfac::InitializeFisher());
    return RefreshChains();
  }
  absl::Status RefreshFactors() override {
    BNN_RETURN_IF_ERROR(NoisyKfac::RefreshFactors());
    return RefreshChains();
  }
  // The sampling chain (damping g_in, covariance scale lambda/N) and the
  // mean step's (damping g_in + g_ex, scale 1).
  absl::Status RefreshChains() {
    BNN_ASSIGN_OR_RETURN(
        sample_chain_,
        internal::BuildKfacChain(factors_, cross_, gamma_in_[0], scale_));
    BNN_ASSIGN_OR_RETURN(
        update_chain_,
        internal::BuildKfacChain(
            factors_, cross_, gamma_in_[0] + options_.extrinsic_damping, 1.0));
    return absl::OkStatus();
  }
  // Noisy K-FAC's state, the cross moments, and both chains as of the last
  // refresh (built from the factors of that step, not the current ones).
  void SaveFamily(internal::StateWriter* w) const override {
    NoisyKfac::SaveFamily(w);
    for (size_t l = 0; l < cross_.size(); ++l) {
      const std::string p = absl::StrCat("link", l, ".");
      w->Array(p + "a", cross_[l].a);
      w->Array(p + "s", cross_[l].s);
    }
    SaveChain("sample_chain.", sample_chain_, w);
    SaveChain("update_chain.", update_chain_, w);
  }
  absl::Status LoadFamily(const internal::StateReader& r) override {
    BNN_RETURN_IF_ERROR(NoisyKfac::LoadFamily(r));
    for (size_t l = 0; l < cross_.size(); ++l) {
      const std::string p = absl::StrCat("link", l, ".");
      BNN_RETURN_IF_ERROR(r.Array(p + "a", &cross_[l].a));
      BNN_RETURN_IF_ERROR(r.Array(p + "s", &cross_[l].s));
    }
    BNN_RETURN_IF_ERROR(LoadChain("sample_chain.", r, &sample_chain_));
    return LoadChain("update_chain.", r, &update_chain_);
  }
  static void SaveChain(const std::string& prefix, const KroneckerChain& c,
                        internal::StateWriter* w) {
    for (size_t l = 0; l < c.layers.size(); ++l) {
      const std::string p = absl::StrCat(prefix, "layer", l, ".");
      w->Array(p + "out_root", c.layers[l].out_root);
      w->Array(p + "in_root", c.layers[l].in_root);
      w->Array(p + "out_coupling", c.layers[l].out_coupling);
      w->Array(p + "in_coupling", c.layers[l].in_coupling);
    }
    for (size_t l = 0; l < c.links.size(); ++l) {
      const std::string p = absl::StrCat(prefix, "link", l, ".");
      w->Array(p + "psi_out", c.links[l].psi_out);
      w->Array(p + "psi_in", c.links[l].psi_in);
    }
  }
  // Into `c`, which Initialize() gave the model's shapes; checked as a
  // posterior's chain is.
  absl::Status LoadChain(const std::string& prefix,
                         const internal::StateReader& r,
                         KroneckerChain* c) const {
    for (size_t l = 0; l < c->layers.size(); ++l) {
      const std::string p = absl::StrCat(prefix, "layer", l, ".");
      BNN_RETURN_IF_ERROR(r.Array(p + "out_root", &c->layers[l].out_root));
      BNN_RETURN_IF_ERROR(r.Array(p + "in_root", &c->layers[l].in_root));
      BNN_RETURN_IF_ERROR(
          r.Array(p + "out_coupling", &c->layers[l].out_coupling));
      BNN_RETURN_IF_ERROR(
          r.Array(p + "in_coupling", &c->layers[l].in_coupling));
    }
    for (size_t l = 0; l < c->links.size(); ++l) {
      const std::string p = absl::StrCat(prefix, "link", l, ".");
      BNN_RETURN_IF_ERROR(r.Array(p + "psi_out", &c->links[l].psi_out));
      BNN_RETURN_IF_ERROR(r.Array(p + "psi_in", &c->links[l].psi_in));
    }
    if (absl::Status s = c->Check(network_->layers()); !s.ok()) {
      return r.Error(s.message());
    }
    return absl::OkStatus();
  }
  int64_t FamilyStateBytes(const ModelSpec& spec) const override {
    return AddBytes(NoisyKfac::FamilyStateBytes(spec),
                    MulBytes({ExtraValues(spec), sizeof(double)}));
  }
  // One chain: per layer two roots and two couplings, per link two Psi
  // factors.
  static int64_t ChainValues(const ModelSpec& spec) {
    const std::vector<LayerShape> shapes = spec.Layers();
    int64_t values = 0;
    for (size_t l = 0; l < shapes.size(); ++l) {
      const int64_t a = shapes[l].in + 1, s = shapes[l].out;
      values += a * a + s * s + a + s;
      if (l + 1 < shapes.size()) {
        values += a * (shapes[l + 1].in + 1) + s * shapes[l + 1].out;
      }
    }
    return values;
  }
  // The cross moments (shaped as one chain's Psi factors) and two chains.
  static int64_t ExtraValues(const ModelSpec& spec) {
    const std::vector<LayerShape> shapes = spec.Layers();
    int64_t cross = 0;
    for (size_t l = 0; l + 1 < shapes.size(); ++l) {
      cross += int64_t{shapes[l].in + 1} * (shapes[l + 1].in + 1) +
               int64_t{shapes[l].out} * shapes[l + 1].out;
    }
    return cross + 2 * ChainValues(spec);
  }
  void SampleWeights(int s, Rng& rng, Eigen::MatrixXd* out) override {
    // The normals noisy K-FAC would draw, mapped through Xi^T R.
    const std::vector<LayerShape>& layers = network_->layers();
    internal::FillKfacNormals(layers, s, rng, out);
    for (int c = 0; c < s; ++c) {
      sample_chain_.Transform(layers, out->col(c).data(), out->col(c).data());
      out->col(c) += mu_;
    }
  }
  void UpdateFisher(const PerExampleGrads<double>& g) override {
    NoisyKfac::UpdateFisher(g);
    internal::UpdateKfacCrossStatistics(g, options_.beta, &cross_);
  }
  void Precondition(const Eigen::VectorXd& v, Eigen::VectorXd* out) override {
    update_chain_.ApplyCovariance(network_->layers(), v, out);
  }
  void AddFamilyMemory(const ModelSpec& spec, int64_t,
                       MemoryEstimate* e) const override {
    AddFactorMemory(spec, e);
    e->Add("cross-layer moments and the two chains",
           MulBytes({ExtraValues(spec), sizeof(double)}));
    internal::AddExported(
        "exported posterior (mean and chain: roots, couplings, Psi factors)",
        MulBytes({spec.NumParameters() + ChainValues(spec), sizeof(double)}),
        e);
  }

  std::vector<internal::KfacCrossFactors> cross_;
  KroneckerChain sample_chain_, update_chain_;
};

// NNG-full (eqs. 9-10): a dense Fisher EMA, Sigma = (lambda/N)(F + g_in)^-1.
class NngFull final : public NngBase {
 public:
  using NngBase::NngBase;
  absl::string_view name() const override { return "nng_full"; }

  std::unique_ptr<Posterior> ExportPosterior() const override {
    Eigen::MatrixXd precision = fisher_ / scale_;
    precision.diagonal() += gamma_in_ / scale_;
    auto p = FullGaussianPosterior::Create(mu_, precision);
    BNN_CHECK_OK(p.status());
    return std::move(p).value();
  }

 private:
  absl::Status InitializeFisher() override {
    const int64_t dim = mu_.size();
    if (dim > FullGaussianPosterior::kMaxDim) {
      return absl::InvalidArgumentError(absl::StrCat(
          "nng_full keeps a dense Fisher; the model has ", dim,
          " parameters and the limit is ", FullGaussianPosterior::kMaxDim,
          " (use noisy_kfac or noisy_adam)"));
    }
    fisher_ = Eigen::MatrixXd::Zero(dim, dim);
    fisher_.diagonal() =
        gamma_in_.unaryExpr([this](double g) { return InitialFisher(g); });
    return RefreshFactors();
  }
  // The Fisher, and the two Cholesky factors as of the last refresh (every
  // T_inv = inverse_interval steps: not those of the current Fisher).
  void SaveFamily(internal::StateWriter* w) const override {
    w->Array("fisher", fisher_);
    w->Llt("sample_llt", sample_llt_);
    w->Llt("update_llt", update_llt_);
  }
  absl::Status LoadFamily(const internal::StateReader& r) override {
    const int64_t dim = mu_.size();
    BNN_RETURN_IF_ERROR(r.Array("fisher", &fisher_));
    BNN_RETURN_IF_ERROR(r.Llt("sample_llt", dim, &sample_llt_));
    return r.Llt("update_llt", dim, &update_llt_);
  }
  int64_t FamilyStateBytes(const ModelSpec& spec) const override {
    const int64_t dim = spec.NumParameters();
    return MulBytes({3, dim, dim, sizeof(double)});
  }
  absl::Status RefreshFactors() override {
    Eigen::MatrixXd sampling = fisher_;
    sampling.diagonal() += gamma_in_;
    sample_llt_.compute(sampling);
    Eigen::MatrixXd damped = sampling;
    damped.diagonal().array() += options_.extrinsic_damping;
    update_llt_.compute(damped);
    if (sample_llt_.info() != Eigen::Success ||
        update_llt_.info() != Eigen::Success) {
      return absl::InternalError("nng_full: the damped Fisher is not SPD");
    }
    return absl::OkStatus();
  }
  void SampleWeights(int s, Rng& rng, Eigen::MatrixXd* out) override {
    Eigen::MatrixXd eps(mu_.size(), s);
    rng.FillNormal(eps);
    // sqrt(lambda/N) L^-T eps has covariance (lambda/N)(F + g_in)^-1.
    sample_llt_.matrixU().solveInPlace(eps);
    *out = (std::sqrt(scale_) * eps).colwise() + mu_;
  }
  void UpdateFisher(const PerExampleGrads<double>& g) override {
    const Eigen::MatrixXd j = g.Materialize();
    const double b = options_.beta;
    fisher_ = (1 - b) * fisher_ + (b / g.count()) * j * j.transpose();
  }
  void Precondition(const Eigen::VectorXd& v, Eigen::VectorXd* out) override {
    *out = update_llt_.solve(v);
  }
  void AddFamilyMemory(const ModelSpec& spec, int64_t rows,
                       MemoryEstimate* e) const override {
    const int64_t dim = spec.NumParameters();
    const int64_t square = MulBytes({dim, dim, sizeof(double)});
    e->Add("Fisher and its two Cholesky factors (3 x D^2)",
           MulBytes({3, square}));
    // Refreshing (sampling and damped copies), or the update's J J^T.
    e->Add("factorisation temporaries (2 x D^2)", MulBytes({2, square}));
    e->Add("per-example gradients J (D x M S)",
           MulBytes({dim, rows, sizeof(double)}));
    // The precision, its copy in the posterior and its Cholesky factor.
    e->Add("exported posterior (3 x D^2)", MulBytes({3, square}));
    e->kept_bytes = MulBytes({2, square});
  }

  Eigen::MatrixXd fisher_;
  internal::RestorableLlt sample_llt_, update_llt_;
};

}  // namespace

absl::Status NngOptions::Validate() const {
  BNN_RETURN_IF_ERROR(CheckIntRange("mc_samples", mc_samples, 1, 10000));
  BNN_RETURN_IF_ERROR(CheckIntRange("batch_size", batch_size, 1, 1 << 20));
  BNN_RETURN_IF_ERROR(CheckRange("learning_rate", learning_rate, 0, 10));
  BNN_RETURN_IF_ERROR(CheckRange("beta", beta, 0, 1));
  BNN_RETURN_IF_ERROR(CheckRange("momentum", momentum, 0, 0.999999, true));
  BNN_RETURN_IF_ERROR(CheckPositive("kl_weight", kl_weight));
  BNN_RETURN_IF_ERROR(prior.Validate());
  BNN_RETURN_IF_ERROR(
      CheckRange("extrinsic_damping", extrinsic_damping, 0, 1e12, true));
  BNN_RETURN_IF_ERROR(
      CheckIntRange("stats_interval", stats_interval, 1, 1 << 20));
  BNN_RETURN_IF_ERROR(
      CheckIntRange("inverse_interval", inverse_interval, 1, 1 << 20));
  BNN_RETURN_IF_ERROR(CheckRange("init_std", init_std, 0, 100));
  BNN_RETURN_IF_ERROR(CheckRange("lr_decay_at", lr_decay_at, 0, 1, true));
  BNN_RETURN_IF_ERROR(CheckRange("lr_decay_factor", lr_decay_factor, 0, 1));
  BNN_RETURN_IF_ERROR(CheckRange("trust_region", trust_region, 0, 1e6, true));
  return CheckRange("trust_region_decay", trust_region_decay, 0, 1);
}

const OptionsSchema<NngOptions>& NngOptionsSchema() {
  static const auto* schema = [] {
    auto* s = new OptionsSchema<NngOptions>();
    s->Field("mc_samples", &NngOptions::mc_samples,
             "S, weight samples per step")
        .Field("batch_size", &NngOptions::batch_size, "M, minibatch size")
        .Field("learning_rate", &NngOptions::learning_rate,
               "alpha~, mean step size (eq. 10)")
        .Field("beta", &NngOptions::beta, "beta~, Fisher EMA rate (eqs. 9, 12)")
        .Field("momentum", &NngOptions::momentum,
               "beta1, momentum on the mean's gradient")
        .Field("kl_weight", &NngOptions::kl_weight, "lambda, KL weight (eq. 1)")
        .Embed(&NngOptions::prior, PriorOptionsSchema(),
               {"prior_precision", "bias_prior_precision"},
               {{"prior_precision", "1/eta, spherical prior precision"},
                {"bias_prior_precision",
                 "bias prior precision (noisy_adam, nng_full)"}})
        .Field("extrinsic_damping", &NngOptions::extrinsic_damping,
               "gamma_ex, mean preconditioner only")
        .Embed(&NngOptions::prior, PriorOptionsSchema(),
               {"noise_model", "noise_precision", "noise_shape", "noise_rate",
                "noise_learning_rate"},
               {{"noise_precision",
                 "tau when noise_model=fixed (standardised units)"}})
        .Field("stats_interval", &NngOptions::stats_interval,
               "T_stats, steps between Fisher statistics")
        .Field("inverse_interval", &NngOptions::inverse_interval,
               "T_inv, steps between factor refreshes")
        .Field("init_std", &NngOptions::init_std,
               "initial posterior standard deviation")
        .Field("lr_decay_at", &NngOptions::lr_decay_at,
               "fraction of the run after which the step size drops")
        .Field("lr_decay_factor", &NngOptions::lr_decay_factor,
               "step-size multiplier after lr_decay_at")
        .Field("trust_region", &NngOptions::trust_region,
               "c_0 of the KL trust region (C.2); 0 disables")
        .Field("trust_region_decay", &NngOptions::trust_region_decay,
               "zeta, per-epoch decay of the trust region");
    return s;
  }();
  return *schema;
}

void RegisterNng(MethodRegistry& registry) {
  BNN_CHECK_OK(registry.Add(
      "noisy_adam",
      "noisy Adam (NNG-FFG): factorised Gaussian by noisy natural gradient "
      "(Zhang et al. 2018, Alg. 1)",
      NngOptionsSchema(), [](const NngOptions& options) {
        return std::make_unique<NoisyAdam>(options);
      }));
  BNN_CHECK_OK(registry.Add(
      "noisy_kfac",
      "noisy K-FAC (NNG-MVG): per-layer matrix-variate Gaussian by noisy "
      "natural gradient (Zhang et al. 2018, Alg. 2)",
      NngOptionsSchema(), [](const NngOptions& options) {
        return std::make_unique<NoisyKfac>(options);
      }));
  BNN_CHECK_OK(registry.Add(
      "nng_blktri",
      "NNG-BlkTri: noisy K-FAC with the block-tridiagonal Fisher of Martens "
      "& Grosse 2015, a chain over the layers (Zhang et al. 2018, §3.5)",
      NngOptionsSchema(), [](const NngOptions& options) {
        return std::make_unique<NngBlkTri>(options);
      }));
  BNN_CHECK_OK(registry.Add(
      "nng_full",
      "noisy natural gradient with a full covariance (Zhang et al. 2018, eqs. "
      "9-10; D <= 4096)",
      NngOptionsSchema(), [](const NngOptions& options) {
        return std::make_unique<NngFull>(options);
      }));
}

}  // namespace bnn
