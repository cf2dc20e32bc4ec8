// VOGN / VON, full and mean-field (SLANG eq. 2 and App. A): the dense
// baselines SLANG approximates. Everything is double: the full variants are
// limited to FullGaussianPosterior::kMaxDim parameters.
#include "bnn/methods/vogn.h"

#include <algorithm>
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
#include "bnn/status.h"

#include "methods/method_memory.h"
#include "methods/method_state.h"

namespace bnn {
namespace {

enum class Curvature { kEmpiricalFisher, kHessian };
enum class CovarianceStructure { kFull, kDiagonal };

class Vogn final : public VariationalMethod {
 public:
  Vogn(const VognOptions& options, Curvature curvature,
       CovarianceStructure structure)
      : options_(options), curvature_(curvature), structure_(structure) {}

  absl::string_view name() const override {
    const bool full = structure_ == CovarianceStructure::kFull;
    return curvature_ == Curvature::kEmpiricalFisher
               ? (full ? "vogn_full" : "vogn_diag")
               : (full ? "von_full" : "von_diag");
  }
  int batch_size() const override { return options_.batch_size; }
  int samples_per_step() const override { return options_.mc_samples; }
  double noise_precision() const override {
    return options_.prior.noise_precision;
  }
  ParamMap Params() const override {
    return VognOptionsSchema().ToParams(options_);
  }

  absl::Status Initialize(const ModelSpec& spec, const Dataset& train,
                          Rng& rng) override {
    BNN_RETURN_IF_ERROR(spec.Validate());
    const int64_t dim = spec.NumParameters();
    if (full() && dim > FullGaussianPosterior::kMaxDim) {
      return absl::InvalidArgumentError(absl::StrCat(
          name(), " keeps a dense D x D precision; the model has ", dim,
          " parameters and the limit is ", FullGaussianPosterior::kMaxDim,
          " (use slang or a _diag method)"));
    }
    if (curvature_ == Curvature::kHessian && !spec.hidden_sizes.empty()) {
      return absl::InvalidArgumentError(
          absl::StrCat(name(),
                       " uses the exact Hessian, available for models without "
                       "hidden layers (logistic/linear regression); use the "
                       "empirical-Fisher variant vogn_",
                       full() ? "full" : "diag"));
    }
    if (train.num_rows() < 1) {
      return absl::InvalidArgumentError("training set is empty");
    }
    network_ = std::make_unique<Network<double>>(spec);
    train_ = &train;
    mu_ = network_->InitialWeights(rng);
    options_.prior.FillPrecisions(spec, &prior_diag_);
    prior_mean_.setZero(dim);
    prior_full_.resize(0, 0);
    if (full()) {
      precision_ =
          options_.init_precision * Eigen::MatrixXd::Identity(dim, dim);
    } else {
      diag_.setConstant(dim, options_.init_precision);
    }
    momentum_.setZero(dim);
    t_ = 0;
    return absl::OkStatus();
  }

  absl::Status WarmStart(const Posterior& posterior, bool as_prior) override {
    const int64_t dim = mu_.size();
    if (posterior.dim() != dim) {
      return absl::InvalidArgumentError(
          absl::StrCat("warm start: the posterior has ", posterior.dim(),
                       " parameters; the model has ", dim));
    }
    const auto* full_parent =
        dynamic_cast<const FullGaussianPosterior*>(&posterior);
    if (full_parent == nullptr && posterior.family() != "diagonal") {
      return absl::InvalidArgumentError(
          absl::StrCat(name(),
                       " can warm-start from a full or diagonal "
                       "posterior; the parent's is ",
                       posterior.family()));
    }
    mu_ = posterior.mean();
    const Eigen::VectorXd inv_var =
        posterior.MarginalVariances().cwiseInverse();
    if (full()) {
      precision_ = full_parent != nullptr
                       ? full_parent->precision()
                       : Eigen::MatrixXd(inv_var.asDiagonal());
    } else {
      // The mean-field precision matching the parent's marginals.
      diag_ = inv_var;
    }
    if (as_prior) {
      prior_mean_ = mu_;
      if (full() && full_parent != nullptr) {
        prior_full_ = full_parent->precision();
        prior_diag_.setZero(dim);
      } else {
        prior_diag_ = inv_var;
      }
    }
    momentum_.setZero(dim);
    t_ = 0;
    return absl::OkStatus();
  }

