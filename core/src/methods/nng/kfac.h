// Internal: the Kronecker-factored curvature of noisy K-FAC (Zhang et al.
// 2018, eqs. 12-13, Alg. 2) and its block-tridiagonal extension (NNG-BlkTri,
// §3.5, after Martens & Grosse 2015 §4.3), separate from the method loop so
// tests can check it against its definitions. Layout: W~ = [W b] is out x (in +
// 1) (model_spec.h), so the input factor A is (in+1) x (in+1) and the output
// factor S is out x out.
#ifndef BNN_METHODS_NNG_KFAC_H_
#define BNN_METHODS_NNG_KFAC_H_

#include <vector>

#include "absl/status/status.h"
#include <Eigen/Core>

#include "bnn/model/model_spec.h"
#include "bnn/model/network.h"
#include "bnn/posterior/kronecker_chain.h"
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

// Standard normals for `count` weight samples (D x count), drawn layer by
// layer and, within a layer, sample by sample (the order SampleKfac uses).
void FillKfacNormals(const std::vector<LayerShape>& layers, int count, Rng& rng,
                     Eigen::MatrixXd* eps);

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

// The cross-layer moments of the block-tridiagonal K-FAC for the link
// between layers l and l + 1 (M&G 2015 §4.3): F_{l,l+1} ~ A_{l,l+1} (x)
// S_{l,l+1} with A_{l,l+1} = E[a_l a_{l+1}^T] ((in_l + 1) x (in_{l+1} + 1))
// and S_{l,l+1} = E[g_l g_{l+1}^T] (out_l x out_{l+1}), the same examples'
// inputs and pre-activation gradients as the diagonal factors.
struct KfacCrossFactors {
  Eigen::MatrixXd a, s;
};

// Zero cross moments (the chain starts as noisy K-FAC), one per link.
std::vector<KfacCrossFactors> InitialKfacCrossFactors(
    const std::vector<LayerShape>& layers);

// A_{l,l+1} <- (1 - beta) A_{l,l+1} + beta mean_i a_{l,i} a_{l+1,i}^T, and
// S_{l,l+1} likewise: eq. 12's EMA for the off-diagonal blocks. With the
// diagonal factors updated from the same rows and beta, the stacked
// moments stay positive semi-definite.
void UpdateKfacCrossStatistics(const PerExampleGrads<double>& grads,
                               double beta,
                               std::vector<KfacCrossFactors>* cross);

// The chain whose covariance is scale * F^-1 for M&G's block-tridiagonal
// approximation F of the Fisher, damped as noisy K-FAC damps its blocks:
// the diagonal blocks are A^x (x) S^x with A^x = A + pi sqrt(x) I and
// S^x = S + sqrt(x)/pi I (eq. 13, from the eigendecompositions of the last
// RefreshKfacFactors), the off-diagonal blocks A_{l,l+1} (x) S_{l,l+1}.
// F^-1 = Xi^T Lambda Xi (M&G eqs. in §4.3) with
//   Psi_l = A_{l,l+1} [A^x_{l+1}]^-1 (x) S_{l,l+1} [S^x_{l+1}]^-1,
//   Sigma_{l|l+1} = A^x_l (x) S^x_l - B_l (x) T_l,
//   B_l = A_{l,l+1} [A^x_{l+1}]^-1 A_{l,l+1}^T, T_l likewise,
// and Lambda_l = Sigma_{l|l+1}^-1 (Lambda_L = [A^x_L]^-1 (x) [S^x_L]^-1)
// diagonalised by the generalised eigenproblems B z = b A^x z and
// T y = t S^x y (M&G App. B): Z_in = P_A V with P_A the damped root of
// KfacFactors and V the eigenvectors of P_A^T B P_A, so Z_in^T A^x Z_in = I
// and Z_in^T B Z_in = diag(b). sqrt(scale) is folded into Z_in. A link
// whose cross moments are exactly zero is left out (Psi = 0, V = I): that
// layer's root is noisy K-FAC's. Internal error if the damped
// block-tridiagonal Fisher is not positive definite (t b >= 1).
absl::StatusOr<KroneckerChain> BuildKfacChain(
    const std::vector<KfacFactors>& factors,
    const std::vector<KfacCrossFactors>& cross, double x, double scale);

}  // namespace bnn::internal

#endif  // BNN_METHODS_NNG_KFAC_H_
