// BALI (Kurle et al., Algorithm 1 with the pseudo-targets of eq. 20, the
// inverse in eq. 16a and the mean in eq. 22). Per layer,
// in the paper's orientation W (D_x x D_y), z = W' x with
// x_1 = [x; 1] and x_l = [h(z_{l-1}); 1] / sqrt(D_{l-1} + 1) for l >= 2:
//
//   G_l   = d log p(y | z_L) / d Z_l          (regression: N(y; z_L, Sigma_L))
//   Pgg   <- (1-b) Pgg + b mean_rows(G_l^2)
//   Y_l   = Z_l + alpha G_l ./ sqrt(Pgg / b_t)  (regression, last layer: y)
//   Pxx, Pxy, Pyy <- (1-b) P + b (N_eff/B) X'X, X'Y, Y'Y
//   R^-1  = R_0^-1 + Pxx / b_t,  M = R Pxy / b_t   (M_0 = 0)
//   U     = U_0 + Pyy / b_t - (Pxy / b_t)' M,  Sigma = U / (u_0 + N_eff + D_y +
//   1) W     = M + L_R A L_Sigma'  (BALI-W)
//
// In the library's layout (model_spec.h) layer l's W~ = [W b] is s_l W',
// s_l the feature scale, so the exported posterior is Kronecker with
// C_in = s_l^2 R and C_out = Sigma.
#include "bnn/methods/bali.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include <Eigen/Cholesky>

#include "bnn/check.h"
#include "bnn/methods/method.h"
#include "bnn/methods/registry.h"
#include "bnn/model/network.h"
#include "bnn/posterior/gaussian_families.h"
#include "bnn/status.h"

#include "methods/bali/mniw.h"
#include "methods/method_memory.h"
#include "methods/method_state.h"

namespace bnn {
namespace {

struct BaliLayer {
  int dx = 0, dy = 0;  // inputs incl. bias, outputs
  double scale = 1.0;  // s_l
  Eigen::MatrixXd pxx, pxy, pyy;
  Eigen::VectorXd pgg;
  internal::RestorableLlt r_inv;  // Cholesky of R^-1
  Eigen::MatrixXd m, sigma, l_sigma, w;
  // Workspaces: pseudo-targets Y, and BALI-L's scaled inputs, R x and noise.
  Eigen::MatrixXd y, x, rx, xi;
};

class Bali final : public VariationalMethod {
 public:
  explicit Bali(const BaliOptions& options) : options_(options) {}

  absl::string_view name() const override {
    return Local() ? "bali_l" : "bali_w";
  }
  int batch_size() const override { return options_.batch_size; }
  double noise_precision() const override {
    // The last layer's inferred noise variance is the observation noise.
    return regression_ ? 1.0 / layers_.back().sigma(0, 0) : 1.0;
  }
  ParamMap Params() const override {
    return BaliOptionsSchema().ToParams(options_);
  }
  void SetSchedule(int64_t, int64_t total_steps) override {
    total_steps_ = total_steps;
  }

  absl::Status Initialize(const ModelSpec& spec, const Dataset& train,
                          Rng& rng) override {
    BNN_RETURN_IF_ERROR(spec.Validate());
    if (train.num_rows() < 1) {
      return absl::InvalidArgumentError("training set is empty");
    }
    network_ = std::make_unique<Network<double>>(spec);
    train_ = &train;
    theta_.resize(network_->num_parameters());
    regression_ = spec.likelihood == Likelihood::kGaussian;
    n_eff_ = std::max(1.0, options_.n_eff_fraction * train.num_rows());
    layers_.clear();
    bool first = true;
    for (const LayerShape& shape : spec.Layers()) {
      BaliLayer l;
      l.dx = shape.in + 1;
      l.dy = shape.out;
      l.scale =
          first ? 1.0 : 1.0 / std::sqrt(static_cast<double>(shape.in + 1));
      first = false;
      l.pxx.setZero(l.dx, l.dx);
      l.pxy.setZero(l.dx, l.dy);
      l.pyy.setZero(l.dy, l.dy);
      l.pgg.setZero(l.dy);
      // The prior's posterior-free state: M = M_0 = 0, R = R_0, Sigma at the
      // prior IW mode.
      l.r_inv.compute(Eigen::MatrixXd::Identity(l.dx, l.dx) /
                      options_.prior_variance);
      l.m.setZero(l.dx, l.dy);
      l.sigma = Eigen::MatrixXd::Identity(l.dy, l.dy) *
                (options_.noise_prior_scale * n_eff_ / Dof(l.dy));
      l.l_sigma = l.sigma.llt().matrixL();
      l.w.resize(l.dx, l.dy);
      rng.FillNormal(l.w);
      l.w *= options_.init_std;
      layers_.push_back(std::move(l));
    }
    t_ = 0;
    decay_product_ = 1.0;
    return absl::OkStatus();
  }

