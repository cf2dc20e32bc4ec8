// -ELBO(m, Sigma) = -sum_i E[log sigmoid(y_i eta_i)] + KL(q || p),
//   eta_i ~ N(x_i^T m, x_i^T Sigma x_i), y_i in {-1, +1},
// with d/d mbar E = E[f'(eta)] and d/d vbar E = E[f''(eta)] / 2 (Bonnet and
// Price), f(eta) = log sigmoid(y eta), f' = y (1 - s), f'' = -s (1 - s),
// s = sigmoid(y eta).
#include "bnn/methods/exact.h"

#include <cmath>

#include "absl/strings/str_cat.h"
#include <Eigen/Dense>

#include "bnn/check.h"
#include "bnn/linalg/optimize.h"
#include "bnn/memory.h"
#include "bnn/methods/method.h"
#include "bnn/methods/registry.h"
#include "bnn/model/likelihood.h"
#include "bnn/posterior/gaussian_families.h"
#include "bnn/status.h"

#include "methods/method_memory.h"
#include "methods/method_state.h"

namespace bnn {
namespace {

class Exact final : public VariationalMethod {
 public:
  Exact(const ExactOptions& options, bool full)
      : options_(options),
        full_(full),
        quadrature_(GaussHermite(options.quadrature_points)) {}

  absl::string_view name() const override {
    return full_ ? "exact_full" : "exact_diag";
  }
  // One L-BFGS iteration uses every row: one step per epoch.
  int batch_size() const override { return static_cast<int>(x_.rows()); }
  double noise_precision() const override { return 1.0; }
  ParamMap Params() const override {
    return ExactOptionsSchema().ToParams(options_);
  }

  absl::Status Initialize(const ModelSpec& spec, const Dataset& train,
                          Rng&) override {
    if (spec.likelihood != Likelihood::kBernoulli ||
        !spec.hidden_sizes.empty()) {
      return absl::InvalidArgumentError(absl::StrCat(
          name(),
          " is Bayesian logistic regression only: a binary task and "
          "no hidden layers (got ",
          LikelihoodToString(spec.likelihood), " with ",
          spec.hidden_sizes.size(), " hidden layers)"));
    }
    const int64_t dim = spec.NumParameters();
    if (full_ && dim > FullGaussianPosterior::kMaxDim) {
      return absl::InvalidArgumentError(
          absl::StrCat("exact_full: ", dim, " parameters exceed the limit ",
                       FullGaussianPosterior::kMaxDim));
    }
    const int64_t n = train.num_rows();
    if (n < 1) return absl::InvalidArgumentError("training set is empty");
    // Rows [x, 1] in theta's layout (the bias is the last entry) and labels
    // +-1.
    x_.resize(n, dim);
    y_.resize(n);
    for (int64_t i = 0; i < n; ++i) {
      for (int64_t j = 0; j + 1 < dim; ++j) x_(i, j) = train.row(i)[j];
      x_(i, dim - 1) = 1.0;
      y_[i] = train.targets[i] > 0.5 ? 1.0 : -1.0;
    }
    options_.prior.FillPrecisions(spec, &lambda_);
    // Start at m = 0, Sigma = I, as the reference code.
    Eigen::VectorXd x0 = Eigen::VectorXd::Zero(Size(dim));
    if (full_) {
      for (int64_t j = 0; j < dim; ++j) x0[dim + TriIndex(j, j)] = 1.0;
    }  // diagonal: log sigma = 0
    Lbfgs::Options lbfgs;
    lbfgs.memory = options_.lbfgs_memory;
    lbfgs.gradient_tolerance = options_.tolerance;
    solver_ = std::make_unique<Lbfgs>(
        [this](const Eigen::VectorXd& v, Eigen::VectorXd* g) {
          return NegativeElbo(v, g);
        },
        x0, lbfgs);
    return absl::OkStatus();
  }

  absl::StatusOr<StepStats> Step(const std::vector<int64_t>&, Rng&) override {
    BNN_ASSIGN_OR_RETURN(bool moved, solver_->Iterate());
    (void)moved;  // converged runs keep reporting the optimum
    StepStats stats;
    stats.loss = expected_nll_ / static_cast<double>(x_.rows());
    return stats;
  }

  MemoryEstimate EstimateMemory(const ModelSpec& spec, int64_t num_rows,
                                int64_t) const override {
    const int64_t dim = spec.NumParameters();
    const int64_t params = Size(dim);
    MemoryEstimate e;
    e.Add("design matrix [x, 1] (N x D)", MulBytes({num_rows, dim + 1, 8}));
    e.Add(absl::StrCat("L-BFGS state and history (", 2 * options_.lbfgs_memory,
                       " + 6 vectors of ", params, ")"),
          MulBytes({2 * options_.lbfgs_memory + 6, params, 8}));
    internal::AddCheckpoint(
        "L-BFGS state and history",
        MulBytes({2 * options_.lbfgs_memory + 3, params, 8}), &e);
    if (full_) {
      // L, X L (N x D) and the gradient G L; exporting forms L^-1, P and the
      // posterior's precision and Cholesky factor.
      e.Add("objective: L, X L and G L",
            MulBytes({num_rows + 2 * dim, dim, 8}));
      e.Add("exported posterior and its temporaries (5 x D^2)",
            MulBytes({5, dim, dim, 8}));
      e.kept_bytes = MulBytes({2 * dim + 1, dim, 8});
    } else {
      // X.^2 formed for the variances and their gradient.
      e.Add("objective: X.^2 (N x D) and row statistics",
            MulBytes({num_rows, dim + 4, 8}));
      internal::AddExported("exported posterior", MulBytes({2, dim, 8}), &e);
    }
    return e;
  }

