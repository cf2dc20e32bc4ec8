#include "bnn/posterior/posterior.h"

#include <algorithm>
#include <omp.h>

#include "absl/strings/str_cat.h"

#include "bnn/check.h"
#include "bnn/compute_threads.h"
#include "bnn/core/snapshot.pb.h"
#include "bnn/posterior/gaussian_families.h"
#include "bnn/posterior/kronecker_chain.h"
#include "bnn/posterior/low_rank_gaussian.h"
#include "bnn/posterior/sample_families.h"
#include "bnn/status.h"

#include "posterior/sample_tiles.h"

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
                       LowRankGaussianPosterior::Create(
                           AsVector(p.mean()), std::move(u), AsVector(p.d())));
  return std::unique_ptr<Posterior>(std::move(posterior));
}

absl::Status CheckSize(absl::string_view what, int64_t got, int64_t want) {
  if (got != want) {
    return absl::InvalidArgumentError(
        absl::StrCat(what, " has ", got, " entries; expected ", want));
  }
  return absl::OkStatus();
}

Eigen::MatrixXd AsMatrix(const google::protobuf::RepeatedField<double>& f,
                         int64_t rows, int64_t cols) {
  return Eigen::Map<const Eigen::MatrixXd>(f.data(), rows, cols);
}

template <typename P>
absl::StatusOr<std::unique_ptr<Posterior>> Upcast(
    absl::StatusOr<std::unique_ptr<P>> p) {
  if (!p.ok()) return p.status();
  return std::unique_ptr<Posterior>(std::move(p).value());
}

absl::StatusOr<std::unique_ptr<Posterior>> DiagonalFromProto(
    const snapshot::DiagonalGaussian& p, int64_t dim) {
  BNN_RETURN_IF_ERROR(CheckSize("diagonal posterior mean", p.mean_size(), dim));
  BNN_RETURN_IF_ERROR(
      CheckSize("diagonal posterior variance", p.variance_size(), dim));
  return Upcast(DiagonalGaussianPosterior::Create(AsVector(p.mean()),
                                                  AsVector(p.variance())));
}

absl::StatusOr<std::unique_ptr<Posterior>> FullFromProto(
    const snapshot::FullGaussian& p, int64_t dim) {
  if (dim > FullGaussianPosterior::kMaxDim) {
    return absl::InvalidArgumentError(absl::StrCat(
        "full posterior for ", dim, " parameters exceeds the limit ",
        FullGaussianPosterior::kMaxDim));
  }
  BNN_RETURN_IF_ERROR(CheckSize("full posterior mean", p.mean_size(), dim));
  BNN_RETURN_IF_ERROR(
      CheckSize("full posterior precision", p.precision_size(), dim * dim));
  return Upcast(FullGaussianPosterior::Create(
      AsVector(p.mean()), AsMatrix(p.precision(), dim, dim)));
}

absl::StatusOr<std::unique_ptr<Posterior>> KroneckerFromProto(
    const snapshot::KroneckerLayers& p, const ModelSpec& model) {
  const std::vector<LayerShape> shapes = model.Layers();
  if (p.layers_size() != static_cast<int>(shapes.size())) {
    return absl::InvalidArgumentError(
        absl::StrCat("kronecker posterior has ", p.layers_size(),
                     " layers; the model has ", shapes.size()));
  }
  std::vector<KroneckerPosterior::Layer> layers;
  for (int l = 0; l < p.layers_size(); ++l) {
    const auto& pl = p.layers(l);
    const int64_t rows = shapes[l].out, cols = shapes[l].in + 1;
    if (pl.rows() != rows || pl.cols() != cols) {
      return absl::InvalidArgumentError(
          absl::StrCat("kronecker layer ", l, " is ", pl.rows(), "x", pl.cols(),
                       "; the model layer is ", rows, "x", cols));
    }
    const std::string name = absl::StrCat("kronecker layer ", l);
    BNN_RETURN_IF_ERROR(CheckSize(name + " mean", pl.mean_size(), rows * cols));
    BNN_RETURN_IF_ERROR(
        CheckSize(name + " out_factor", pl.out_factor_size(), rows * rows));
    BNN_RETURN_IF_ERROR(
        CheckSize(name + " in_factor", pl.in_factor_size(), cols * cols));
    layers.push_back({AsMatrix(pl.mean(), rows, cols),
                      AsMatrix(pl.out_factor(), rows, rows),
                      AsMatrix(pl.in_factor(), cols, cols)});
  }
  return Upcast(KroneckerPosterior::Create(model, std::move(layers)));
}