  absl::StatusOr<StepStats> Step(const std::vector<int64_t>& batch,
                                 Rng& rng) override {
    ++t_;
    double beta = options_.beta;
    const double progress =
        total_steps_ > 0 ? static_cast<double>(t_) / total_steps_ : 0.0;
    if (progress > options_.beta_decay_at1) beta /= options_.beta_decay_factor;
    if (progress > options_.beta_decay_at2) beta /= options_.beta_decay_factor;
    // Bias correction of an EMA started at 0 with time-varying rates.
    decay_product_ *= 1.0 - beta;
    const double bias = 1.0 - decay_product_;
    const int b = static_cast<int>(batch.size());

    StepStats stats;
    using Clock = std::chrono::steady_clock;
    auto lap = [last = Clock::now()](double* phase) mutable {
      const auto now = Clock::now();
      *phase += std::chrono::duration<double>(now - last).count();
      last = now;
    };
    const double nll = ForwardBackward(batch, rng);
    lap(&stats.phases.forward_backward);
    const double w = beta * n_eff_ / b;
    for (size_t i = 0; i < layers_.size(); ++i) {
      BaliLayer& l = layers_[i];
      // X = s [a, 1] (the network's inputs A scaled), Z, and
      // G = d log p / dZ = -Delta.
      const Eigen::MatrixXd& a = grads_.inputs(static_cast<int>(i));
      const Eigen::MatrixXd& delta = grads_.deltas(static_cast<int>(i));
      l.pgg =
          (1 - beta) * l.pgg +
          beta * delta.array().square().colwise().mean().transpose().matrix();
      if (regression_ && i + 1 == layers_.size()) {
        l.y = y_;  // the last layer regresses the true targets
      } else {
        const Eigen::ArrayXd rms = (l.pgg.array() / bias).sqrt();
        l.y = pass_.pre[i] - options_.alpha * (delta.array().rowwise() /
                                               rms.max(1e-300).transpose())
                                                  .matrix();
      }
      grads_.AccumulateInputMoment(static_cast<int>(i), 1 - beta,
                                   w * l.scale * l.scale, &l.pxx);
      l.pxy = (1 - beta) * l.pxy + (w * l.scale) * a.transpose() * l.y;
      l.pyy = (1 - beta) * l.pyy + w * l.y.transpose() * l.y;
      lap(&stats.phases.statistics);
      BNN_RETURN_IF_ERROR(
          UpdatePosterior(static_cast<int>(i), bias, rng, lap, &stats.phases));
    }
    stats.loss = nll;
    return stats;
  }

  MemoryEstimate EstimateMemory(const ModelSpec& spec, int64_t num_rows,
                                int64_t) const override {
    const int64_t b = std::min<int64_t>(options_.batch_size, num_rows);
    int64_t state = 0, batch = 0, transient = 0, exported = 0;
    for (const LayerShape& shape : spec.Layers()) {
      const int64_t dx = shape.in + 1, dy = shape.out;
      // EMAs X'X, X'Y, Y'Y; the Cholesky factor of R^-1; M, the weight
      // sample; Sigma and its factor.
      state += 2 * dx * dx + 3 * dx * dy + 3 * dy * dy + dy;
      batch += b * (dx + 2 * dy);  // X, Z and G
      // The conjugate update's and the sampler's temporaries, pseudo-targets
      // and (BALI-L) the R^-1 X^T solve and the output noise.
      transient = std::max(transient, 4 * dx * dx + 3 * dx * dy + 2 * dy * dy +
                                          2 * b * (dx + dy));
      exported += dx * dy + dy * dy + 2 * dx * dx;  // mean, factors, R
    }
    exported += spec.NumParameters();
    MemoryEstimate e;
    e.Add("layer posteriors and statistics", MulBytes({state, 8}));
    e.Add("minibatch activations and gradients (B rows)", MulBytes({batch, 8}));
    e.Add("one layer's update temporaries", MulBytes({transient, 8}));
    internal::AddExported("exported posterior (layer means and factors)",
                          MulBytes({exported, 8}), &e);
    internal::AddCheckpoint("layer posteriors and statistics",
                            MulBytes({state, 8}), &e);
    return e;
  }

