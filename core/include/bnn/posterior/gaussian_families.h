// The Gaussian posterior families besides SLANG's low-rank one: mean-field,
// full-covariance and layerwise matrix-normal (Kronecker-factored).
#ifndef BNN_POSTERIOR_GAUSSIAN_FAMILIES_H_
#define BNN_POSTERIOR_GAUSSIAN_FAMILIES_H_

#include <memory>
#include <vector>

#include "absl/status/statusor.h"
#include <Eigen/Cholesky>

#include "bnn/posterior/posterior.h"

namespace bnn {

// q = N(mean, diag(variance)): noisy Adam, BBB, VOGN-MF.
class DiagonalGaussianPosterior final : public Posterior {
 public:
  // Fails unless sizes agree, the mean is finite and variance > 0.
  static absl::StatusOr<std::unique_ptr<DiagonalGaussianPosterior>> Create(
      Eigen::VectorXd mean, Eigen::VectorXd variance);

  absl::string_view family() const override { return "diagonal"; }
  int64_t dim() const override { return mean_.size(); }
  const Eigen::VectorXd& mean() const override { return mean_; }
  absl::Status Sample(const CounterRng& rng, int num_samples,
                      const Interrupt& interrupt,
                      Eigen::MatrixXd* out) const override;
  Eigen::VectorXd MarginalVariances() const override { return variance_; }
  absl::StatusOr<Eigen::MatrixXd> Covariance() const override;
  absl::StatusOr<double> KlToPrior(
      const Eigen::VectorXd& prior_precision) const override;
  absl::StatusOr<Eigen::VectorXd> LinearizedVariance(
      const PerExampleGrads<double>& jacobian) const override;
  void ToProto(snapshot::Posterior* proto) const override;
  int64_t MemoryBytes() const override;
  int64_t SampleBytes(int num_samples) const override;
  int64_t LinearizedVarianceBytes(int64_t rows) const override;

 private:
  Eigen::VectorXd mean_, variance_;
};

// q = N(mean, P^-1) with a dense precision P (full-Gaussian VOGN/VON and the
// exact references; small D only).
class FullGaussianPosterior final : public Posterior {
 public:
  // Largest dimension a dense precision is accepted for (D^2 doubles).
  static constexpr int64_t kMaxDim = 4096;

  // Fails unless P is symmetric positive definite and sizes agree.
  static absl::StatusOr<std::unique_ptr<FullGaussianPosterior>> Create(
      Eigen::VectorXd mean, Eigen::MatrixXd precision);

  absl::string_view family() const override { return "full"; }
  int64_t dim() const override { return mean_.size(); }
  const Eigen::VectorXd& mean() const override { return mean_; }
  const Eigen::MatrixXd& precision() const { return precision_; }
  absl::Status Sample(const CounterRng& rng, int num_samples,
                      const Interrupt& interrupt,
                      Eigen::MatrixXd* out) const override;
  Eigen::VectorXd MarginalVariances() const override;
  absl::StatusOr<Eigen::MatrixXd> Covariance() const override;
  absl::StatusOr<double> KlToPrior(
      const Eigen::VectorXd& prior_precision) const override;
  absl::StatusOr<Eigen::VectorXd> LinearizedVariance(
      const PerExampleGrads<double>& jacobian) const override;
  void ToProto(snapshot::Posterior* proto) const override;
  int64_t MemoryBytes() const override;
  int64_t SampleBytes(int num_samples) const override;
  int64_t LinearizedVarianceBytes(int64_t rows) const override;

 private:
  Eigen::VectorXd mean_;
  Eigen::MatrixXd precision_;
  Eigen::LLT<Eigen::MatrixXd> llt_;  // P = L L^T
};

// Per layer vec(W~) ~ N(vec(M), C_in (x) C_out), W~ = [W b] (out x (in+1)),
// sampled as W~ = M + L_out E L_in^T (noisy K-FAC, BALI). Layers are
// independent.
class KroneckerPosterior final : public Posterior {
 public:
  struct Layer {
    Eigen::MatrixXd mean;        // out x (in + 1)
    Eigen::MatrixXd out_factor;  // lower Cholesky factor of C_out
    Eigen::MatrixXd in_factor;   // lower Cholesky factor of C_in
  };

  // Fails unless the layers match `model`'s shapes and the factors are lower
  // triangular with a positive diagonal.
  static absl::StatusOr<std::unique_ptr<KroneckerPosterior>> Create(
      const ModelSpec& model, std::vector<Layer> layers);

  absl::string_view family() const override { return "kronecker"; }
  int64_t dim() const override { return mean_.size(); }
  const Eigen::VectorXd& mean() const override { return mean_; }
  const std::vector<Layer>& layers() const { return layers_; }
  absl::Status Sample(const CounterRng& rng, int num_samples,
                      const Interrupt& interrupt,
                      Eigen::MatrixXd* out) const override;
  Eigen::VectorXd MarginalVariances() const override;
  absl::StatusOr<Eigen::MatrixXd> Covariance() const override;
  absl::StatusOr<double> KlToPrior(
      const Eigen::VectorXd& prior_precision) const override;
  absl::StatusOr<Eigen::VectorXd> LinearizedVariance(
      const PerExampleGrads<double>& jacobian) const override;
  void ToProto(snapshot::Posterior* proto) const override;
  int64_t MemoryBytes() const override;
  int64_t SampleBytes(int num_samples) const override;
  int64_t LinearizedVarianceBytes(int64_t rows) const override;

 private:
  std::vector<LayerShape> shapes_;
  std::vector<Layer> layers_;
  Eigen::VectorXd mean_;
};

}  // namespace bnn

#endif  // BNN_POSTERIOR_GAUSSIAN_FAMILIES_H_
