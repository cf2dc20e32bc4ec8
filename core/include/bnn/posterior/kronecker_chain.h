// A Gaussian over the layers' weights that is a chain: layer l depends on
// layer l - 1 only (the block-tridiagonal K-FAC of Martens & Grosse 2015,
// §4.3, used by NNG-BlkTri, Zhang et al. 2018 §3.5). With W~_l = [W_l b_l]
// (out_l x (in_l + 1)) and column-major vec, the covariance is
//
//   Sigma = Xi^T R R^T Xi,
//
// where Xi is block upper-bidiagonal with identities on the diagonal and
// -Psi_l = -(Psi_in,l (x) Psi_out,l) at block (l, l + 1), and R is block
// diagonal with the Kronecker-structured roots
//
//   R_l = (Z_in,l (x) Z_out,l) diag(vec C_l),
//   C_l(o, i) = 1 / sqrt(1 - t_l(o) b_l(i)),
//
// so Sigma is block-tridiagonal and Sigma^-1 = Xi^-1 (R R^T)^-1 Xi^-T. In
// M&G's notation R_l R_l^T = Sigma_{l|l+1}^-1, the inverse conditional
// covariance of the directed chain model, diagonalised by the generalised
// eigenvectors Z_in, Z_out with eigenvalues b, t (M&G App. B); the last
// layer has no successor and b = t = 0 make R_L a plain Kronecker root.
// Everything is computed through the factors, never the dense D x D matrix
// (except DenseCovariance, for small models).
#ifndef BNN_POSTERIOR_KRONECKER_CHAIN_H_
#define BNN_POSTERIOR_KRONECKER_CHAIN_H_

#include <memory>
#include <vector>

#include "absl/status/statusor.h"
#include <Eigen/Core>

#include "bnn/model/model_spec.h"
#include "bnn/model/network.h"
#include "bnn/posterior/posterior.h"

namespace bnn {

struct KroneckerChain {
  struct Layer {
    Eigen::MatrixXd out_root;      // Z_out, out x out
    Eigen::MatrixXd in_root;       // Z_in, (in + 1) x (in + 1)
    Eigen::VectorXd out_coupling;  // t, out entries in [0, 1)
    Eigen::VectorXd in_coupling;   // b, in + 1 entries in [0, 1)
  };
  // Link l couples layers l and l + 1: Psi_l = Psi_in (x) Psi_out.
  struct Link {
    Eigen::MatrixXd psi_out;  // out_l x out_{l+1}
    Eigen::MatrixXd psi_in;   // (in_l + 1) x (in_{l+1} + 1)
  };
  std::vector<Layer> layers;
  std::vector<Link> links;  // layers.size() - 1 of them

  // OK when the factors fit `shapes`, are finite, the roots are invertible
  // and every t(o) b(i) lies in [0, 1); otherwise InvalidArgument naming
  // the layer or link.
  absl::Status Check(const std::vector<LayerShape>& shapes) const;

  // Xi^T R eps for the standard normals `eps` (D entries in theta's layout):
  // a draw of N(0, Sigma) minus nothing, written to `out` (D entries; may
  // alias `eps`).
  void Transform(const std::vector<LayerShape>& shapes, const double* eps,
                 double* out) const;
  // Sigma v (D entries).
  void ApplyCovariance(const std::vector<LayerShape>& shapes,
                       const Eigen::VectorXd& v, Eigen::VectorXd* out) const;
  // diag(Sigma).
  Eigen::VectorXd MarginalVariances(
      const std::vector<LayerShape>& shapes) const;
  // log det Sigma (Xi is unit triangular: the sum over the layers of
  // log det R_l R_l^T).
  double LogDetCovariance(const std::vector<LayerShape>& shapes) const;
  // g_r^T Sigma g_r for the per-example gradients g_r of `jacobian`.
  Eigen::VectorXd QuadraticForms(const PerExampleGrads<double>& jacobian) const;
  // Sigma as a dense D x D matrix (tests and small models).
  Eigen::MatrixXd DenseCovariance(const std::vector<LayerShape>& shapes) const;
  // Values held: roots, couplings and links.
  int64_t NumValues() const;
};

// q = N(mean, Sigma) with Sigma a KroneckerChain (NNG-BlkTri).
class KroneckerChainPosterior final : public Posterior {
 public:
  // Layout version of the snapshot message (KroneckerChain.version).
  static constexpr uint32_t kVersion = 1;

  // Fails unless `chain` fits `model` (KroneckerChain::Check) and the mean
  // is finite with one entry per parameter.
  static absl::StatusOr<std::unique_ptr<KroneckerChainPosterior>> Create(
      const ModelSpec& model, Eigen::VectorXd mean, KroneckerChain chain);

  absl::string_view family() const override { return "kronecker_chain"; }
  int64_t dim() const override { return mean_.size(); }
  const Eigen::VectorXd& mean() const override { return mean_; }
  const KroneckerChain& chain() const { return chain_; }
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
  Eigen::VectorXd mean_;
  KroneckerChain chain_;
};

}  // namespace bnn

#endif  // BNN_POSTERIOR_KRONECKER_CHAIN_H_