  // The L-BFGS state (the variational parameters, the objective and its
  // gradient there, the correction pairs) and the expected NLL of the last
  // objective evaluation, which Step() reports.
  absl::Status SaveState(checkpoint::MethodState* state) const override {
    internal::StateWriter w(name(), kStateVersion, state);
    const Lbfgs::State s = solver_->GetState();
    w.Array("x", s.x);
    w.Array("gradient", s.g);
    w.Scalar("objective", s.f);
    w.Int("started", s.started);
    w.Int("converged", s.converged);
    w.Columns("s", s.x.size(), s.s);
    w.Columns("y", s.x.size(), s.y);
    w.Scalar("expected_nll", expected_nll_);
    return absl::OkStatus();
  }
  absl::Status LoadState(const checkpoint::MethodState& state) override {
    BNN_ASSIGN_OR_RETURN(
        const internal::StateReader r,
        internal::StateReader::Open(state, name(), kStateVersion));
    const int64_t n = Size(x_.cols());
    Lbfgs::State s;
    s.x.resize(n);
    BNN_RETURN_IF_ERROR(r.Array("x", &s.x));
    BNN_RETURN_IF_ERROR(r.Bool("started", &s.started));
    BNN_RETURN_IF_ERROR(r.Bool("converged", &s.converged));
    BNN_RETURN_IF_ERROR(
        r.ArrayWithRows("gradient", s.started ? n : 0, 1, &s.g));
    BNN_RETURN_IF_ERROR(r.Scalar("objective", &s.f));
    BNN_RETURN_IF_ERROR(r.Columns("s", n, options_.lbfgs_memory, &s.s));
    BNN_RETURN_IF_ERROR(r.Columns("y", n, options_.lbfgs_memory, &s.y));
    BNN_RETURN_IF_ERROR(r.Scalar("expected_nll", &expected_nll_));
    absl::Status set = solver_->SetState(std::move(s));
    return set.ok() ? set : r.Error(set.message());
  }

  std::unique_ptr<Posterior> ExportPosterior() const override {
    const int64_t dim = x_.cols();
    const Eigen::VectorXd& v = solver_->x();
    const Eigen::VectorXd m = v.head(dim);
    if (full_) {
      const Eigen::MatrixXd l = Lower(v);
      // P = Sigma^-1 = L^-T L^-1.
      Eigen::MatrixXd l_inv = Eigen::MatrixXd::Identity(dim, dim);
      l.triangularView<Eigen::Lower>().solveInPlace(l_inv);
      Eigen::MatrixXd p = l_inv.transpose() * l_inv;
      p = 0.5 * (p + p.transpose()).eval();
      auto posterior = FullGaussianPosterior::Create(m, p);
      BNN_CHECK_OK(posterior.status());
      return std::move(posterior).value();
    }
    auto posterior = DiagonalGaussianPosterior::Create(
        m, (2.0 * v.tail(dim)).array().exp().matrix());
    BNN_CHECK_OK(posterior.status());
    return std::move(posterior).value();
  }

 private:
  // Layout version of the exact methods' checkpoint state.
  static constexpr uint32_t kStateVersion = 1;

  // Packed lower triangle (row-major by rows of L): entry (i, j), j <= i.
  static int64_t TriIndex(int64_t i, int64_t j) { return i * (i + 1) / 2 + j; }
  int64_t Size(int64_t dim) const {
    return full_ ? dim + dim * (dim + 1) / 2 : 2 * dim;
  }
  Eigen::MatrixXd Lower(const Eigen::VectorXd& v) const {
    const int64_t dim = x_.cols();
    Eigen::MatrixXd l = Eigen::MatrixXd::Zero(dim, dim);
    for (int64_t i = 0; i < dim; ++i)
      for (int64_t j = 0; j <= i; ++j) l(i, j) = v[dim + TriIndex(i, j)];
    return l;
  }

