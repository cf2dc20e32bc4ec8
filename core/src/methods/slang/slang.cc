// SLANG (Mishkin et al. 2018, Algorithm 1 with the updates of eqs. 7-11 and
// the reference code's momentum and stabilisation):
//
//   theta_s ~ N(mu, (U U^T + D)^-1)      fast_sample (App. C.4), corrected
//   J = per-example grads of -log p      Goodfellow's factors (App. C.1)
//   c = N / (M S);  g = c J 1
//   Q, e = top-L eig of (1-b) U U^T + b c J J^T      fast_eig (App. C.2)
//   U' = Q diag(sqrt(e))                 eq. 7; e <= eig_threshold dropped
//   Delta = (1-b) rowsq(U) + b c rowsq(J) - rowsq(U'), clamped >= 0 (eq. 10)
//   d = (1-b) d + b lambda + Delta       eq. 9 (b lambda, not lambda)
//   m = gamma m + (1-gamma) g;  m^ = m / (1 - gamma^t)    (reference code)
//   mu = mu - a (U' U'^T + D)^-1 (m^ + lambda .* mu)      eq. 11,
//                                        fast_inverse (App. C.3)
#include <algorithm>
#include <cmath>
#include <limits>

#include "absl/strings/str_cat.h"
#include <Eigen/Eigenvalues>

#include "bnn/check.h"
#include "bnn/compute_threads.h"
#include "bnn/methods/registry.h"
#include "bnn/posterior/low_rank_gaussian.h"
#include "bnn/status.h"

#include "methods/method_memory.h"
#include "methods/method_state.h"
#include "methods/slang/slang_impl.h"

