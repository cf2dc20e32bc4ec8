// Posterior families over the flat parameter vector theta (model_spec.h).
// A family can draw weight samples in the layout the Network reads, give its
// mean and marginal variances, its KL to a Gaussian prior, and serialise
// itself into a snapshot.
#ifndef BNN_POSTERIOR_POSTERIOR_H_
#define BNN_POSTERIOR_POSTERIOR_H_

#include <memory>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include <Eigen/Core>

#include "bnn/interrupt.h"
#include "bnn/model/model_spec.h"
#include "bnn/model/network.h"
#include "bnn/random.h"

namespace bnn {
namespace snapshot {
class Posterior;
}  // namespace snapshot

class Posterior {
 public:
  virtual ~Posterior() = default;

  // Family name as stored in snapshots, e.g. "low_rank".
  virtual absl::string_view family() const = 0;
  virtual int64_t dim() const = 0;
  virtual const Eigen::VectorXd& mean() const = 0;
  // Draws `num_samples` weight vectors into the columns of `out` (D x S).
  // Sample s is a function of the seed of `rng` and of s alone (the
  // Gaussian families and dropout: CounterRng stream s, entry j for weight
  // j; a sample set: a shuffle by the seed and S), so the same seed gives the
  // same samples, bit for bit, on any number of threads. Runs in parallel
  // (OpenMP, up to the calling thread's limit) over fixed tiles of rows or
  // samples, with Eigen on one thread inside each tile, checking `interrupt`
  // between groups of tiles of about kSampleGroupValues values: a non-OK
  // status ends the draw with that status (and `out` unspecified).
  virtual absl::Status Sample(const CounterRng& rng, int num_samples,
                              const Interrupt& interrupt,
                              Eigen::MatrixXd* out) const = 0;
  // Sample(CounterRng(seed), num_samples) without interruption.
  Eigen::MatrixXd Draw(uint64_t seed, int num_samples) const;
  // Weight values (entries of `out`) drawn between interrupt checks: a few
  // milliseconds of one core.
  static constexpr int64_t kSampleGroupValues = int64_t{1} << 20;
  virtual Eigen::VectorXd MarginalVariances() const = 0;
  // The dense D x D covariance, for small models (D <= kMaxDenseDim):
  // symmetric KLs and dense diagnostics. Unimplemented for families without
  // a Gaussian density.
  virtual absl::StatusOr<Eigen::MatrixXd> Covariance() const = 0;
  static constexpr int64_t kMaxDenseDim = 4096;
  // KL(q || N(0, diag(1 / prior_precision))); Unimplemented for families
  // without a density (sample sets, dropout).
  virtual absl::StatusOr<double> KlToPrior(
      const Eigen::VectorXd& prior_precision) const = 0;
  // diag(J^T Sigma J) for per-example output gradients J (the columns of
  // `jacobian`): the variance of the linearised (GLM) predictive, computed
  // through the family's structure. Unimplemented for non-Gaussian families.
  virtual absl::StatusOr<Eigen::VectorXd> LinearizedVariance(
      const PerExampleGrads<double>& jacobian) const = 0;
  virtual void ToProto(snapshot::Posterior* proto) const = 0;

  // Heap bytes this posterior holds (its state and factorisations), for
  // memory estimates (bnn/memory.h).
  virtual int64_t MemoryBytes() const = 0;
  // Peak heap bytes Sample(num_samples) allocates: the D x S result and the
  // family's temporaries.
  virtual int64_t SampleBytes(int num_samples) const = 0;
  // Peak heap bytes LinearizedVariance allocates for a Jacobian of `rows`
  // rows (0 for families without it).
  virtual int64_t LinearizedVarianceBytes(int64_t rows) const = 0;
};

// Rebuilds a posterior from a snapshot, checking its shapes against `model`
// and that every number is valid for the family.
absl::StatusOr<std::unique_ptr<Posterior>> PosteriorFromProto(
    const snapshot::Posterior& proto, const ModelSpec& model);

// InvalidArgument unless dim <= Posterior::kMaxDenseDim.
absl::Status CheckDenseDim(int64_t dim);

// The error of families without a Gaussian density.
absl::Status NotGaussianError(absl::string_view family, absl::string_view what);

}  // namespace bnn

#endif  // BNN_POSTERIOR_POSTERIOR_H_
