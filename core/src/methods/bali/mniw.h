// Internal: the matrix-normal-inverse-Wishart algebra of one BALI layer
// (Kurle et al. §3.1, eq. 16), separate from the method loop so tests
// can compare it with the closed-form conjugate posterior. Orientation of
// the paper: W is D_x x D_y and vec(W) ~ N(vec(M), Sigma (x) R).
#ifndef BNN_METHODS_BALI_MNIW_H_
#define BNN_METHODS_BALI_MNIW_H_

#include "absl/status/statusor.h"
#include <Eigen/Cholesky>
#include <Eigen/Core>

#include "bnn/random.h"

namespace bnn::internal {

struct MniwPosterior {
  Eigen::LLT<Eigen::MatrixXd> r_inv;  // Cholesky of R^-1 = R_0^-1 + X'X
  Eigen::MatrixXd m;                  // R X'Y            (M_0 = 0)
  Eigen::MatrixXd u;                  // U_0 + Y'Y - M' R^-1 M, symmetrised
};

// Eq. 16 with prior M_0 = 0, R_0 = prior_variance I and U_0 = u0_scale I,
// from the data terms X'X, X'Y, Y'Y. FailedPrecondition (not NaN) when
// R^-1 is not positive definite.
absl::StatusOr<MniwPosterior> ConjugateUpdate(const Eigen::MatrixXd& xx,
                                              const Eigen::MatrixXd& xy,
                                              const Eigen::MatrixXd& yy,
                                              double prior_variance,
                                              double u0_scale);

// W = M + L_R A L_Sigma' with A iid N(0, 1), L_R = L^-T for R^-1 = L L^T:
// vec(W - M) ~ N(0, Sigma (x) R). Never forms R.
Eigen::MatrixXd SampleMatrixNormal(const Eigen::MatrixXd& m,
                                   const Eigen::LLT<Eigen::MatrixXd>& r_inv,
                                   const Eigen::MatrixXd& l_sigma, Rng& rng);

}  // namespace bnn::internal

#endif  // BNN_METHODS_BALI_MNIW_H_