  absl::StatusOr<StepStats> Step(const std::vector<int64_t>& batch,
                                 Rng& rng) override {
    ++t_;
    const double decay =
        options_.decay > 0
            ? 1.0 + std::pow(static_cast<double>(t_), options_.decay)
            : 1.0;
    const double alpha = options_.learning_rate / decay;
    const double beta = options_.beta / decay;
    const int m = static_cast<int>(batch.size());
    const int s_count = options_.mc_samples;
    const int64_t dim = mu_.size();
    const double c = static_cast<double>(train_->num_rows()) / (m * s_count);

    // theta_s ~ N(mu, P^-1).
    eps_.resize(dim, s_count);
    rng.FillNormal(eps_);
    if (full()) {
      llt_.compute(precision_);
      if (llt_.info() != Eigen::Success) {
        return Diverged("the precision lost positive definiteness");
      }
      llt_.matrixU().solveInPlace(eps_);  // L^-T eps: covariance P^-1
    } else {
      eps_ = diag_.cwiseSqrt().cwiseInverse().asDiagonal() * eps_;
    }
    theta_ = eps_.colwise() + mu_;

    train_->Gather(batch, &x_, &y_);
    network_->Forward(x_, theta_, &pass_);
    network_->Backward(y_, options_.prior.noise_precision, theta_, pass_,
                       &grads_, &nll_);
    grads_.Sum(&ghat_);
    ghat_ *= c;

    // P <- (1 - b) P + b (C + Lambda_prior).
    if (full()) {
      FullCurvature(c);
      precision_ *= 1.0 - beta;
      precision_.noalias() += beta * curvature_full_;
      precision_.diagonal() += beta * prior_diag_;
      if (prior_full_.size() > 0) precision_ += beta * prior_full_;
    } else {
      DiagCurvature(c);
      diag_ = (1.0 - beta) * diag_ + beta * (curvature_diag_ + prior_diag_);
    }

    const double gamma = options_.momentum;
    momentum_ = gamma * momentum_ + (1.0 - gamma) * ghat_;
    const double correction = 1.0 - std::pow(gamma, static_cast<double>(t_));
    offset_ = mu_ - prior_mean_;
    rhs_ = momentum_ / correction + prior_diag_.cwiseProduct(offset_);
    if (prior_full_.size() > 0) rhs_ += prior_full_ * offset_;
    if (full()) {
      llt_.compute(precision_);
      if (llt_.info() != Eigen::Success) {
        return Diverged("the precision lost positive definiteness");
      }
      mu_ -= alpha * llt_.solve(rhs_);
    } else {
      mu_ -= alpha * rhs_.cwiseQuotient(diag_);
    }
    if (!mu_.allFinite()) return Diverged("the mean became non-finite");
    StepStats stats;
    stats.loss = nll_.mean();
    return stats;
  }

  MemoryEstimate EstimateMemory(const ModelSpec& spec, int64_t num_rows,
                                int64_t) const override {
    const int64_t dim = spec.NumParameters();
    const int64_t rows =
        std::min<int64_t>(options_.batch_size, num_rows) * options_.mc_samples;
    MemoryEstimate e = internal::MinibatchMemory(
        spec, num_rows, {options_.batch_size, options_.mc_samples}, 10,
        "mean, prior, momentum, curvature and step vectors", 2);
    int64_t exported = internal::VectorBytes(3, dim, 8);
    if (full()) {
      const int64_t square = MulBytes({dim, dim, 8});
      e.Add("precision, its Cholesky factor and the curvature (3 x D^2)",
            MulBytes({3, square}));
      if (curvature_ == Curvature::kEmpiricalFisher) {
        e.Add("per-example gradients J (D x M S)", MulBytes({dim, rows, 8}));
      }
      exported = AddBytes(MulBytes({2, square}), MulBytes({dim, 8}));
    }
    internal::AddExported("exported posterior", exported, &e);
    // Mean, momentum and prior vectors, and P or its diagonal. (Saving a
    // full P exports the posterior, P and its Cholesky factor, beside the
    // message: within the 4 x state.)
    internal::AddCheckpoint("mean, precision, momentum and prior",
                            full() ? AddBytes(internal::VectorBytes(4, dim, 8),
                                              MulBytes({dim, dim, 8}))
                                   : internal::VectorBytes(5, dim, 8),
                            &e);
    return e;
  }

