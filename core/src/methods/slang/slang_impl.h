// Internal: the SLANG method class, exposed to tests so that a step can be
// driven with fixed weight samples and the state inspected.
#ifndef BNN_METHODS_SLANG_SLANG_IMPL_H_
#define BNN_METHODS_SLANG_SLANG_IMPL_H_

#include <memory>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

#include "bnn/data/dataset.h"
#include "bnn/linalg/low_rank.h"
#include "bnn/methods/method.h"
#include "bnn/methods/slang.h"
#include "bnn/model/network.h"

namespace bnn::internal {

template <typename T>
class Slang final : public VariationalMethod {
 public:
  // online_eig: SLANG-OnlineEig (App. B, eqs. 17-21).
  explicit Slang(const SlangOptions& options, bool online_eig = false)
      : options_(options), online_eig_(online_eig) {}

  absl::string_view name() const override {
    return online_eig_ ? "slang_online_eig" : "slang";
  }
  int batch_size() const override { return options_.batch_size; }
  int samples_per_step() const override { return options_.mc_samples; }
  double noise_precision() const override {
    return options_.prior.noise_precision;
  }
  ParamMap Params() const override;

  absl::Status Initialize(const ModelSpec& spec, const Dataset& train,
                          Rng& rng) override;
  // From a low-rank (or diagonal) posterior; as a prior it becomes
  // N(mu_0, (U_0 U_0^T + D_0)^-1), whose low-rank part joins the eigen-update
  // and whose diagonal replaces lambda.
  absl::Status WarmStart(const Posterior& posterior, bool as_prior) override;
  // Draws S samples theta_s ~ q, then StepWithSamples(). Both run on one
  // thread when the step's largest layer product (M S rows) is below
  // kMinParallelGemmFlops, on the caller's OpenMP limit otherwise
  // (bnn/compute_threads.h): a small step is never slower on two threads.
  absl::StatusOr<StepStats> Step(const std::vector<int64_t>& batch,
                                 Rng& rng) override;
  // One update with the given weight samples (D x S); `rng` drives the
  // randomized eigensolver only.
  absl::StatusOr<StepStats> StepWithSamples(const std::vector<int64_t>& batch,
                                            const MatrixX<T>& theta, Rng& rng);
  std::unique_ptr<Posterior> ExportPosterior() const override;
  // The posterior (mu, U, d) in the snapshot's low-rank encoding, the prior
  // (lambda, and mu_0 and U_0 of a warm start's), the momentum and t; the
  // factorisation of U U^T + diag(d) is recomputed on loading.
  absl::Status SaveState(checkpoint::MethodState* state) const override;
  absl::Status LoadState(const checkpoint::MethodState& state) override;
  MemoryEstimate EstimateMemory(const ModelSpec& spec, int64_t num_rows,
                                int64_t total_steps) const override;

  void ReleaseWorkspaces() override;

  const VectorX<T>& mean() const { return mu_; }
  const MatrixX<T>& u() const { return u_; }
  const VectorX<T>& d() const { return d_; }
  // The prior N(prior_mean, (prior_u prior_u^T + diag(prior))^-1).
  const VectorX<T>& prior() const { return prior_; }
  const VectorX<T>& prior_mean() const { return prior_mean_; }
  const MatrixX<T>& prior_u() const { return prior_u_; }

 private:
  absl::Status Diverged(absl::string_view why) const;
  // Exact top-`rank` eigenpairs of w_u U U^T + w_g J J^T (eig_solver=exact).
  // Exact top-`rank` eigenpairs of B B^T + w_g J J^T for a dense factor
  // block B (D x p) (eig_solver=exact).
  void ExactEig(const MatrixX<T>& dense, double w_g, int rank,
                typename RandomizedEigSolver<T>::Result* result);

  // SLANG-OnlineEig's update of U and d from the top eigenpairs of G alone.
  void OnlineEigUpdate(double beta, double c, int kept);

  SlangOptions options_;
  bool online_eig_;
  std::unique_ptr<Network<T>> network_;
  const Dataset* train_ = nullptr;  // not owned; outlives training

  // Variational parameters and optimiser state; the prior (zero mean and
  // no low-rank part unless warm-started with as_prior).
  VectorX<T> mu_, d_, prior_, prior_mean_, momentum_;
  MatrixX<T> u_, prior_u_;
  int64_t t_ = 0;
  LowRankPrecision<T> factor_;  // kept in sync with (u_, d_)
  RandomizedEigSolver<T> eig_solver_;
  TopEigenSolver top_eig_;  // eig_solver=exact's small eigenproblem
  typename RandomizedEigSolver<T>::Result eig_;

  // Per-step workspaces, reused (no allocation once shapes settle).
  MatrixX<T> x_, eps_, theta_, jtx_, utx_, u_new_, step_, dense_, gram_;
  // The exact route's small eigenproblem: the matrix (L + M S square) and
  // its top eigenpairs.
  Eigen::MatrixXd small_, small_vectors_;
  Eigen::VectorXd small_values_;
  VectorX<T> y_, nll_, ghat_, sq_, delta_, rhs_, offset_;
  ForwardPass<T> pass_;
  PerExampleGrads<T> grads_;
};

extern template class Slang<float>;
extern template class Slang<double>;

// The arithmetic of a SLANG step for `spec`: options.precision, with auto
// resolved (float32 when the step's largest layer product over M S rows is
// at least kMinParallelGemmFlops, float64 below).
Arithmetic ResolvePrecision(const SlangOptions& options, const ModelSpec& spec);

// Slang<float> or Slang<double> for options.precision; for auto, a method
// that makes the one ResolvePrecision() picks in Initialize().
std::unique_ptr<VariationalMethod> CreateSlang(const SlangOptions& options,
                                               bool online_eig);

}  // namespace bnn::internal

#endif  // BNN_METHODS_SLANG_SLANG_IMPL_H_
