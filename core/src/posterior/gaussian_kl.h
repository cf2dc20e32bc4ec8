// KL(q || prior) of a Gaussian q against a diagonal Gaussian prior, shared by
// the Gaussian posterior families. Internal to the posterior families.
#ifndef BNN_POSTERIOR_GAUSSIAN_KL_H_
#define BNN_POSTERIOR_GAUSSIAN_KL_H_

#include <cstdint>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include <Eigen/Core>

namespace bnn::internal {

// KL(N(mu, S) || N(0, diag(1/lambda))) from diag(S) and log det S^-1.
inline double GaussianKl(const Eigen::VectorXd& mean,
                         const Eigen::VectorXd& variance,
                         double log_det_precision,
                         const Eigen::VectorXd& lambda) {
  return 0.5 * (lambda.dot(variance) + lambda.dot(mean.cwiseAbs2()) -
                static_cast<double>(mean.size()) - lambda.array().log().sum() +
                log_det_precision);
}

// InvalidArgument unless the prior has one precision per parameter.
inline absl::Status CheckPriorSize(const Eigen::VectorXd& lambda, int64_t dim) {
  if (lambda.size() != dim) {
    return absl::InvalidArgumentError(
        absl::StrCat("prior precision has ", lambda.size(),
                     " entries; the posterior has ", dim));
  }
  return absl::OkStatus();
}

}  // namespace bnn::internal

#endif  // BNN_POSTERIOR_GAUSSIAN_KL_H_