  // Per layer the EMAs (X'X, X'Y, Y'Y, G^2), the posterior (the Cholesky
  // factor of R^-1, M, Sigma and its factor) and the current weight sample;
  // t and the product of (1 - beta_t) behind the bias correction of the
  // EMAs (eq. 17). The beta decay's position (§5) is t against the
  // total_steps SetSchedule gives again on resuming.
  absl::Status SaveState(checkpoint::MethodState* state) const override {
    internal::StateWriter w(name(), kStateVersion, state);
    for (size_t i = 0; i < layers_.size(); ++i) {
      const BaliLayer& l = layers_[i];
      const std::string p = absl::StrCat("layer", i, ".");
      w.Array(p + "pxx", l.pxx);
      w.Array(p + "pxy", l.pxy);
      w.Array(p + "pyy", l.pyy);
      w.Array(p + "pgg", l.pgg);
      w.Llt(p + "r_inv", l.r_inv);
      w.Array(p + "m", l.m);
      w.Array(p + "sigma", l.sigma);
      w.Array(p + "l_sigma", l.l_sigma);
      w.Array(p + "w", l.w);
    }
    w.Int("t", t_);
    w.Scalar("decay_product", decay_product_);
    return absl::OkStatus();
  }
  absl::Status LoadState(const checkpoint::MethodState& state) override {
    BNN_ASSIGN_OR_RETURN(
        const internal::StateReader r,
        internal::StateReader::Open(state, name(), kStateVersion));
    for (size_t i = 0; i < layers_.size(); ++i) {
      BaliLayer& l = layers_[i];
      const std::string p = absl::StrCat("layer", i, ".");
      BNN_RETURN_IF_ERROR(r.Array(p + "pxx", &l.pxx));
      BNN_RETURN_IF_ERROR(r.Array(p + "pxy", &l.pxy));
      BNN_RETURN_IF_ERROR(r.Array(p + "pyy", &l.pyy));
      BNN_RETURN_IF_ERROR(r.Array(p + "pgg", &l.pgg));
      BNN_RETURN_IF_ERROR(r.Llt(p + "r_inv", l.dx, &l.r_inv));
      BNN_RETURN_IF_ERROR(r.Array(p + "m", &l.m));
      BNN_RETURN_IF_ERROR(r.Array(p + "sigma", &l.sigma));
      BNN_RETURN_IF_ERROR(r.Array(p + "l_sigma", &l.l_sigma));
      BNN_RETURN_IF_ERROR(r.Array(p + "w", &l.w));
    }
    BNN_RETURN_IF_ERROR(
        r.Int("t", 0, std::numeric_limits<int64_t>::max(), &t_));
    return r.Scalar("decay_product", &decay_product_);
  }

  std::unique_ptr<Posterior> ExportPosterior() const override {
    std::vector<KroneckerPosterior::Layer> out;
    for (const BaliLayer& l : layers_) {
      // W~ = s W': mean s M', C_in = s^2 R, C_out = Sigma.
      Eigen::MatrixXd r = l.r_inv.solve(Eigen::MatrixXd::Identity(l.dx, l.dx));
      r = 0.5 * (r + r.transpose()).eval() * (l.scale * l.scale);
      out.push_back({l.scale * l.m.transpose(), l.l_sigma,
                     Eigen::LLT<Eigen::MatrixXd>(r).matrixL()});
    }
    auto p = KroneckerPosterior::Create(network_->spec(), std::move(out));
    BNN_CHECK_OK(p.status());  // factors are SPD after every successful step
    return std::move(p).value();
  }

 private:
  // Layout version of BALI's checkpoint state.
  static constexpr uint32_t kStateVersion = 1;

  bool Local() const {
    return options_.reparameterization == Reparameterization::kLocal;
  }
  double Dof(int dy) const {
    // IW-mode denominator u + D_y + 1 with u = u_0 + N_eff.
    return (dy + options_.prior_dof) + n_eff_ + dy + 1;
  }