  // The posterior (full: mean and precision in the snapshot's encoding;
  // mean-field: the mean and the diagonal precision, whose exported
  // variances are its inverse), the momentum, t and the prior (a warm
  // start's mean and dense precision). The Cholesky factor is recomputed
  // from P by every step before use.
  absl::Status SaveState(checkpoint::MethodState* state) const override {
    internal::StateWriter w(name(), kStateVersion, state);
    if (full()) {
      w.Posterior(*ExportPosterior());
    } else {
      w.Array("mean", mu_);
      w.Array("precision_diagonal", diag_);
    }
    w.Array("momentum", momentum_);
    w.Array("prior_diagonal", prior_diag_);
    w.Array("prior_mean", prior_mean_);
    w.Array("prior_full", prior_full_);
    w.Int("t", t_);
    return absl::OkStatus();
  }
  absl::Status LoadState(const checkpoint::MethodState& state) override {
    BNN_ASSIGN_OR_RETURN(
        const internal::StateReader r,
        internal::StateReader::Open(state, name(), kStateVersion));
    if (full()) {
      BNN_ASSIGN_OR_RETURN(const std::unique_ptr<Posterior> posterior,
                           r.Posterior(network_->spec()));
      const auto* p = dynamic_cast<const FullGaussianPosterior*>(&*posterior);
      if (p == nullptr) return r.Error("the posterior is not a full Gaussian");
      mu_ = p->mean();
      precision_ = p->precision();
    } else {
      BNN_RETURN_IF_ERROR(r.Array("mean", &mu_));
      BNN_RETURN_IF_ERROR(r.Array("precision_diagonal", &diag_));
    }
    BNN_RETURN_IF_ERROR(r.Array("momentum", &momentum_));
    BNN_RETURN_IF_ERROR(r.Array("prior_diagonal", &prior_diag_));
    BNN_RETURN_IF_ERROR(r.Array("prior_mean", &prior_mean_));
    // Empty, or D x D after a warm start with a full prior (WarmStart()
    // gave it that shape again).
    BNN_RETURN_IF_ERROR(r.Array("prior_full", &prior_full_));
    return r.Int("t", 0, std::numeric_limits<int64_t>::max(), &t_);
  }

  std::unique_ptr<Posterior> ExportPosterior() const override {
    if (full()) {
      auto p = FullGaussianPosterior::Create(mu_, precision_);
      BNN_CHECK_OK(p.status());  // P is SPD after every successful step
      return std::move(p).value();
    }
    auto p = DiagonalGaussianPosterior::Create(mu_, diag_.cwiseInverse());
    BNN_CHECK_OK(p.status());
    return std::move(p).value();
  }

 private:
  // Layout version of the VOGN / VON checkpoint state.
  static constexpr uint32_t kStateVersion = 1;

  bool full() const { return structure_ == CovarianceStructure::kFull; }

  // c * sum_i of the per-example curvature, dense.
  void FullCurvature(double c) {
    if (curvature_ == Curvature::kEmpiricalFisher) {
      const Eigen::MatrixXd j = grads_.Materialize();
      curvature_full_.noalias() = c * j * j.transpose();
      return;
    }
    // Linear model: H_i = (x~ x~^T) (x) d2l/df2, with theta = vec(W~) column-
    // major, so entry ((a, k), (b, l)) = x~_a x~_b A_kl.
    const Eigen::MatrixXd& x = pass_.inputs[0];  // (M S) x (in + 1)
    const int k = network_->spec().output_dim;
    const int64_t cols = x.cols();
    if (k == 1) {  // logistic/linear regression: c X~^T diag(a) X~
      OutputCurvatures();
      curvature_full_.noalias() =
          c * x.transpose() * (row_curvature_.asDiagonal() * x);
      return;
    }
    curvature_full_.setZero(mu_.size(), mu_.size());
    std::vector<double> hess(k * k);
    Eigen::MatrixXd xxt(cols, cols);
    for (int r = 0; r < x.rows(); ++r) {
      const Eigen::VectorXd f = pass_.output().row(r).transpose();
      NegLogLikelihoodHessian<double>(network_->spec().likelihood, f.data(), k,
                                      options_.prior.noise_precision,
                                      hess.data());
      xxt.noalias() = x.row(r).transpose() * x.row(r);
      for (int64_t a = 0; a < cols; ++a)
        for (int64_t b = 0; b < cols; ++b)
          for (int kk = 0; kk < k; ++kk)
            for (int l = 0; l < k; ++l)
              curvature_full_(a * k + kk, b * k + l) +=
                  c * xxt(a, b) * hess[kk * k + l];
    }
  }

  void DiagCurvature(double c) {
    if (curvature_ == Curvature::kEmpiricalFisher) {
      grads_.SquaredSum(&curvature_diag_);
      curvature_diag_ *= c;
      return;
    }
    const Eigen::MatrixXd& x = pass_.inputs[0];
    const int k = network_->spec().output_dim;
    if (k == 1) {
      OutputCurvatures();
      curvature_diag_.noalias() =
          c * x.cwiseAbs2().transpose() * row_curvature_;
      return;
    }
    curvature_diag_.setZero(mu_.size());
    std::vector<double> hess(k * k);
    for (int r = 0; r < x.rows(); ++r) {
      const Eigen::VectorXd f = pass_.output().row(r).transpose();
      NegLogLikelihoodHessian<double>(network_->spec().likelihood, f.data(), k,
                                      options_.prior.noise_precision,
                                      hess.data());
      for (int64_t a = 0; a < x.cols(); ++a)
        for (int kk = 0; kk < k; ++kk)
          curvature_diag_[a * k + kk] +=
              c * x(r, a) * x(r, a) * hess[kk * k + kk];
    }
  }

