#include "bnn/posterior/gaussian_families.h"

#include <algorithm>
#include <cmath>
#include <omp.h>

#include "absl/strings/str_cat.h"

#include "bnn/core/snapshot.pb.h"
#include "bnn/memory.h"
#include "bnn/status.h"

#include "posterior/gaussian_kl.h"
#include "posterior/sample_tiles.h"

namespace bnn {
using internal::CheckPriorSize;
using internal::GaussianKl;

// ----------------------------------------------------------------- diagonal

absl::StatusOr<std::unique_ptr<DiagonalGaussianPosterior>>
DiagonalGaussianPosterior::Create(Eigen::VectorXd mean,
                                  Eigen::VectorXd variance) {
  if (mean.size() != variance.size()) {
    return absl::InvalidArgumentError(
        absl::StrCat("diagonal posterior: mean has ", mean.size(),
                     " entries, variance ", variance.size()));
  }
  if (!mean.allFinite()) {
    return absl::InvalidArgumentError("posterior mean has a non-finite entry");
  }
  for (int64_t j = 0; j < variance.size(); ++j) {
    if (!(variance[j] > 0) || !std::isfinite(variance[j])) {
      return absl::InvalidArgumentError(
          absl::StrCat("diagonal posterior: variance[", j, "] = ", variance[j],
                       " must be positive and finite"));
    }
  }
  auto p = std::unique_ptr<DiagonalGaussianPosterior>(
      new DiagonalGaussianPosterior());
  p->mean_ = std::move(mean);
  p->variance_ = std::move(variance);
  return p;
}

absl::Status DiagonalGaussianPosterior::Sample(const CounterRng& rng,
                                               int num_samples,
                                               const Interrupt& interrupt,
                                               Eigen::MatrixXd* out) const {
  using internal::kSampleTileRows;
  const int64_t d = dim();
  out->resize(d, num_samples);
  return internal::ForEachSampleTile(
      (d + kSampleTileRows - 1) / kSampleTileRows,
      kSampleTileRows * num_samples, interrupt, [&](int64_t t) {
        const int64_t r0 = t * kSampleTileRows;
        const int64_t n = std::min(kSampleTileRows, d - r0);
        auto block = out->middleRows(r0, n);
        internal::FillNormalRows(rng, r0, block);
        block = variance_.segment(r0, n).cwiseSqrt().asDiagonal() * block;
        block.colwise() += mean_.segment(r0, n);
      });
}

absl::StatusOr<Eigen::MatrixXd> DiagonalGaussianPosterior::Covariance() const {
  BNN_RETURN_IF_ERROR(CheckDenseDim(dim()));
  return Eigen::MatrixXd(variance_.asDiagonal());
}

absl::StatusOr<double> DiagonalGaussianPosterior::KlToPrior(
    const Eigen::VectorXd& prior_precision) const {
  if (auto s = CheckPriorSize(prior_precision, dim()); !s.ok()) return s;
  return GaussianKl(mean_, variance_, -variance_.array().log().sum(),
                    prior_precision);
}

absl::StatusOr<Eigen::VectorXd> DiagonalGaussianPosterior::LinearizedVariance(
    const PerExampleGrads<double>& jacobian) const {
  Eigen::VectorXd out;
  jacobian.WeightedSquaredNorms(variance_, &out);
  return out;
}

void DiagonalGaussianPosterior::ToProto(snapshot::Posterior* proto) const {
  auto* p = proto->mutable_diagonal();
  p->mutable_mean()->Assign(mean_.data(), mean_.data() + mean_.size());
  p->mutable_variance()->Assign(variance_.data(),
                                variance_.data() + variance_.size());
}

// --------------------------------------------------------------------- full

absl::StatusOr<std::unique_ptr<FullGaussianPosterior>>
FullGaussianPosterior::Create(Eigen::VectorXd mean, Eigen::MatrixXd precision) {
  const int64_t d = mean.size();
  if (d > kMaxDim) {
    return absl::InvalidArgumentError(
        absl::StrCat("full-covariance posterior of dimension ", d,
                     " exceeds the limit of ", kMaxDim, " parameters"));
  }
  if (precision.rows() != d || precision.cols() != d) {
    return absl::InvalidArgumentError(
        absl::StrCat("full posterior: precision is ", precision.rows(), "x",
                     precision.cols(), "; the mean has ", d, " entries"));
  }
  if (!mean.allFinite() || !precision.allFinite()) {
    return absl::InvalidArgumentError(
        "full posterior has a non-finite mean or precision entry");
  }
  if ((precision - precision.transpose()).cwiseAbs().maxCoeff() >
      1e-10 * (1 + precision.cwiseAbs().maxCoeff())) {
    return absl::InvalidArgumentError(
        "full posterior precision is not symmetric");
  }
  auto p = std::unique_ptr<FullGaussianPosterior>(new FullGaussianPosterior());
  p->llt_.compute(precision);
  if (p->llt_.info() != Eigen::Success) {
    return absl::InvalidArgumentError(
        "full posterior precision is not positive definite");
  }
  p->mean_ = std::move(mean);
  p->precision_ = std::move(precision);
  return p;
}

using internal::kColumnsPerTile;

absl::Status FullGaussianPosterior::Sample(const CounterRng& rng,
                                           int num_samples,
                                           const Interrupt& interrupt,
                                           Eigen::MatrixXd* out) const {
  // theta = mu + L^-T eps has covariance L^-T L^-1 = P^-1.
  const int64_t d = dim();
  out->resize(d, num_samples);
  return internal::ForEachColumnTile(
      num_samples, d, kColumnsPerTile, interrupt, [&](int64_t c0, int64_t n) {
        for (int64_t s = c0; s < c0 + n; ++s) {
          rng.FillNormal(static_cast<uint64_t>(s), 0, out->col(s).data(),
                         static_cast<size_t>(d));
        }
        auto block = out->middleCols(c0, n);
        llt_.matrixU().solveInPlace(block);
        block.colwise() += mean_;
      });
}

Eigen::VectorXd FullGaussianPosterior::MarginalVariances() const {
  // diag(P^-1) = squared column norms of L^-1.
  Eigen::MatrixXd l_inv = Eigen::MatrixXd::Identity(dim(), dim());
  llt_.matrixL().solveInPlace(l_inv);
  return l_inv.colwise().squaredNorm().transpose();
}

absl::StatusOr<Eigen::MatrixXd> FullGaussianPosterior::Covariance() const {
  Eigen::MatrixXd sigma = llt_.solve(Eigen::MatrixXd::Identity(dim(), dim()));
  return Eigen::MatrixXd(0.5 * (sigma + sigma.transpose()));
}

absl::StatusOr<double> FullGaussianPosterior::KlToPrior(
    const Eigen::VectorXd& prior_precision) const {
  if (auto s = CheckPriorSize(prior_precision, dim()); !s.ok()) return s;
  const double log_det = 2.0 * llt_.matrixLLT().diagonal().array().log().sum();
  return GaussianKl(mean_, MarginalVariances(), log_det, prior_precision);
}

absl::StatusOr<Eigen::VectorXd> FullGaussianPosterior::LinearizedVariance(
    const PerExampleGrads<double>& jacobian) const {
  // g^T P^-1 g = |L^-1 g|^2; D is small, so J is formed.
  Eigen::MatrixXd j = jacobian.Materialize();
  llt_.matrixL().solveInPlace(j);
  return Eigen::VectorXd(j.colwise().squaredNorm().transpose());
}

void FullGaussianPosterior::ToProto(snapshot::Posterior* proto) const {
  auto* p = proto->mutable_full();
  p->mutable_mean()->Assign(mean_.data(), mean_.data() + mean_.size());
  p->mutable_precision()->Assign(precision_.data(),
                                 precision_.data() + precision_.size());
}

// ---------------------------------------------------------------- kronecker

absl::StatusOr<std::unique_ptr<KroneckerPosterior>> KroneckerPosterior::Create(
    const ModelSpec& model, std::vector<Layer> layers) {
  const std::vector<LayerShape> shapes = model.Layers();
  if (layers.size() != shapes.size()) {
    return absl::InvalidArgumentError(
        absl::StrCat("kronecker posterior has ", layers.size(),
                     " layers; the model has ", shapes.size()));
  }
  auto p = std::unique_ptr<KroneckerPosterior>(new KroneckerPosterior());
  p->mean_.resize(model.NumParameters());
  for (size_t l = 0; l < layers.size(); ++l) {
    const LayerShape& s = shapes[l];
    const Layer& layer = layers[l];
    if (layer.mean.rows() != s.out || layer.mean.cols() != s.in + 1 ||
        layer.out_factor.rows() != s.out || layer.out_factor.cols() != s.out ||
        layer.in_factor.rows() != s.in + 1 ||
        layer.in_factor.cols() != s.in + 1) {
      return absl::InvalidArgumentError(absl::StrCat(
          "kronecker layer ", l, " has mean ", layer.mean.rows(), "x",
          layer.mean.cols(), ", out factor ", layer.out_factor.rows(), "x",
          layer.out_factor.cols(), ", in factor ", layer.in_factor.rows(), "x",
          layer.in_factor.cols(), "; the model layer is ", s.out, "x",
          s.in + 1));
    }
    for (const Eigen::MatrixXd* f : {&layer.out_factor, &layer.in_factor}) {
      const bool lower =
          f->isApprox(Eigen::MatrixXd(f->triangularView<Eigen::Lower>()));
      if (!f->allFinite() || !lower || !(f->diagonal().minCoeff() > 0)) {
        return absl::InvalidArgumentError(absl::StrCat(
            "kronecker layer ", l,
            ": factors must be finite, lower triangular, positive diagonal"));
      }
    }
    if (!layer.mean.allFinite()) {
      return absl::InvalidArgumentError(
          absl::StrCat("kronecker layer ", l, ": non-finite mean"));
    }
    p->mean_.segment(s.offset, s.size()) =
        Eigen::Map<const Eigen::VectorXd>(layer.mean.data(), s.size());
  }
  p->shapes_ = shapes;
  p->layers_ = std::move(layers);
  return p;
}

absl::Status KroneckerPosterior::Sample(const CounterRng& rng, int num_samples,
                                        const Interrupt& interrupt,
                                        Eigen::MatrixXd* out) const {
  // Per sample and layer W~ = M + L_out E L_in^T, E the layer's entries of
  // the sample's normals.
  const int64_t d = dim();
  out->resize(d, num_samples);
  return internal::ForEachColumnTile(
      num_samples, d, kColumnsPerTile, interrupt, [&](int64_t c0, int64_t n) {
        Eigen::MatrixXd e, product;
        for (int64_t s = c0; s < c0 + n; ++s) {
          for (size_t l = 0; l < layers_.size(); ++l) {
            const LayerShape& shape = shapes_[l];
            e.resize(shape.out, shape.in + 1);
            rng.FillNormal(static_cast<uint64_t>(s),
                           static_cast<uint64_t>(shape.offset), e.data(),
                           static_cast<size_t>(e.size()));
            product.noalias() =
                e *
                layers_[l].in_factor.transpose().triangularView<Eigen::Upper>();
            Eigen::Map<Eigen::MatrixXd> w(out->col(s).data() + shape.offset,
                                          shape.out, shape.in + 1);
            w.noalias() =
                layers_[l].out_factor.triangularView<Eigen::Lower>() * product;
            w += layers_[l].mean;
          }
        }
      });
}

Eigen::VectorXd KroneckerPosterior::MarginalVariances() const {
  Eigen::VectorXd var(dim());
  for (size_t l = 0; l < layers_.size(); ++l) {
    const LayerShape& s = shapes_[l];
    // Var(W_oi) = C_out(o, o) C_in(i, i).
    const Eigen::VectorXd out_var =
        layers_[l].out_factor.rowwise().squaredNorm();
    const Eigen::VectorXd in_var = layers_[l].in_factor.rowwise().squaredNorm();
    Eigen::Map<Eigen::MatrixXd>(var.data() + s.offset, s.out, s.in + 1) =
        out_var * in_var.transpose();
  }
  return var;
}

absl::StatusOr<Eigen::MatrixXd> KroneckerPosterior::Covariance() const {
  BNN_RETURN_IF_ERROR(CheckDenseDim(dim()));
  Eigen::MatrixXd cov = Eigen::MatrixXd::Zero(dim(), dim());
  for (size_t l = 0; l < layers_.size(); ++l) {
    const LayerShape& s = shapes_[l];
    const Eigen::MatrixXd c_out =
        layers_[l].out_factor * layers_[l].out_factor.transpose();
    const Eigen::MatrixXd c_in =
        layers_[l].in_factor * layers_[l].in_factor.transpose();
    // Cov(vec W~) = C_in (x) C_out for column-major vec.
    for (int i = 0; i <= s.in; ++i)
      for (int j = 0; j <= s.in; ++j)
        cov.block(s.offset + i * s.out, s.offset + j * s.out, s.out, s.out) =
            c_in(i, j) * c_out;
  }
  return cov;
}

absl::StatusOr<double> KroneckerPosterior::KlToPrior(
    const Eigen::VectorXd& prior_precision) const {
  if (auto s = CheckPriorSize(prior_precision, dim()); !s.ok()) return s;
  // log det(C_in (x) C_out)^-1 = -(out log det C_in + (in+1) log det C_out).
  double log_det_precision = 0;
  for (size_t l = 0; l < layers_.size(); ++l) {
    const LayerShape& s = shapes_[l];
    log_det_precision -=
        2.0 *
        (s.out * layers_[l].in_factor.diagonal().array().log().sum() +
         (s.in + 1) * layers_[l].out_factor.diagonal().array().log().sum());
  }
  return GaussianKl(mean_, MarginalVariances(), log_det_precision,
                    prior_precision);
}

absl::StatusOr<Eigen::VectorXd> KroneckerPosterior::LinearizedVariance(
    const PerExampleGrads<double>& jacobian) const {
  // g = a (x) delta per layer: g^T (C_in (x) C_out) g = |L_in^T a|^2
  // |L_out^T delta|^2, summed over the (independent) layers.
  Eigen::VectorXd var = Eigen::VectorXd::Zero(jacobian.count());
  for (size_t l = 0; l < layers_.size(); ++l) {
    const Eigen::VectorXd a =
        (jacobian.inputs(l) * layers_[l].in_factor).rowwise().squaredNorm();
    const Eigen::VectorXd d =
        (jacobian.deltas(l) * layers_[l].out_factor).rowwise().squaredNorm();
    var += a.cwiseProduct(d);
  }
  return var;
}

void KroneckerPosterior::ToProto(snapshot::Posterior* proto) const {
  auto* p = proto->mutable_kronecker();
  for (const Layer& layer : layers_) {
    auto* l = p->add_layers();
    l->set_rows(static_cast<int32_t>(layer.mean.rows()));
    l->set_cols(static_cast<int32_t>(layer.mean.cols()));
    l->mutable_mean()->Assign(layer.mean.data(),
                              layer.mean.data() + layer.mean.size());
    l->mutable_out_factor()->Assign(
        layer.out_factor.data(),
        layer.out_factor.data() + layer.out_factor.size());
    l->mutable_in_factor()->Assign(
        layer.in_factor.data(),
        layer.in_factor.data() + layer.in_factor.size());
  }
}

int64_t DiagonalGaussianPosterior::MemoryBytes() const {
  return MulBytes({2, dim(), sizeof(double)});
}

int64_t DiagonalGaussianPosterior::SampleBytes(int num_samples) const {
  // The result (the standard deviations are taken per tile of rows).
  return MulBytes({dim(), num_samples, sizeof(double)});
}

int64_t FullGaussianPosterior::MemoryBytes() const {
  // Mean, precision and its Cholesky factor.
  return MulBytes({dim(), 2 * dim() + 1, sizeof(double)});
}

int64_t FullGaussianPosterior::SampleBytes(int num_samples) const {
  return MulBytes({dim(), num_samples, sizeof(double)});  // solved in place
}

int64_t KroneckerPosterior::MemoryBytes() const {
  int64_t values = mean_.size();
  for (const Layer& l : layers_) {
    values += l.mean.size() + l.out_factor.size() + l.in_factor.size();
  }
  return MulBytes({values, sizeof(double)});
}

int64_t KroneckerPosterior::SampleBytes(int num_samples) const {
  // The result, plus E and E L_in^T of the widest layer on each thread.
  int64_t widest = 0;
  for (const LayerShape& shape : shapes_)
    widest = std::max(widest, shape.size());
  return AddBytes(MulBytes({dim(), num_samples, sizeof(double)}),
                  MulBytes({2 * std::max(1, omp_get_max_threads()), widest,
                            sizeof(double)}));
}

int64_t DiagonalGaussianPosterior::LinearizedVarianceBytes(int64_t rows) const {
  return MulBytes({rows, sizeof(double)});
}

int64_t FullGaussianPosterior::LinearizedVarianceBytes(int64_t rows) const {
  return MulBytes({dim() + 1, rows, sizeof(double)});  // J itself (D x rows)
}

int64_t KroneckerPosterior::LinearizedVarianceBytes(int64_t rows) const {
  // The widest layer's products A L_in and Delta L_out.
  int64_t widest = 0;
  for (const LayerShape& shape : shapes_) {
    widest = std::max<int64_t>(widest, shape.in + 1 + shape.out);
  }
  return MulBytes({rows, widest + 3, sizeof(double)});
}

}  // namespace bnn