  // Runs the batch through the network with the sampled W (or, BALI-L, the
  // mean plus local output noise) and back-propagates d(-log p)/dZ; the
  // regression likelihood is N(y; z, Sigma_L). Returns the mean NLL.
  double ForwardBackward(const std::vector<int64_t>& batch, Rng& rng) {
    // The network's layout holds W~_l = s_l W_l' (model_spec.h).
    const std::vector<LayerShape>& shapes = network_->layers();
    for (size_t i = 0; i < layers_.size(); ++i) {
      const BaliLayer& l = layers_[i];
      Eigen::Map<Eigen::MatrixXd>(theta_.data() + shapes[i].offset, l.dy,
                                  l.dx) =
          l.scale * (Local() ? l.m : l.w).transpose();
    }
    train_->Gather(batch, &x_, &y_);
    if (Local()) {
      // z_n = M' x_n + sqrt(x_n' R x_n) L_Sigma xi_n (eq. 68).
      noise_.pre_activation_noise = [this, &rng](int i,
                                                 const Eigen::MatrixXd& inputs,
                                                 Eigen::MatrixXd* z) {
        BaliLayer& l = layers_[i];
        l.x = l.scale * inputs;
        l.rx = l.r_inv.solve(l.x.transpose());
        l.xi.resize(z->rows(), l.dy);
        rng.FillNormal(l.xi);
        const Eigen::VectorXd sd =
            (l.x.array() * l.rx.transpose().array()).rowwise().sum().sqrt();
        *z += sd.asDiagonal() * (l.xi * l.l_sigma.transpose());
      };
    }
    network_->Forward(x_, theta_, &pass_, Local() ? &noise_ : nullptr);
    network_->Backward(y_, noise_precision(), theta_, pass_, &grads_, &nll_);
    return nll_.mean();
  }

  // Eq. 16 from the bias-corrected EMAs, then a new weight sample.
  template <typename Lap>
  absl::Status UpdatePosterior(int index, double bias, Rng& rng, Lap& lap,
                               PhaseSeconds* phases) {
    BaliLayer& l = layers_[index];
    auto post = internal::ConjugateUpdate(l.pxx / bias, l.pxy / bias,
                                          l.pyy / bias, options_.prior_variance,
                                          options_.noise_prior_scale * n_eff_);
    if (!post.ok()) return Lost(index, "R^-1");
    l.r_inv = std::move(post->r_inv);
    l.m = std::move(post->m);
    l.sigma = post->u / Dof(l.dy);  // the inverse-Wishart mode (eq. 21)
    Eigen::LLT<Eigen::MatrixXd> llt(l.sigma);
    if (llt.info() != Eigen::Success || !l.sigma.allFinite()) {
      return Lost(index, "Sigma");
    }
    l.l_sigma = llt.matrixL();
    lap(&phases->factorization);
    if (!Local()) {
      l.w = internal::SampleMatrixNormal(l.m, l.r_inv, l.l_sigma, rng);
    }
    lap(&phases->sampling);
    return absl::OkStatus();
  }

  absl::Status Lost(int layer, absl::string_view factor) const {
    return absl::FailedPreconditionError(absl::StrCat(
        name(), " step ", t_, ": the ", factor, " factor of layer ", layer,
        " lost positive-definiteness; try a smaller alpha or beta, or a "
        "larger prior_variance"));
  }

  BaliOptions options_;
  std::unique_ptr<Network<double>> network_;
  const Dataset* train_ = nullptr;  // not owned; outlives training
  bool regression_ = false;
  double n_eff_ = 1;
  std::vector<BaliLayer> layers_;
  int64_t t_ = 0, total_steps_ = 0;
  double decay_product_ = 1.0;