absl::StatusOr<std::unique_ptr<Posterior>> KroneckerChainFromProto(
    const snapshot::KroneckerChain& p, const ModelSpec& model) {
  if (p.version() < 1 || p.version() > KroneckerChainPosterior::kVersion) {
    return absl::InvalidArgumentError(absl::StrCat(
        "kronecker_chain posterior has layout version ", p.version(),
        "; this build reads versions 1 to ", KroneckerChainPosterior::kVersion,
        " (written by a newer bnn-serve?)"));
  }
  const std::vector<LayerShape> shapes = model.Layers();
  if (p.layers_size() != static_cast<int>(shapes.size()) ||
      p.links_size() + 1 != p.layers_size()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "kronecker_chain posterior has ", p.layers_size(), " layers and ",
        p.links_size(), " links; the model has ", shapes.size(), " layers"));
  }
  Eigen::VectorXd mean(model.NumParameters());
  KroneckerChain chain;
  for (int l = 0; l < p.layers_size(); ++l) {
    const auto& pl = p.layers(l);
    const int64_t rows = shapes[l].out, cols = shapes[l].in + 1;
    if (pl.rows() != rows || pl.cols() != cols) {
      return absl::InvalidArgumentError(
          absl::StrCat("kronecker_chain layer ", l, " is ", pl.rows(), "x",
                       pl.cols(), "; the model layer is ", rows, "x", cols));
    }
    const std::string name = absl::StrCat("kronecker_chain layer ", l);
    BNN_RETURN_IF_ERROR(CheckSize(name + " mean", pl.mean_size(), rows * cols));
    BNN_RETURN_IF_ERROR(
        CheckSize(name + " out_root", pl.out_root_size(), rows * rows));
    BNN_RETURN_IF_ERROR(
        CheckSize(name + " in_root", pl.in_root_size(), cols * cols));
    BNN_RETURN_IF_ERROR(
        CheckSize(name + " out_coupling", pl.out_coupling_size(), rows));
    BNN_RETURN_IF_ERROR(
        CheckSize(name + " in_coupling", pl.in_coupling_size(), cols));
    mean.segment(shapes[l].offset, rows * cols) = AsVector(pl.mean());
    chain.layers.push_back({AsMatrix(pl.out_root(), rows, rows),
                            AsMatrix(pl.in_root(), cols, cols),
                            AsVector(pl.out_coupling()),
                            AsVector(pl.in_coupling())});
  }
  for (int l = 0; l < p.links_size(); ++l) {
    const auto& pk = p.links(l);
    const std::string name = absl::StrCat("kronecker_chain link ", l);
    const int64_t rows = shapes[l].out, next_rows = shapes[l + 1].out;
    const int64_t cols = shapes[l].in + 1, next_cols = shapes[l + 1].in + 1;
    BNN_RETURN_IF_ERROR(
        CheckSize(name + " psi_out", pk.psi_out_size(), rows * next_rows));
    BNN_RETURN_IF_ERROR(
        CheckSize(name + " psi_in", pk.psi_in_size(), cols * next_cols));
    chain.links.push_back({AsMatrix(pk.psi_out(), rows, next_rows),
                           AsMatrix(pk.psi_in(), cols, next_cols)});
  }
  return Upcast(KroneckerChainPosterior::Create(model, std::move(mean),
                                                std::move(chain)));
}

absl::StatusOr<std::unique_ptr<Posterior>> SampleSetFromProto(
    const snapshot::SampleSet& p, int64_t dim) {
  if (p.num_samples() < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("sample-set posterior num_samples = ", p.num_samples(),
                     " must be >= 1"));
  }
  BNN_RETURN_IF_ERROR(CheckSize("sample-set posterior", p.samples_size(),
                                dim * p.num_samples()));
  return Upcast(
      SampleSetPosterior::Create(AsMatrix(p.samples(), dim, p.num_samples())));
}

