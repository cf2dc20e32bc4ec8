// Posterior families known only through samples: an explicit sample set
// (HMC) and MC dropout's mask distribution.
#ifndef BNN_POSTERIOR_SAMPLE_FAMILIES_H_
#define BNN_POSTERIOR_SAMPLE_FAMILIES_H_

#include <memory>
#include <vector>

#include "absl/status/statusor.h"

#include "bnn/posterior/posterior.h"

namespace bnn {

// Stored weight samples (D x n). Sample(S) returns the first S columns of a
// random permutation (all of them, in order, when S == n, so a predictive
// with S == n averages over exactly the stored set), cycling when S > n.
class SampleSetPosterior final : public Posterior {
 public:
  static absl::StatusOr<std::unique_ptr<SampleSetPosterior>> Create(
      Eigen::MatrixXd samples);

  absl::string_view family() const override { return "samples"; }
  int64_t dim() const override { return samples_.rows(); }
  int num_stored() const { return static_cast<int>(samples_.cols()); }
  const Eigen::MatrixXd& samples() const { return samples_; }
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

 private:
  Eigen::MatrixXd samples_;
  Eigen::VectorXd mean_;
};

// MC dropout (Gal & Ghahramani 2016): a sample drops each input unit of the
// flagged layers with probability `rate` (the whole column of W~, never the
// bias column) and scales the kept columns by 1 / (1 - rate).
class DropoutPosterior final : public Posterior {
 public:
  static absl::StatusOr<std::unique_ptr<DropoutPosterior>> Create(
      const ModelSpec& model, Eigen::VectorXd weights, double rate,
      std::vector<bool> drop_inputs);

  absl::string_view family() const override { return "dropout"; }
  int64_t dim() const override { return weights_.size(); }
  double rate() const { return rate_; }
  // The expected weights (inverted dropout keeps E[W] = weights).
  const Eigen::VectorXd& mean() const override { return weights_; }
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
  Eigen::VectorXd weights_;
  double rate_ = 0.0;
  std::vector<bool> drop_inputs_;
};

}  // namespace bnn

#endif  // BNN_POSTERIOR_SAMPLE_FAMILIES_H_