  // d2(-log p)/df2 per row of the pass, for single-output models.
  void OutputCurvatures() {
    const Eigen::MatrixXd& f = pass_.output();
    row_curvature_.resize(f.rows());
    for (Eigen::Index r = 0; r < f.rows(); ++r) {
      NegLogLikelihoodHessian<double>(network_->spec().likelihood, &f(r, 0), 1,
                                      options_.prior.noise_precision,
                                      &row_curvature_[r]);
    }
  }

  absl::Status Diverged(absl::string_view why) const {
    return absl::FailedPreconditionError(
        absl::StrCat(name(), " diverged at step ", t_, ": ", why,
                     "; try a smaller learning_rate or beta"));
  }

  VognOptions options_;
  Curvature curvature_;
  CovarianceStructure structure_;
  std::unique_ptr<Network<double>> network_;
  const Dataset* train_ = nullptr;  // not owned; outlives training

  Eigen::VectorXd mu_, diag_, momentum_, prior_diag_, prior_mean_;
  Eigen::MatrixXd precision_, prior_full_;  // prior_full_ empty unless set
  int64_t t_ = 0;
  Eigen::LLT<Eigen::MatrixXd> llt_;

  // Per-step workspaces.
  Eigen::MatrixXd x_, eps_, theta_, curvature_full_;
  Eigen::VectorXd y_, nll_, ghat_, curvature_diag_, rhs_, offset_,
      row_curvature_;
  ForwardPass<double> pass_;
  PerExampleGrads<double> grads_;
};

}  // namespace

absl::Status VognOptions::Validate() const {
  BNN_RETURN_IF_ERROR(CheckIntRange("mc_samples", mc_samples, 1, 10000));
  BNN_RETURN_IF_ERROR(CheckIntRange("batch_size", batch_size, 1, 1 << 20));
  BNN_RETURN_IF_ERROR(CheckRange("learning_rate", learning_rate, 0, 10));
  BNN_RETURN_IF_ERROR(CheckRange("beta", beta, 0, 1));
  BNN_RETURN_IF_ERROR(CheckRange("decay", decay, 0, 10, true));
  BNN_RETURN_IF_ERROR(CheckRange("momentum", momentum, 0, 0.999999, true));
  BNN_RETURN_IF_ERROR(prior.Validate());
  return CheckPositive("init_precision", init_precision);
}

const OptionsSchema<VognOptions>& VognOptionsSchema() {
  static const auto* schema = [] {
    auto* s = new OptionsSchema<VognOptions>();
    s->Field("mc_samples", &VognOptions::mc_samples,
             "S, MC weight samples per step")
        .Field("batch_size", &VognOptions::batch_size, "M, minibatch size")
        .Field("learning_rate", &VognOptions::learning_rate,
               "alpha_0, mean step size")
        .Field("beta", &VognOptions::beta, "beta_0, precision step size")
        .Field("decay", &VognOptions::decay,
               "omega in a_t = a_0/(1+t^omega); 0 disables")
        .Field("momentum", &VognOptions::momentum,
               "gamma, EMA of the likelihood gradient; 0 disables")
        .Embed(&VognOptions::prior, PriorOptionsSchema(),
               {"prior_precision", "bias_prior_precision", "noise_precision"})
        .Field("init_precision", &VognOptions::init_precision,
               "initial precision P_0 = init_precision I");
    return s;
  }();
  return *schema;
}

void RegisterVogn(MethodRegistry& registry) {
  struct Variant {
    const char* name;
    const char* description;
    Curvature curvature;
    CovarianceStructure structure;
  };
  const Variant variants[] = {
      {"vogn_full",
       "full-Gaussian VI by natural gradient with the empirical Fisher "
       "(SLANG eq. 2; D <= 4096)",
       Curvature::kEmpiricalFisher, CovarianceStructure::kFull},
      {"von_full",
       "full-Gaussian VI by natural gradient with the exact Hessian (SLANG "
       "eqs. 12-13; no hidden layers, D <= 4096)",
       Curvature::kHessian, CovarianceStructure::kFull},
      {"vogn_diag",
       "mean-field VI by natural gradient with the empirical Fisher (SLANG "
       "Table 1 'MF EF')",
       Curvature::kEmpiricalFisher, CovarianceStructure::kDiagonal},
      {"von_diag",
       "mean-field VI by natural gradient with the exact Hessian (SLANG "
       "Table 1 'MF Hessian'; no hidden layers)",
       Curvature::kHessian, CovarianceStructure::kDiagonal},
  };
  for (const Variant& v : variants) {
    BNN_CHECK_OK(registry.Add(v.name, v.description, VognOptionsSchema(),
                              [v](const VognOptions& options) {
                                return std::make_unique<Vogn>(
                                    options, v.curvature, v.structure);
                              }));
  }
}

}  // namespace bnn