absl::StatusOr<std::unique_ptr<Posterior>> DropoutFromProto(
    const snapshot::Dropout& p, const ModelSpec& model) {
  BNN_RETURN_IF_ERROR(CheckSize("dropout posterior weights", p.weights_size(),
                                model.NumParameters()));
  return Upcast(DropoutPosterior::Create(
      model, AsVector(p.weights()), p.rate(),
      std::vector<bool>(p.drop_inputs().begin(), p.drop_inputs().end())));
}

// Values of a group below which its tiles run on the calling thread alone:
// forking a team costs more than drawing them.
constexpr int64_t kMinParallelValues = int64_t{1} << 17;

}  // namespace

namespace internal {

int64_t SampleTilesPerGroup(int64_t values_per_tile) {
  return std::max<int64_t>(
      1, Posterior::kSampleGroupValues / std::max<int64_t>(1, values_per_tile));
}

absl::Status ForEachSampleTile(
    int64_t num_tiles, int64_t values_per_tile, const Interrupt& interrupt,
    const std::function<void(int64_t)>& tile,
    const std::function<void(int64_t, int64_t)>& after_group) {
  const int64_t per_group = SampleTilesPerGroup(values_per_tile);
  const int threads = omp_get_max_threads();
  // Eigen inside the tiles on one thread: its products' blocking, and so
  // their last bits, would otherwise depend on the thread count.
  const ScopedComputeThreads one(1);
  for (int64_t begin = 0; begin < num_tiles; begin += per_group) {
    if (begin > 0) BNN_RETURN_IF_ERROR(interrupt.Check());
    const int64_t end = std::min(num_tiles, begin + per_group);
    const bool parallel = threads > 1 && end - begin > 1 &&
                          (end - begin) * values_per_tile >= kMinParallelValues;
#pragma omp parallel for num_threads(threads) schedule(dynamic, 1) if (parallel)
    for (int64_t t = begin; t < end; ++t) tile(t);
    if (after_group) after_group(begin, end);
  }
  return absl::OkStatus();
}

void FillNormalRows(const CounterRng& rng, int64_t row0,
                    Eigen::Ref<Eigen::MatrixXd> block) {
  for (int64_t s = 0; s < block.cols(); ++s) {
    rng.FillNormal(static_cast<uint64_t>(s), static_cast<uint64_t>(row0),
                   block.col(s).data(), static_cast<size_t>(block.rows()));
  }
}

}  // namespace internal

Eigen::MatrixXd Posterior::Draw(uint64_t seed, int num_samples) const {
  Eigen::MatrixXd out;
  BNN_CHECK_OK(Sample(CounterRng(seed), num_samples, Interrupt(), &out));
  return out;
}

absl::Status CheckDenseDim(int64_t dim) {
  if (dim > Posterior::kMaxDenseDim) {
    return absl::InvalidArgumentError(absl::StrCat(
        "a dense covariance of ", dim, " parameters exceeds the limit of ",
        Posterior::kMaxDenseDim));
  }
  return absl::OkStatus();
}

absl::Status NotGaussianError(absl::string_view family,
                              absl::string_view what) {
  return absl::UnimplementedError(absl::StrCat(
      "the ", family, " posterior has no Gaussian density, so it has no ", what,
      "; use Monte Carlo prediction"));
}

absl::StatusOr<std::unique_ptr<Posterior>> PosteriorFromProto(
    const snapshot::Posterior& proto, const ModelSpec& model) {
  const int64_t dim = model.NumParameters();
  switch (proto.family_case()) {
    case snapshot::Posterior::kLowRank:
      return LowRankFromProto(proto.low_rank(), dim);
    case snapshot::Posterior::kDiagonal:
      return DiagonalFromProto(proto.diagonal(), dim);
    case snapshot::Posterior::kFull:
      return FullFromProto(proto.full(), dim);
    case snapshot::Posterior::kKronecker:
      return KroneckerFromProto(proto.kronecker(), model);
    case snapshot::Posterior::kKroneckerChain:
      return KroneckerChainFromProto(proto.kronecker_chain(), model);
    case snapshot::Posterior::kSamples:
      return SampleSetFromProto(proto.samples(), dim);
    case snapshot::Posterior::kDropout:
      return DropoutFromProto(proto.dropout(), model);
    case snapshot::Posterior::FAMILY_NOT_SET:
      break;
  }
  return absl::InvalidArgumentError(
      "snapshot has no posterior or an unknown posterior family (written by "
      "a newer bnn-serve?)");
}

}  // namespace bnn
