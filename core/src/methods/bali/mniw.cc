#include "methods/bali/mniw.h"

namespace bnn::internal {

absl::StatusOr<MniwPosterior> ConjugateUpdate(const Eigen::MatrixXd& xx,
                                              const Eigen::MatrixXd& xy,
                                              const Eigen::MatrixXd& yy,
                                              double prior_variance,
                                              double u0_scale) {
  MniwPosterior post;
  Eigen::MatrixXd r_inv = 0.5 * (xx + xx.transpose());
  r_inv.diagonal().array() += 1.0 / prior_variance;
  post.r_inv.compute(r_inv);
  if (post.r_inv.info() != Eigen::Success) {
    return absl::FailedPreconditionError("R^-1 is not positive definite");
  }
  post.m = post.r_inv.solve(xy);
  // U = U_0 + Y'Y - M' R^-1 M = U_0 + Y'Y - (X'Y)' M: a difference of large
  // terms, so symmetrised (double throughout).
  post.u = yy - xy.transpose() * post.m;
  post.u = 0.5 * (post.u + post.u.transpose()).eval();
  post.u.diagonal().array() += u0_scale;
  return post;
}

Eigen::MatrixXd SampleMatrixNormal(const Eigen::MatrixXd& m,
                                   const Eigen::LLT<Eigen::MatrixXd>& r_inv,
                                   const Eigen::MatrixXd& l_sigma, Rng& rng) {
  Eigen::MatrixXd a(m.rows(), m.cols());
  rng.FillNormal(a);
  r_inv.matrixU().solveInPlace(a);  // L^-T A: row covariance R
  return m + a * l_sigma.transpose();
}

}  // namespace bnn::internal