namespace bnn {
namespace internal {

namespace {

// W = sum over layers of (in + 1 + out): the Gram matrix J^T J costs
// 2 (M S)^2 W flops through Goodfellow's factors.
int64_t LayerWidth(const ModelSpec& spec) {
  int64_t width = 0;
  for (const LayerShape& shape : spec.Layers())
    width += shape.in + 1 + shape.out;
  return width;
}

}  // namespace

template <typename T>
ParamMap Slang<T>::Params() const {
  return SlangOptionsSchema().ToParams(options_);
}

template <typename T>
absl::Status Slang<T>::Initialize(const ModelSpec& spec, const Dataset& train,
                                  Rng& rng) {
  BNN_RETURN_IF_ERROR(spec.Validate());
  if (train.num_rows() < 1) {
    return absl::InvalidArgumentError("training set is empty");
  }
  network_ = std::make_unique<Network<T>>(spec);
  train_ = &train;
  const int64_t dim = network_->num_parameters();
  mu_ = network_->InitialWeights(rng).template cast<T>();
  u_.resize(dim, 0);
  d_.setConstant(dim, T(options_.init_precision));
  options_.prior.FillPrecisions(spec, &prior_);
  prior_mean_.setZero(dim);
  prior_u_.resize(dim, 0);
  momentum_.setZero(dim);
  t_ = 0;
  return factor_.Factor(u_, d_);
}

template <typename T>
absl::Status Slang<T>::WarmStart(const Posterior& posterior, bool as_prior) {
  const int64_t dim = mu_.size();
  if (posterior.dim() != dim) {
    return absl::InvalidArgumentError(
        absl::StrCat("warm start: the posterior has ", posterior.dim(),
                     " parameters; the model has ", dim));
  }
  Eigen::MatrixXd u;
  Eigen::VectorXd d;
  if (const auto* lr =
          dynamic_cast<const LowRankGaussianPosterior*>(&posterior)) {
    u = lr->u();
    d = lr->d();
  } else if (posterior.family() == "diagonal") {
    u.resize(dim, 0);
    d = posterior.MarginalVariances().cwiseInverse();
  } else {
    return absl::InvalidArgumentError(absl::StrCat(
        "SLANG can warm-start from a low_rank or diagonal posterior; the "
        "parent's is ",
        posterior.family()));
  }
  // Keep the leading L columns (SLANG stores them by decreasing eigenvalue)
  // and fold the rest into the diagonal, so diag(precision) is unchanged.
  const int keep = std::min<int>(static_cast<int>(u.cols()), options_.rank);
  mu_ = posterior.mean().template cast<T>();
  u_ = u.leftCols(keep).template cast<T>();
  d_ = (d + u.rightCols(u.cols() - keep).rowwise().squaredNorm())
           .template cast<T>();
  if (as_prior) {
    prior_mean_ = mu_;
    prior_u_ = u.template cast<T>();
    prior_ = d.template cast<T>();
  }
  momentum_.setZero(dim);
  t_ = 0;
  return factor_.Factor(u_, d_);
}

template <typename T>
absl::StatusOr<StepStats> Slang<T>::Step(const std::vector<int64_t>& batch,
                                         Rng& rng) {
  // Small steps run on one thread whatever the caller's limit (the same
  // policy as the trainer's, bnn/compute_threads.h).
  const ScopedComputeThreads threads(ComputeThreadsFor(LargestGemmFlops(
      network_->spec(),
      static_cast<int64_t>(batch.size()) * options_.mc_samples)));
  // theta_s ~ q for s = 1..S in one batched draw.
  const int64_t dim = mu_.size();
  eps_.resize(dim, options_.mc_samples);
  rng.FillNormal(eps_);
  factor_.Sample(mu_, eps_, &theta_);
  return StepWithSamples(batch, theta_, rng);
}

template <typename T>
absl::StatusOr<StepStats> Slang<T>::StepWithSamples(
    const std::vector<int64_t>& batch, const MatrixX<T>& theta, Rng& rng) {
  const ScopedComputeThreads threads(ComputeThreadsFor(LargestGemmFlops(
      network_->spec(), static_cast<int64_t>(batch.size()) * theta.cols())));
  ++t_;
  const double decay =
      options_.decay > 0
          ? 1.0 + std::pow(static_cast<double>(t_), options_.decay)
          : 1.0;
  const double alpha = options_.learning_rate / decay;
  const double beta = options_.beta / decay;
  const int m = static_cast<int>(batch.size());
  const int s_count = static_cast<int>(theta.cols());
  const int64_t dim = mu_.size();
  const double c = static_cast<double>(train_->num_rows()) / (m * s_count);

  train_->Gather(batch, &x_, &y_);

  network_->Forward(x_, theta, &pass_);
  network_->Backward(y_, T(options_.prior.noise_precision), theta, pass_,
                     &grads_, &nll_);
  grads_.Sum(&ghat_);
  ghat_ *= T(c);

  // Top-L eigenpairs of (1-b) U U^T + b c J J^T, applied to blocks only;
  // OnlineEig decomposes c J J^T alone (eq. 17).
  const T w_u = T(online_eig_ ? 0.0 : 1.0 - beta);
  const T w_g = T(online_eig_ ? c : beta * c);
  // With a snapshot prior the target precision is G + P_0, and P_0's
  // low-rank part b U_0 U_0^T joins the matrix being eigendecomposed.
  const T w_p = T(online_eig_ ? 0.0 : beta);
  auto op = [&](const MatrixX<T>& x, MatrixX<T>* out) {
    grads_.TransposeTimes(x, &jtx_);
    grads_.Times(jtx_, out);
    *out *= w_g;
    for (const auto& [factor, weight] :
         {std::pair<const MatrixX<T>*, T>{&u_, w_u}, {&prior_u_, w_p}}) {
      if (factor->cols() == 0 || weight == T(0)) continue;
      utx_.noalias() = factor->transpose() * x;
      utx_ *= weight;  // scale the small factor: no D x K temporary
      TallTimesSmall<T>(*factor, utx_, out, /*accumulate=*/true);
    }
  };
  const int rank = static_cast<int>(std::min<int64_t>(options_.rank, dim));
  auto& eig = eig_;
  const int64_t own = w_u > 0 ? u_.cols() : 0;
  const int64_t prior = w_p > 0 ? prior_u_.cols() : 0;
  EigSolver route = options_.eig_solver;
  if (route == EigSolver::kAuto) {
    route = ResolveEigSolver(EstimateEigFlops(dim, own + prior, grads_.count(),
                                              rank, options_.power_iterations,
                                              LayerWidth(network_->spec())));
  }
  if (route == EigSolver::kExact) {
    dense_.resize(dim, own + prior);
    dense_.leftCols(own) = std::sqrt(w_u) * u_.leftCols(own);
    dense_.rightCols(prior) = std::sqrt(w_p) * prior_u_.rightCols(prior);
    ExactEig(dense_, static_cast<double>(w_g), rank, &eig);
  } else {
    eig_solver_.Solve(op, dim, rank, options_.power_iterations, rng, &eig);
  }
  int kept = 0;
  while (kept < rank && eig.values[kept] > options_.eig_threshold) ++kept;
  u_new_.resize(dim, kept);
  for (int k = 0; k < kept; ++k) {
    u_new_.col(k) = eig.vectors.col(k) * T(std::sqrt(eig.values[k]));
  }

  if (online_eig_) {
    OnlineEigUpdate(beta, c, kept);
  } else {
    // Diagonal correction (eq. 10), clamped at 0 against noise (§3.3 (b)).
    grads_.SquaredSum(&sq_);
    delta_ = w_g * sq_;
    if (u_.cols() > 0) delta_ += w_u * u_.rowwise().squaredNorm();
    if (prior_u_.cols() > 0) delta_ += w_p * prior_u_.rowwise().squaredNorm();
    if (kept > 0) delta_ -= u_new_.rowwise().squaredNorm();
    delta_ = delta_.cwiseMax(T(0));
    d_ = T(1.0 - beta) * d_ + T(beta) * prior_ + delta_;
    u_.swap(u_new_);
  }

  // Mean step with bias-corrected momentum on the likelihood gradient.
  const double gamma = options_.momentum;
  momentum_ = T(gamma) * momentum_ + T(1.0 - gamma) * ghat_;
  const T correction = T(1.0 - std::pow(gamma, static_cast<double>(t_)));
  // Prior gradient P_0 (mu - mu_0), P_0 = U_0 U_0^T + diag(lambda).
  offset_ = mu_ - prior_mean_;
  rhs_ = momentum_ / correction + prior_.cwiseProduct(offset_);
  if (prior_u_.cols() > 0) rhs_ += prior_u_ * (prior_u_.transpose() * offset_);
  absl::Status factored = factor_.Factor(u_, d_);
  if (!factored.ok()) return Diverged(factored.message());
  factor_.Solve(rhs_, &step_);
  mu_ -= T(alpha) * step_.col(0);
  if (!mu_.allFinite()) return Diverged("the mean became non-finite");

  StepStats stats;
  stats.loss = static_cast<double>(nll_.mean());
  return stats;
}

template <typename T>
void Slang<T>::ExactEig(const MatrixX<T>& dense, double w_g, int rank,
                        typename RandomizedEigSolver<T>::Result* result_out) {
  auto& result = *result_out;
  const int64_t dim = mu_.size();
  const int p = static_cast<int>(dense.cols());
  const int ms = grads_.count();
  Eigen::MatrixXd& vecs = small_vectors_;  // of the small matrix, descending
  Eigen::VectorXd& vals = small_values_;
  auto take_top = [&](const Eigen::MatrixXd& m) {
    // Only the top `rank` eigenvectors (TopEigenSolver); eigenpairs past
    // the matrix's size (L + M S < rank at the first step) are zero.
    top_eig_.Compute(m, rank, &vals, &vecs);
    vals = vals.cwiseMax(0.0);
  };
  if (dim <= p + ms) {
    // Small D: eigendecompose the D x D matrix itself.
    const Eigen::MatrixXd j = grads_.Materialize().template cast<double>();
    const Eigen::MatrixXd b = dense.template cast<double>();
    take_top(w_g * j * j.transpose() + b * b.transpose());
    result.values = vals;
    result.vectors = vecs.template cast<T>();
    return;
  }
  // A = F F^T with F = [B, sqrt(w_g) J]: its nonzero eigenpairs are
  // (lambda, F w / sqrt(lambda)) for the eigenpairs (lambda, w) of the Gram
  // matrix F^T F, whose blocks Goodfellow's factors give without forming J.
  Eigen::MatrixXd& h = small_;
  h.resize(p + ms, p + ms);
  if (p > 0) {
    grads_.TransposeTimes(dense, &jtx_);  // J^T B, ms x p
    h.topLeftCorner(p, p) = (dense.transpose() * dense).template cast<double>();
    h.bottomLeftCorner(ms, p) = std::sqrt(w_g) * jtx_.template cast<double>();
    h.topRightCorner(p, ms) = h.bottomLeftCorner(ms, p).transpose();
  }
  grads_.Gram(&gram_);
  h.bottomRightCorner(ms, ms) = w_g * gram_.template cast<double>();
  take_top(h);
  // vectors = F W diag(1/sqrt(lambda)); zero for null eigenvalues.
  Eigen::VectorXd inv_sqrt(rank);
  for (int i = 0; i < rank; ++i) {
    inv_sqrt[i] = vals[i] > 0 ? 1.0 / std::sqrt(vals[i]) : 0.0;
  }
  const Eigen::MatrixXd coeff = vecs * inv_sqrt.asDiagonal();
  grads_.Times((std::sqrt(w_g) * coeff.bottomRows(ms)).template cast<T>(),
               &result.vectors);
  if (p > 0) {
    TallTimesSmall<T>(dense, coeff.topRows(p).template cast<T>(),
                      &result.vectors, /*accumulate=*/true);
  }
  result.values = vals;
}

template <typename T>
void Slang<T>::OnlineEigUpdate(double beta, double c, int kept) {
  // u_new_ = Q Lambda^1/2 of c J J^T. Eigenvectors have arbitrary signs, so
  // each is flipped to agree with the column of U it is averaged into (the
  // matching the paper notes OnlineEig depends on, §7 B.2) [note].
  if (u_.cols() < kept) {
    const int64_t old = u_.cols();
    u_.conservativeResize(Eigen::NoChange, kept);
    u_.rightCols(kept - old).setZero();
  }
  for (int k = 0; k < kept; ++k) {
    if (u_.col(k).dot(u_new_.col(k)) < T(0)) u_new_.col(k) *= T(-1);
  }
  // Eq. 18: U <- (1 - b) U + b Q Lambda^1/2.
  u_ *= T(1.0 - beta);
  u_.leftCols(kept) += T(beta) * u_new_;
  // Eq. 19 (read as in the digest): d <- (1 - b) d
  //   + b [diag(G) - diag(Q Lambda Q^T) + lambda], the bracket clamped >= 0.
  grads_.SquaredSum(&sq_);
  delta_ = T(c) * sq_;
  if (kept > 0) delta_ -= u_new_.rowwise().squaredNorm();
  delta_ = delta_.cwiseMax(T(0));
  d_ = T(1.0 - beta) * d_ + T(beta) * (delta_ + prior_);
}

template <typename T>
std::unique_ptr<Posterior> Slang<T>::ExportPosterior() const {
  auto posterior = LowRankGaussianPosterior::Create(mu_.template cast<double>(),
                                                    u_.template cast<double>(),
                                                    d_.template cast<double>());
  // The state is finite and d > 0 after every successful step.
  BNN_CHECK_OK(posterior.status());
  return std::move(posterior).value();
}

template <typename T>
void Slang<T>::ReleaseWorkspaces() {
  // Every one is sized (or assigned) by the step that uses it; the
  // factorisation factor_ is state (kept in sync with u_ and d_).
  small_ = Eigen::MatrixXd();
  small_vectors_ = Eigen::MatrixXd();
  small_values_ = Eigen::VectorXd();
  for (MatrixX<T>* m :
       {&x_, &eps_, &theta_, &jtx_, &utx_, &u_new_, &step_, &dense_, &gram_}) {
    *m = MatrixX<T>();
  }
  for (VectorX<T>* v : {&y_, &nll_, &ghat_, &sq_, &delta_, &rhs_, &offset_}) {
    *v = VectorX<T>();
  }
  eig_ = {};
  eig_solver_ = RandomizedEigSolver<T>();
  top_eig_ = TopEigenSolver();
  pass_ = ForwardPass<T>();
  grads_ = PerExampleGrads<T>();
}

// Layout version of SLANG's checkpoint state.
constexpr uint32_t kSlangStateVersion = 1;

template <typename T>
absl::Status Slang<T>::SaveState(checkpoint::MethodState* state) const {
  StateWriter w(name(), kSlangStateVersion, state);
  w.Posterior(*ExportPosterior());
  w.Array("prior", prior_);
  w.Array("prior_mean", prior_mean_);
  w.Array("prior_u", prior_u_);
  w.Array("momentum", momentum_);
  w.Int("t", t_);
  return absl::OkStatus();
}

template <typename T>
absl::Status Slang<T>::LoadState(const checkpoint::MethodState& state) {
  BNN_ASSIGN_OR_RETURN(const StateReader r,
                       StateReader::Open(state, name(), kSlangStateVersion));
  BNN_ASSIGN_OR_RETURN(const std::unique_ptr<Posterior> posterior,
                       r.Posterior(network_->spec()));
  const auto* lr = dynamic_cast<const LowRankGaussianPosterior*>(&*posterior);
  if (lr == nullptr || lr->u().cols() > options_.rank) {
    return r.Error(absl::StrCat("the posterior is not low_rank with at most ",
                                options_.rank, " columns"));
  }
  // Exact for float: the values were floats widened to double.
  mu_ = lr->mean().template cast<T>();
  u_ = lr->u().template cast<T>();
  d_ = lr->d().template cast<T>();
  const int64_t dim = mu_.size();
  BNN_RETURN_IF_ERROR(r.Array("prior", &prior_));
  BNN_RETURN_IF_ERROR(r.Array("prior_mean", &prior_mean_));
  BNN_RETURN_IF_ERROR(r.ArrayWithRows("prior_u", dim, dim, &prior_u_));
  BNN_RETURN_IF_ERROR(r.Array("momentum", &momentum_));
  BNN_RETURN_IF_ERROR(r.Int("t", 0, std::numeric_limits<int64_t>::max(), &t_));
  // The same factorisation the step that produced (U, d) computed.
  return factor_.Factor(u_, d_);
}

template <typename T>
MemoryEstimate Slang<T>::EstimateMemory(const ModelSpec& spec, int64_t num_rows,
                                        int64_t) const {
  const int b = sizeof(T);
  const int64_t dim = spec.NumParameters();
  const int64_t rank = std::min<int64_t>(options_.rank, dim);
  const int64_t probes = std::min<int64_t>(rank + 2, dim);  // K
  const int64_t m = std::min<int64_t>(options_.batch_size, num_rows);
  const int64_t ms = m * options_.mc_samples;
  // mu, d, the prior, momentum and the step's D-vectors (g, squared sums,
  // the diagonal correction, the solve's right-hand side and result); the
  // samples and their noise.
  MemoryEstimate e = MinibatchMemory(
      spec, num_rows, {options_.batch_size, options_.mc_samples, b}, 11,
      "mean, diagonal, prior, momentum and step vectors", 2);
  e.Add("U, its update and the eigenvectors (3 x D x L)",
        VectorBytes(3, MulBytes({dim, rank}), b));
  e.Add("precision factorisation (V = d^-1/2 U and d, D x (L + 2))",
        VectorBytes(rank + 2, dim, b));
  EigSolver route = options_.eig_solver;
  if (route == EigSolver::kAuto) {
    // Once U has its L columns (without a snapshot prior).
    route = ResolveEigSolver(
        EstimateEigFlops(dim, rank, ms, static_cast<int>(rank),
                         options_.power_iterations, LayerWidth(spec)));
  }
  if (route == EigSolver::kExact) {
    // The (L + M S)^2 matrices: the Gram matrix, its two per-layer
    // products, the small matrix h, and TopEigenSolver's copies (the
    // Householder route's tridiagonalisation; the Lanczos route's basis,
    // at most a third of it, and its certificate).
    const int64_t gram = rank + ms;  // without a snapshot prior
    e.Add("exact eigensolver: U block and Gram matrix",
          AddBytes(VectorBytes(1, MulBytes({dim, rank}), b),
                   VectorBytes(7, MulBytes({gram, gram}), sizeof(double))));
  } else {
    // Probe blocks Q and Y, CholeskyQR's double basis (two in float), and
    // the J^T X products.
    e.Add("randomized eigensolver (D x (L + 2) blocks)",
          AddBytes(VectorBytes(2, MulBytes({dim, probes}), b),
                   VectorBytes(b == sizeof(float) ? 2 : 1,
                               MulBytes({dim, probes}), sizeof(double))));
    e.Add("J^T X products ((M S) x (L + 2))",
          VectorBytes(2, MulBytes({ms, probes}), b));
  }
  // ExportPosterior: mu, U, d and their factorisation in double.
  AddExported("exported posterior (double)",
              VectorBytes(2 * rank + 4, dim, sizeof(double)), &e);
  // The posterior in double (mu, U, d) and the prior and momentum.
  AddCheckpoint("mean, U, d, prior and momentum",
                AddBytes(VectorBytes(rank + 2, dim, sizeof(double)),
                         VectorBytes(3, dim, b)),
                &e);
  return e;
}

template <typename T>
absl::Status Slang<T>::Diverged(absl::string_view why) const {
  return absl::FailedPreconditionError(
      absl::StrCat("SLANG diverged at step ", t_, ": ", why,
                   "; try a smaller learning_rate or beta"));
}

template class Slang<float>;
template class Slang<double>;

Arithmetic ResolvePrecision(const SlangOptions& options,
                            const ModelSpec& spec) {
  if (options.precision != Arithmetic::kAuto) return options.precision;
  return LargestGemmFlops(spec, static_cast<int64_t>(options.batch_size) *
                                    options.mc_samples) >= kMinParallelGemmFlops
             ? Arithmetic::kFloat32
             : Arithmetic::kFloat64;
}

namespace {

// precision=auto: the arithmetic depends on the model, so the Slang<T> is
// made by Initialize() (ResolvePrecision) and every call is forwarded to it.
class AutoPrecisionSlang final : public VariationalMethod {
 public:
  AutoPrecisionSlang(const SlangOptions& options, bool online_eig)
      : options_(options), online_eig_(online_eig) {}

