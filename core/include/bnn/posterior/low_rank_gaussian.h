// q(theta) = N(mu, (U U^T + diag(d))^-1): SLANG's family.
#ifndef BNN_POSTERIOR_LOW_RANK_GAUSSIAN_H_
#define BNN_POSTERIOR_LOW_RANK_GAUSSIAN_H_

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

#include "bnn/linalg/low_rank.h"
#include "bnn/posterior/posterior.h"

namespace bnn {

class LowRankGaussianPosterior final : public Posterior {
 public:
  // Fails unless sizes agree and d > 0 everywhere.
  static absl::StatusOr<std::unique_ptr<LowRankGaussianPosterior>> Create(
      Eigen::VectorXd mean, Eigen::MatrixXd u, Eigen::VectorXd d);

  absl::string_view family() const override { return "low_rank"; }
  int64_t dim() const override { return mean_.size(); }
  const Eigen::VectorXd& mean() const override { return mean_; }
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

  const Eigen::MatrixXd& u() const { return u_; }
  const Eigen::VectorXd& d() const { return d_; }
  const LowRankPrecision<double>& factor() const { return factor_; }

 private:
  LowRankGaussianPosterior() = default;

  Eigen::VectorXd mean_;
  Eigen::MatrixXd u_;
  Eigen::VectorXd d_;
  LowRankPrecision<double> factor_;
};

}  // namespace bnn

#endif  // BNN_POSTERIOR_LOW_RANK_GAUSSIAN_H_
