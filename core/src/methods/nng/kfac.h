// Internal: the Kronecker-factored curvature of noisy K-FAC (Zhang et al.
// 2018, eqs. 12-13, Alg. 2), separate from the method loop so tests can check
// it against its definitions. Layout: W~ = [W b] is out x (in + 1)
// (model_spec.h), so the input factor A is (in+1) x (in+1) and the output
// factor S is out x out.
#ifndef BNN_METHODS_NNG_KFAC_H_
#define BNN_METHODS_NNG_KFAC_H_

#include <vector>

#include "absl/status/status.h"
#include <Eigen/Core>

#include "bnn/model/model_spec.h"
#include "bnn/model/network.h"
#include "bnn/random.h"

namespace bnn::internal {

struct KfacFactors {
  Eigen::MatrixXd a, s;    // EMA second moments E[a a^T], E[g g^T]
  Eigen::MatrixXd qa, qs;  // their eigenvectors ...
  Eigen::VectorXd da, ds;  // ... and eigenvalues (clamped >= 0)
  double pi = 1.0;         // sqrt((tr A / n_A) / (tr S / n_S)) (§11.1)

  // Damped inverse square roots, P P^T = (A + pi sqrt(x) I)^-1 and
  // (S + sqrt(x)/pi I)^-1.
  Eigen::MatrixXd InputRoot(double x) const;
  Eigen::MatrixXd OutputRoot(double x) const;
};

// A = S = c I for every layer of `layers`.
std::vector<KfacFactors> InitialKfacFactors(
    const std::vector<LayerShape>& layers, double c);

// A <- (1 - beta) A + beta mean_i a_i a_i^T, S likewise with the
// pre-activation gradients g_i (eq. 12), over every row of `grads`.
void UpdateKfacStatistics(const PerExampleGrads<double>& grads, double beta,
                          std::vector<KfacFactors>* factors);

// Eigendecompositions and pi (every T_inv steps).
absl::Status RefreshKfacFactors(std::vector<KfacFactors>* factors);

// Column c of `out` (D x count): W~_l = M_l + sqrt(scale) P_S E P_A^T with
// the gamma_in-damped roots, so Cov(vec W~_l) =
// scale (A + pi sqrt(g) I)^-1 (x) (S + sqrt(g)/pi I)^-1.
void SampleKfac(const std::vector<LayerShape>& layers,
                const std::vector<KfacFactors>& factors,
                const Eigen::VectorXd& mean, double scale, double gamma_in,
                int count, Rng& rng, Eigen::MatrixXd* out);

// out_l = (S + sqrt(g)/pi I)^-1 V_l (A + pi sqrt(g) I)^-1 per layer.
void PreconditionKfac(const std::vector<LayerShape>& layers,
                      const std::vector<KfacFactors>& factors, double gamma,
                      const Eigen::VectorXd& v, Eigen::VectorXd* out);

}  // namespace bnn::internal

#endif  // BNN_METHODS_NNG_KFAC_H_