  absl::string_view name() const override {
    return online_eig_ ? "slang_online_eig" : "slang";
  }
  absl::Status Initialize(const ModelSpec& spec, const Dataset& train,
                          Rng& rng) override {
    BNN_RETURN_IF_ERROR(spec.Validate());
    if (ResolvePrecision(options_, spec) == Arithmetic::kFloat32) {
      method_ = std::make_unique<Slang<float>>(options_, online_eig_);
    } else {
      method_ = std::make_unique<Slang<double>>(options_, online_eig_);
    }
    return method_->Initialize(spec, train, rng);
  }
  absl::Status WarmStart(const Posterior& posterior, bool as_prior) override {
    return Initialized().WarmStart(posterior, as_prior);
  }
  void SetSchedule(int64_t steps_per_epoch, int64_t total_steps) override {
    Initialized().SetSchedule(steps_per_epoch, total_steps);
  }
  int batch_size() const override { return options_.batch_size; }
  int samples_per_step() const override { return options_.mc_samples; }
  absl::StatusOr<StepStats> Step(const std::vector<int64_t>& batch,
                                 Rng& rng) override {
    return Initialized().Step(batch, rng);
  }
  std::unique_ptr<Posterior> ExportPosterior() const override {
    return Initialized().ExportPosterior();
  }
  void ReleaseWorkspaces() override { Initialized().ReleaseWorkspaces(); }
  double noise_precision() const override {
    return options_.prior.noise_precision;
  }
  ParamMap Params() const override {
    return SlangOptionsSchema().ToParams(options_);
  }
  absl::Status SaveState(checkpoint::MethodState* state) const override {
    return Initialized().SaveState(state);
  }
  absl::Status LoadState(const checkpoint::MethodState& state) override {
    return Initialized().LoadState(state);
  }
  MemoryEstimate EstimateMemory(const ModelSpec& spec, int64_t num_rows,
                                int64_t total_steps) const override {
    if (ResolvePrecision(options_, spec) == Arithmetic::kFloat32) {
      return Slang<float>(options_, online_eig_)
          .EstimateMemory(spec, num_rows, total_steps);
    }
    return Slang<double>(options_, online_eig_)
        .EstimateMemory(spec, num_rows, total_steps);
  }