  double NegativeElbo(const Eigen::VectorXd& v, Eigen::VectorXd* grad) {
    const int64_t dim = x_.cols();
    const Eigen::VectorXd m = v.head(dim);
    Eigen::VectorXd vbar;
    Eigen::MatrixXd l, xl;
    if (full_) {
      l = Lower(v);
      xl.noalias() = x_ * l;  // row i: (L^T x_i)^T
      vbar = xl.rowwise().squaredNorm();
    } else {
      vbar = x_.cwiseAbs2() * (2.0 * v.tail(dim)).array().exp().matrix();
    }
    const Eigen::VectorXd mbar = x_ * m;
    // Expected log-likelihood and its derivatives in (mbar, vbar).
    const int64_t n = x_.rows();
    Eigen::VectorXd dm(n), dv(n);
    double ell = 0;
    for (int64_t i = 0; i < n; ++i) {
      const double sd = std::sqrt(std::max(vbar[i], 0.0));
      double e = 0, e1 = 0, e2 = 0;
      for (int k = 0; k < quadrature_.nodes.size(); ++k) {
        const double eta = y_[i] * (mbar[i] + sd * quadrature_.nodes[k]);
        const double s = Sigmoid(eta);
        const double w = quadrature_.weights[k];
        e -= w * Softplus(-eta);  // log sigmoid(eta)
        e1 += w * y_[i] * (1.0 - s);
        e2 -= w * s * (1.0 - s);
      }
      ell += e;
      dm[i] = e1;
      dv[i] = 0.5 * e2;
    }
    expected_nll_ = -ell;
    // KL(q || N(0, diag(1/lambda))).
    Eigen::VectorXd sigma_diag;
    double log_det_sigma;
    if (full_) {
      sigma_diag = l.rowwise().squaredNorm();
      log_det_sigma = 2.0 * l.diagonal().cwiseAbs().array().log().sum();
    } else {
      sigma_diag = (2.0 * v.tail(dim)).array().exp();
      log_det_sigma = 2.0 * v.tail(dim).sum();
    }
    const double kl =
        0.5 * (lambda_.dot(sigma_diag) + lambda_.dot(m.cwiseAbs2()) -
               static_cast<double>(dim) - lambda_.array().log().sum() -
               log_det_sigma);
    if (!std::isfinite(log_det_sigma))
      return std::numeric_limits<double>::infinity();

    grad->resize(v.size());
    grad->head(dim) = -x_.transpose() * dm + lambda_.cwiseProduct(m);
    if (full_) {
      // d/dL of -ELBO = 2 G L + Lambda L - L^-T, G = -X^T diag(dv) X; only
      // the lower triangle is a variable (L^-T contributes its diagonal).
      const Eigen::MatrixXd gl =
          -2.0 * x_.transpose() * (dv.asDiagonal() * xl) +
          lambda_.asDiagonal() * l;
      for (int64_t i = 0; i < dim; ++i) {
        for (int64_t j = 0; j <= i; ++j) {
          (*grad)[dim + TriIndex(i, j)] =
              gl(i, j) - (i == j ? 1.0 / l(i, i) : 0.0);
        }
      }
    } else {
      // rho = log sigma: d vbar_i / d rho_j = 2 x_ij^2 sigma_j^2.
      const Eigen::VectorXd sigma2 = sigma_diag;
      grad->tail(dim) =
          (-2.0 * (x_.cwiseAbs2().transpose() * dv)).cwiseProduct(sigma2) +
          lambda_.cwiseProduct(sigma2) - Eigen::VectorXd::Ones(dim);
    }
    return -ell + kl;
  }

  ExactOptions options_;
  bool full_;
  Quadrature quadrature_;
  Eigen::MatrixXd x_;
  Eigen::VectorXd y_, lambda_;
  std::unique_ptr<Lbfgs> solver_;
  double expected_nll_ = 0;
};

}  // namespace

absl::Status ExactOptions::Validate() const {
  BNN_RETURN_IF_ERROR(prior.Validate());
  BNN_RETURN_IF_ERROR(
      CheckIntRange("quadrature_points", quadrature_points, 2, 200));
  BNN_RETURN_IF_ERROR(CheckIntRange("lbfgs_memory", lbfgs_memory, 1, 1000));
  return CheckRange("tolerance", tolerance, 0, 1, true);
}

const OptionsSchema<ExactOptions>& ExactOptionsSchema() {
  static const auto* schema = [] {
    auto* s = new OptionsSchema<ExactOptions>();
    s->Embed(&ExactOptions::prior, PriorOptionsSchema(),
             {"prior_precision", "bias_prior_precision"},
             {{"bias_prior_precision", "lambda for the bias"}})
        .Field("quadrature_points", &ExactOptions::quadrature_points,
               "Gauss-Hermite nodes per expectation")
        .Field("lbfgs_memory", &ExactOptions::lbfgs_memory,
               "L-BFGS correction pairs")
        .Field("tolerance", &ExactOptions::tolerance,
               "gradient tolerance relative to max(1, |-ELBO|)");
    return s;
  }();
  return *schema;
}

void RegisterExact(MethodRegistry& registry) {
  for (const bool full : {true, false}) {
    BNN_CHECK_OK(registry.Add(
        full ? "exact_full" : "exact_diag",
        full ? "optimal full-Gaussian VI of Bayesian logistic regression "
               "(L-BFGS on the ELBO, Gauss-Hermite; SLANG's 'Full Exact')"
             : "optimal mean-field VI of Bayesian logistic regression "
               "(SLANG's 'MF Exact')",
        ExactOptionsSchema(), [full](const ExactOptions& options) {
          return std::make_unique<Exact>(options, full);
        }));
  }
}

}  // namespace bnn
