#include "bnn/posterior/posterior.h"

#include "absl/strings/str_cat.h"
#include "bnn/core/snapshot.pb.h"
#include "bnn/posterior/low_rank_gaussian.h"
#include "bnn/status.h"

namespace bnn {
namespace {

Eigen::Map<const Eigen::VectorXd> AsVector(
    const google::protobuf::RepeatedField<double>& field) {
  return Eigen::Map<const Eigen::VectorXd>(field.data(), field.size());
}

absl::StatusOr<std::unique_ptr<Posterior>> LowRankFromProto(
    const snapshot::LowRankGaussian& p, int64_t dim) {
  if (p.mean_size() != dim || p.d_size() != dim) {
    return absl::InvalidArgumentError(absl::StrCat(
        "low_rank posterior: mean has ", p.mean_size(), " and d has ",
        p.d_size(), " entries; the model has ", dim, " parameters"));
  }
  if (p.rank() < 0 || p.u_size() != dim * static_cast<int64_t>(p.rank())) {
    return absl::InvalidArgumentError(
        absl::StrCat("low_rank posterior: U has ", p.u_size(),
                     " entries; expected ", dim, " x rank ", p.rank()));
  }
  Eigen::MatrixXd u =
      Eigen::Map<const Eigen::MatrixXd>(p.u().data(), dim, p.rank());
  BNN_ASSIGN_OR_RETURN(auto posterior,
                       LowRankGaussianPosterior::Create(AsVector(p.mean()),
                                                        std::move(u),
                                                        AsVector(p.d())));
  return std::unique_ptr<Posterior>(std::move(posterior));
}

}  // namespace

absl::StatusOr<std::unique_ptr<Posterior>> PosteriorFromProto(
    const snapshot::Posterior& proto, int64_t expected_dim) {
  switch (proto.family_case()) {
    case snapshot::Posterior::kLowRank:
      return LowRankFromProto(proto.low_rank(), expected_dim);
    case snapshot::Posterior::FAMILY_NOT_SET:
      break;
  }
  return absl::InvalidArgumentError(
      "snapshot has no posterior or an unknown posterior family (written by "
      "a newer bnn-serve?)");
}

}  // namespace bnn