 private:
  // Every call but EstimateMemory() follows Initialize() (method.h).
  VariationalMethod& Initialized() const {
    BNN_CHECK(method_ != nullptr);
    return *method_;
  }

  SlangOptions options_;
  bool online_eig_;
  std::unique_ptr<VariationalMethod> method_;
};

}  // namespace

std::unique_ptr<VariationalMethod> CreateSlang(const SlangOptions& options,
                                               bool online_eig) {
  switch (options.precision) {
    case Arithmetic::kFloat32:
      return std::make_unique<Slang<float>>(options, online_eig);
    case Arithmetic::kFloat64:
      return std::make_unique<Slang<double>>(options, online_eig);
    case Arithmetic::kAuto:
      break;
  }
  return std::make_unique<AutoPrecisionSlang>(options, online_eig);
}

}  // namespace internal

EigFlops EstimateEigFlops(int64_t dim, int64_t p, int64_t n, int rank,
                          int power_iterations, int64_t layer_width) {
  const double d = static_cast<double>(dim), pd = static_cast<double>(p),
               nd = static_cast<double>(n), l = rank, k = rank + 2.0,
               w = static_cast<double>(layer_width);
  EigFlops flops;
  flops.randomized = (power_iterations + 1.0) *
                     (4 * d * nd * k + 4 * d * pd * k + 6 * d * k * k);
  const double m = pd + nd;  // columns of the factor [B, sqrt(w_g) J]
  // TopEigenSolver on an s x s matrix: the tridiagonalisation's 4/3 s^3
  // flops at half the GEMM rate, and the reflectors on L vectors.
  auto top_eig = [l](double s) {
    return 8.0 / 3.0 * s * s * s + 2 * s * s * l;
  };
  if (d <= m) {
    flops.exact = d * nd + 2 * d * d * m + top_eig(d);
  } else {
    flops.exact = 2 * d * nd * pd + 2 * d * pd * pd + 2 * nd * nd * w +
                  top_eig(m) + 2 * d * m * l;
  }
  return flops;
}

EigSolver ResolveEigSolver(const EigFlops& flops) {
  return flops.exact <= flops.randomized ? EigSolver::kExact
                                         : EigSolver::kRandomized;
}

absl::Status SlangOptions::Validate() const {
  BNN_RETURN_IF_ERROR(CheckIntRange("rank", rank, 1, 4096));
  BNN_RETURN_IF_ERROR(CheckIntRange("mc_samples", mc_samples, 1, 10000));
  BNN_RETURN_IF_ERROR(CheckIntRange("batch_size", batch_size, 1, 1 << 20));
  BNN_RETURN_IF_ERROR(CheckRange("learning_rate", learning_rate, 0, 10));
  BNN_RETURN_IF_ERROR(CheckRange("beta", beta, 0, 1));
  BNN_RETURN_IF_ERROR(CheckRange("decay", decay, 0, 10, true));
  BNN_RETURN_IF_ERROR(CheckRange("momentum", momentum, 0, 0.999999, true));
  BNN_RETURN_IF_ERROR(prior.Validate());
  BNN_RETURN_IF_ERROR(
      CheckIntRange("power_iterations", power_iterations, 1, 100));
  BNN_RETURN_IF_ERROR(CheckPositive("init_precision", init_precision));
  return CheckRange("eig_threshold", eig_threshold, 0, 1e300, true);
}

const OptionsSchema<SlangOptions>& SlangOptionsSchema() {
  static const auto* schema = [] {
    auto* s = new OptionsSchema<SlangOptions>();
    s->Field("rank", &SlangOptions::rank, "L, columns of U (eq. 3)")
        .Field("mc_samples", &SlangOptions::mc_samples,
               "S, MC weight samples per step")
        .Field("batch_size", &SlangOptions::batch_size, "M, minibatch size")
        .Field("learning_rate", &SlangOptions::learning_rate,
               "alpha_0, mean step size (eq. 11)")
        .Field("beta", &SlangOptions::beta,
               "beta_0, precision step size (eq. 9)")
        .Field("decay", &SlangOptions::decay,
               "omega in a_t = a_0/(1+t^omega); 0 disables")
        .Field("momentum", &SlangOptions::momentum,
               "gamma, EMA of the likelihood gradient")
        .Embed(&SlangOptions::prior, PriorOptionsSchema(),
               {"prior_precision", "bias_prior_precision", "noise_precision"})
        .Field("power_iterations", &SlangOptions::power_iterations,
               "randomized eigensolver power iterations")
        .Field("init_precision", &SlangOptions::init_precision,
               "d_0, initial diagonal precision")
        .Field("eig_threshold", &SlangOptions::eig_threshold,
               "drop eigenvalues <= this")
        .Enum("precision", &SlangOptions::precision,
              {{"auto", Arithmetic::kAuto},
               {"float64", Arithmetic::kFloat64},
               {"float32", Arithmetic::kFloat32}},
              "auto (float32 for large steps), float64 or float32 "
              "arithmetic for the big arrays")
        .Enum("eig_solver", &SlangOptions::eig_solver,
              {{"auto", EigSolver::kAuto},
               {"randomized", EigSolver::kRandomized},
               {"exact", EigSolver::kExact}},
              "auto (the cheaper of the two by flops), randomized (fast_eig, "
              "§5.3) or exact (Gram of the factors)");
    return s;
  }();
  return *schema;
}

void RegisterSlang(MethodRegistry& registry) {
  for (const bool online_eig : {false, true}) {
    BNN_CHECK_OK(registry.Add(
        online_eig ? "slang_online_eig" : "slang",
        online_eig
            ? "SLANG-OnlineEig: low-rank factors averaged from the top "
              "eigenpairs of the empirical Fisher alone (Mishkin et al. 2018, "
              "App. B)"
            : "SLANG: low-rank + diagonal Gaussian posterior by approximate "
              "natural gradient (Mishkin et al. 2018)",
        SlangOptionsSchema(),
        [online_eig](const SlangOptions& options)
            -> absl::StatusOr<std::unique_ptr<VariationalMethod>> {
          return internal::CreateSlang(options, online_eig);
        }));
  }
}

}  // namespace bnn
