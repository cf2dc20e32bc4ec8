#include "bnn/posterior/low_rank_gaussian.h"

#include <algorithm>
#include <cmath>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"

#include "bnn/core/snapshot.pb.h"
#include "bnn/memory.h"
#include "bnn/status.h"

#include "posterior/sample_tiles.h"

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

absl::Status LowRankGaussianPosterior::Sample(const CounterRng& rng,
                                              int num_samples,
                                              const Interrupt& interrupt,
                                              Eigen::MatrixXd* out) const {
  // LowRankPrecision::Sample in tiles of rows: theta = mu + d^-1/2 .* (eps -
  // V K V^T eps). The first pass draws eps into `out` and sums V^T eps over
  // the tiles, in tile order (so the sum does not depend on the threads);
  // the second finishes each tile in place.
  using internal::kSampleTileRows;
  const int64_t d = dim();
  const int s_count = num_samples;
  out->resize(d, s_count);
  const int64_t tiles = (d + kSampleTileRows - 1) / kSampleTileRows;
  const int64_t tile_values = kSampleTileRows * s_count;
  const Eigen::MatrixXd& v = factor_.SampleV();
  const Eigen::VectorXd& inv_sqrt_d = factor_.InvSqrtD();
  const int l = factor_.rank();
  auto rows = [&](int64_t t) {
    const int64_t r0 = t * kSampleTileRows;
    return std::make_pair(r0, std::min(kSampleTileRows, d - r0));
  };
  Eigen::MatrixXd vt_eps = Eigen::MatrixXd::Zero(l, s_count);
  if (l > 0) {
    std::vector<Eigen::MatrixXd> partial(
        internal::SampleTilesPerGroup(tile_values),
        Eigen::MatrixXd(l, s_count));
    int64_t group_begin = 0;
    BNN_RETURN_IF_ERROR(internal::ForEachSampleTile(
        tiles, tile_values, interrupt,
        [&](int64_t t) {
          const auto [r0, n] = rows(t);
          auto eps = out->middleRows(r0, n);
          internal::FillNormalRows(rng, r0, eps);
          partial[t - group_begin].noalias() =
              v.middleRows(r0, n).transpose() * eps;
        },
        [&](int64_t begin, int64_t end) {
          for (int64_t t = begin; t < end; ++t) vt_eps += partial[t - begin];
          group_begin = end;
        }));
    // Between the passes too, unless the draw is a single group.
    if (tiles > internal::SampleTilesPerGroup(tile_values)) {
      BNN_RETURN_IF_ERROR(interrupt.Check());
    }
  }
  const Eigen::MatrixXd small = factor_.SampleK() * vt_eps;
  return internal::ForEachSampleTile(
      tiles, tile_values, interrupt, [&](int64_t t) {
        const auto [r0, n] = rows(t);
        auto block = out->middleRows(r0, n);
        if (l == 0) internal::FillNormalRows(rng, r0, block);
        if (l > 0) block.noalias() -= v.middleRows(r0, n) * small;
        block = inv_sqrt_d.segment(r0, n).asDiagonal() * block;
        block.colwise() += mean_.segment(r0, n);
      });
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
  // The result (D x S, eps drawn in place); V^T eps summed over a group of
  // tiles (one L x S partial per tile), their sum and K times it.
  const int64_t partials =
      internal::SampleTilesPerGroup(internal::kSampleTileRows * num_samples) +
      2;
  return AddBytes(
      MulBytes({dim(), num_samples, sizeof(double)}),
      MulBytes({partials, factor_.rank(), num_samples, sizeof(double)}));
}

int64_t LowRankGaussianPosterior::LinearizedVarianceBytes(int64_t rows) const {
  // 1/d and Z (D x L), t = J^T Z and t W (rows x L), the result.
  return MulBytes({dim() + rows, factor_.rank() + 1, sizeof(double)});
}

}  // namespace bnn