  // Per-step workspaces: the network's weights, the batch, the pass.
  Eigen::VectorXd theta_, y_, nll_;
  Eigen::MatrixXd x_;
  LayerNoise<double> noise_;
  ForwardPass<double> pass_;
  PerExampleGrads<double> grads_;
};

}  // namespace

absl::Status BaliOptions::Validate() const {
  BNN_RETURN_IF_ERROR(CheckRange("alpha", alpha, 0, 1e6));
  BNN_RETURN_IF_ERROR(CheckRange("beta", beta, 0, 1));
  BNN_RETURN_IF_ERROR(
      CheckRange("beta_decay_factor", beta_decay_factor, 1, 1e6, true));
  BNN_RETURN_IF_ERROR(CheckRange("beta_decay_at1", beta_decay_at1, 0, 1, true));
  BNN_RETURN_IF_ERROR(CheckRange("beta_decay_at2", beta_decay_at2, 0, 1, true));
  BNN_RETURN_IF_ERROR(CheckIntRange("batch_size", batch_size, 1, 1 << 20));
  BNN_RETURN_IF_ERROR(CheckRange("n_eff_fraction", n_eff_fraction, 0, 1e6));
  BNN_RETURN_IF_ERROR(CheckPositive("prior_variance", prior_variance));
  BNN_RETURN_IF_ERROR(CheckPositive("noise_prior_scale", noise_prior_scale));
  BNN_RETURN_IF_ERROR(CheckRange("prior_dof", prior_dof, 0, 1e9, true));
  return CheckPositive("init_std", init_std);
}

const OptionsSchema<BaliOptions>& BaliOptionsSchema() {
  static const auto* schema = [] {
    auto* s = new OptionsSchema<BaliOptions>();
    s->Field("alpha", &BaliOptions::alpha, "pseudo-target step size (eq. 20)")
        .Field("beta", &BaliOptions::beta, "initial EMA update rate (eq. 17)")
        .Field("beta_decay_factor", &BaliOptions::beta_decay_factor,
               "beta is divided by this at the two decay points")
        .Field("beta_decay_at1", &BaliOptions::beta_decay_at1,
               "first decay point, fraction of the run")
        .Field("beta_decay_at2", &BaliOptions::beta_decay_at2,
               "second decay point, fraction of the run")
        .Field("batch_size", &BaliOptions::batch_size, "B, minibatch size")
        .Field("n_eff_fraction", &BaliOptions::n_eff_fraction,
               "N_eff / N, effective data-set size")
        .Field("prior_variance", &BaliOptions::prior_variance,
               "sigma_r^2, R_0 = sigma_r^2 I")
        .Field("noise_prior_scale", &BaliOptions::noise_prior_scale,
               "sigma_u^2 / N_eff, U_0 = sigma_u^2 I")
        .Field("prior_dof", &BaliOptions::prior_dof, "u_0 - D_y")
        .Field("init_std", &BaliOptions::init_std,
               "sigma_init, initial weight standard deviation")
        .Enum("reparameterization", &BaliOptions::reparameterization,
              {{"weight", Reparameterization::kWeight},
               {"local", Reparameterization::kLocal}},
              "weight (BALI-W) or local (BALI-L)");
    return s;
  }();
  return *schema;
}

void RegisterBali(MethodRegistry& registry) {
  struct Variant {
    const char* name;
    bool fixed;  // reparameterization fixed to defaults.reparameterization
    Reparameterization reparameterization;
    const char* description;
  };
  const Variant variants[] = {
      {"bali", false, Reparameterization::kWeight,
       "BALI: layerwise Bayesian linear regression with matrix-normal-inverse-"
       "Wishart posteriors (Kurle et al.); reparameterization=weight|local"},
      {"bali_w", true, Reparameterization::kWeight,
       "BALI with weight reparameterisation (BALI-W)"},
      {"bali_l", true, Reparameterization::kLocal,
       "BALI with local reparameterisation (BALI-L)"},
  };
  for (const Variant& v : variants) {
    BaliOptions defaults;
    defaults.reparameterization = v.reparameterization;
    BNN_CHECK_OK(registry.Add(
        v.name, v.description, BaliOptionsSchema(),
        [v](const BaliOptions& options)
            -> absl::StatusOr<std::unique_ptr<VariationalMethod>> {
          if (v.fixed && options.reparameterization != v.reparameterization) {
            return absl::InvalidArgumentError(absl::StrCat(
                "method ", v.name, " fixes reparameterization = ",
                v.reparameterization == Reparameterization::kLocal ? "local"
                                                                   : "weight",
                "; use method 'bali' to choose"));
          }
          return std::unique_ptr<VariationalMethod>(new Bali(options));
        },
        defaults));
  }
}

}  // namespace bnn
