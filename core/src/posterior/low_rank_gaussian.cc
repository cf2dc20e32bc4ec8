#include "bnn/posterior/low_rank_gaussian.h"

#include <cmath>

#include "absl/strings/str_cat.h"

#include "bnn/core/snapshot.pb.h"
#include "bnn/memory.h"
#include "bnn/status.h"

namespace bnn {

absl::StatusOr<std::unique_ptr<LowRankGaussianPosterior>>
LowRankGaussianPosterior::Create(Eigen::VectorXd mean, Eigen::MatrixXd u,
                                 Eigen::VectorXd d) {
  if (d.size() != mean.size() || u.rows() != mean.size()) {
    return absl::InvalidArgumentError(
        absl::StrCat("low-rank posterior sizes disagree: mean ", mean.size(),
                     ", U ", u.rows(), "x", u.cols(), ", d ", d.size()));
  }
  if (!mean.allFinite()) {
    return absl::InvalidArgumentError("posterior mean has a non-finite entry");
  }
  std::unique_ptr<LowRankGaussianPosterior> p(new LowRankGaussianPosterior());
  BNN_RETURN_IF_ERROR(p->factor_.Factor(u, d));
  p->mean_ = std::move(mean);
  p->u_ = std::move(u);
  p->d_ = std::move(d);
  return p;
}

void LowRankGaussianPosterior::Sample(int num_samples, Rng& rng,
                                      Eigen::MatrixXd* out) const {
  Eigen::MatrixXd eps(dim(), num_samples);
  rng.FillNormal(eps);
  factor_.Sample(mean_, eps, out);
}

Eigen::VectorXd LowRankGaussianPosterior::MarginalVariances() const {
  return factor_.MarginalVariances();
}

absl::StatusOr<Eigen::MatrixXd> LowRankGaussianPosterior::Covariance() const {
  BNN_RETURN_IF_ERROR(CheckDenseDim(dim()));
  Eigen::MatrixXd sigma;
  factor_.Solve(Eigen::MatrixXd::Identity(dim(), dim()), &sigma);
  return Eigen::MatrixXd(0.5 * (sigma + sigma.transpose()));
}

absl::StatusOr<double> LowRankGaussianPosterior::KlToPrior(
    const Eigen::VectorXd& prior_precision) const {
  if (prior_precision.size() != dim()) {
    return absl::InvalidArgumentError(
        absl::StrCat("prior precision has ", prior_precision.size(),
                     " entries; the posterior has ", dim()));
  }
  // KL(N(mu, S) || N(0, diag(1/lambda))) =
  //   1/2 [sum lambda_j S_jj + sum lambda_j mu_j^2 - D - sum log lambda_j
  //        + log det S^-1]  (SLANG §9.7).
  const Eigen::VectorXd var = MarginalVariances();
  return 0.5 *
         (prior_precision.dot(var) + prior_precision.dot(mean_.cwiseAbs2()) -
          static_cast<double>(dim()) - prior_precision.array().log().sum() +
          factor_.LogDetPrecision());
}

absl::StatusOr<Eigen::VectorXd> LowRankGaussianPosterior::LinearizedVariance(
    const PerExampleGrads<double>& jacobian) const {
  // g^T (U U^T + D)^-1 g = sum_j g_j^2 / d_j - t^T W t with t = Z^T g
  // (Woodbury, low_rank.h), all through the Goodfellow factors.
  Eigen::VectorXd var;
  jacobian.WeightedSquaredNorms(d_.cwiseInverse(), &var);
  if (factor_.rank() > 0) {
    Eigen::MatrixXd t;
    jacobian.TransposeTimes(factor_.WoodburyZ(), &t);
    var -= ((t * factor_.WoodburyW()).array() * t.array())
               .rowwise()
               .sum()
               .matrix();
  }
  return var;
}

void LowRankGaussianPosterior::ToProto(snapshot::Posterior* proto) const {
  snapshot::LowRankGaussian* lr = proto->mutable_low_rank();
  lr->mutable_mean()->Assign(mean_.data(), mean_.data() + mean_.size());
  lr->set_rank(static_cast<int32_t>(u_.cols()));
  lr->mutable_u()->Assign(u_.data(), u_.data() + u_.size());
  lr->mutable_d()->Assign(d_.data(), d_.data() + d_.size());
}

int64_t LowRankGaussianPosterior::MemoryBytes() const {
  return static_cast<int64_t>(sizeof(double)) *
             (mean_.size() + u_.size() + d_.size()) +
         factor_.MemoryBytes();
}

int64_t LowRankGaussianPosterior::SampleBytes(int num_samples) const {
  // eps and the result (D x S each), V^T eps (L x S).
  return MulBytes({2 * dim() + factor_.rank(), num_samples, sizeof(double)});
}

int64_t LowRankGaussianPosterior::LinearizedVarianceBytes(int64_t rows) const {
  // 1/d and Z (D x L), t = J^T Z and t W (rows x L), the result.
  return MulBytes({dim() + rows, factor_.rank() + 1, sizeof(double)});
}

}  // namespace bnn
