#include "bnn/posterior/kronecker_chain.h"

#include <algorithm>
#include <cmath>
#include <omp.h>

#include "absl/strings/str_cat.h"
#include <Eigen/QR>

#include "bnn/core/snapshot.pb.h"
#include "bnn/memory.h"
#include "bnn/status.h"

#include "posterior/gaussian_kl.h"
#include "posterior/sample_tiles.h"

namespace bnn {
namespace {

// C_l.^2: 1 / (1 - t b^T), out x (in + 1).
Eigen::MatrixXd ScaleSquared(const KroneckerChain::Layer& layer) {
  return (1.0 - (layer.out_coupling * layer.in_coupling.transpose()).array())
      .inverse()
      .matrix();
}

Eigen::MatrixXd Kron(const Eigen::MatrixXd& a, const Eigen::MatrixXd& b) {
  Eigen::MatrixXd k(a.rows() * b.rows(), a.cols() * b.cols());
  for (Eigen::Index i = 0; i < a.rows(); ++i)
    for (Eigen::Index j = 0; j < a.cols(); ++j)
      k.block(i * b.rows(), j * b.cols(), b.rows(), b.cols()) = a(i, j) * b;
  return k;
}

double LogAbsDet(const Eigen::MatrixXd& m) {
  return Eigen::ColPivHouseholderQR<Eigen::MatrixXd>(m).logAbsDeterminant();
}

Eigen::Map<const Eigen::MatrixXd> Block(const LayerShape& s, const double* v) {
  return Eigen::Map<const Eigen::MatrixXd>(v + s.offset, s.out, s.in + 1);
}
Eigen::Map<Eigen::MatrixXd> Block(const LayerShape& s, double* v) {
  return Eigen::Map<Eigen::MatrixXd>(v + s.offset, s.out, s.in + 1);
}

}  // namespace

absl::Status KroneckerChain::Check(
    const std::vector<LayerShape>& shapes) const {
  if (layers.size() != shapes.size() || links.size() + 1 != shapes.size()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "kronecker_chain posterior has ", layers.size(), " layers and ",
        links.size(), " links; the model has ", shapes.size(), " layers"));
  }
  for (size_t l = 0; l < layers.size(); ++l) {
    const Layer& y = layers[l];
    const int64_t rows = shapes[l].out, cols = shapes[l].in + 1;
    if (y.out_root.rows() != rows || y.out_root.cols() != rows ||
        y.in_root.rows() != cols || y.in_root.cols() != cols ||
        y.out_coupling.size() != rows || y.in_coupling.size() != cols) {
      return absl::InvalidArgumentError(absl::StrCat(
          "kronecker_chain layer ", l, " has out root ", y.out_root.rows(), "x",
          y.out_root.cols(), ", in root ", y.in_root.rows(), "x",
          y.in_root.cols(), ", couplings ", y.out_coupling.size(), " and ",
          y.in_coupling.size(), "; the model layer is ", rows, "x", cols));
    }
    if (!y.out_root.allFinite() || !y.in_root.allFinite() ||
        !std::isfinite(LogAbsDet(y.out_root)) ||
        !std::isfinite(LogAbsDet(y.in_root))) {
      return absl::InvalidArgumentError(
          absl::StrCat("kronecker_chain layer ", l,
                       ": roots must be finite and invertible"));
    }
    const double t_min = y.out_coupling.minCoeff();
    const double b_min = y.in_coupling.minCoeff();
    const double t_max = y.out_coupling.maxCoeff();
    const double b_max = y.in_coupling.maxCoeff();
    if (!(t_min >= 0) || !(b_min >= 0) || !(t_max * b_max < 1) ||
        !std::isfinite(t_max) || !std::isfinite(b_max)) {
      return absl::InvalidArgumentError(
          absl::StrCat("kronecker_chain layer ", l,
                       ": couplings must be >= 0 with t(o) b(i) < 1"));
    }
  }
  for (size_t l = 0; l < links.size(); ++l) {
    const Link& k = links[l];
    if (k.psi_out.rows() != shapes[l].out ||
        k.psi_out.cols() != shapes[l + 1].out ||
        k.psi_in.rows() != shapes[l].in + 1 ||
        k.psi_in.cols() != shapes[l + 1].in + 1) {
      return absl::InvalidArgumentError(absl::StrCat(
          "kronecker_chain link ", l, " has psi_out ", k.psi_out.rows(), "x",
          k.psi_out.cols(), " and psi_in ", k.psi_in.rows(), "x",
          k.psi_in.cols(), "; the layers are ", shapes[l].out, "x",
          shapes[l].in + 1, " and ", shapes[l + 1].out, "x",
          shapes[l + 1].in + 1));
    }
    if (!k.psi_out.allFinite() || !k.psi_in.allFinite()) {
      return absl::InvalidArgumentError(
          absl::StrCat("kronecker_chain link ", l, ": non-finite entry"));
    }
  }
  return absl::OkStatus();
}

void KroneckerChain::Transform(const std::vector<LayerShape>& shapes,
                               const double* eps, double* out) const {
  // z_l = R_l eps_l = Z_out (E_l .* C_l) Z_in^T; x = Xi^T z, i.e.
  // x_0 = z_0 and x_l = z_l - Psi_{l-1}^T z_{l-1}.
  Eigen::MatrixXd z, previous;
  for (size_t l = 0; l < layers.size(); ++l) {
    const Layer& y = layers[l];
    const LayerShape& s = shapes[l];
    z.noalias() = y.out_root *
                  Block(s, eps).cwiseProduct(ScaleSquared(y).cwiseSqrt()) *
                  y.in_root.transpose();
    auto x = Block(s, out);
    x = z;
    if (l > 0) {
      const Link& k = links[l - 1];
      x.noalias() -= k.psi_out.transpose() * previous * k.psi_in;
    }
    previous.swap(z);
  }
}

void KroneckerChain::ApplyCovariance(const std::vector<LayerShape>& shapes,
                                     const Eigen::VectorXd& v,
                                     Eigen::VectorXd* out) const {
  // Sigma v = Xi^T R R^T Xi v: u = Xi v (u_l = v_l - Psi_l v_{l+1}),
  // y_l = Z_out ((Z_out^T u_l Z_in) .* C_l^2) Z_in^T, then Xi^T y.
  out->resize(v.size());
  std::vector<Eigen::MatrixXd> y(layers.size());
  for (size_t l = 0; l < layers.size(); ++l) {
    const Layer& r = layers[l];
    Eigen::MatrixXd u = Block(shapes[l], v.data());
    if (l + 1 < layers.size()) {
      u.noalias() -= links[l].psi_out * Block(shapes[l + 1], v.data()) *
                     links[l].psi_in.transpose();
    }
    const Eigen::MatrixXd rotated =
        (r.out_root.transpose() * u * r.in_root).cwiseProduct(ScaleSquared(r));
    y[l].noalias() = r.out_root * rotated * r.in_root.transpose();
  }
  for (size_t l = 0; l < layers.size(); ++l) {
    auto x = Block(shapes[l], out->data());
    x = y[l];
    if (l > 0) {
      x.noalias() -=
          links[l - 1].psi_out.transpose() * y[l - 1] * links[l - 1].psi_in;
    }
  }
}

Eigen::VectorXd KroneckerChain::MarginalVariances(
    const std::vector<LayerShape>& shapes) const {
  // Var(x_l) = diag(R_l R_l^T) + diag(Psi_{l-1}^T R_{l-1} R_{l-1}^T Psi_{l-1})
  // (the z_l are independent), and diag((Z_in (x) Z_out) diag(c) (.)^T) =
  // (Z_out.^2) C^2 (Z_in.^2)^T.
  int64_t dim = 0;
  for (const LayerShape& s : shapes) dim = std::max(dim, s.offset + s.size());
  Eigen::VectorXd var(dim);
  for (size_t l = 0; l < layers.size(); ++l) {
    const Layer& r = layers[l];
    auto v = Block(shapes[l], var.data());
    v = r.out_root.cwiseAbs2() * ScaleSquared(r) *
        r.in_root.cwiseAbs2().transpose();
    if (l > 0) {
      const Layer& p = layers[l - 1];
      const Link& k = links[l - 1];
      const Eigen::MatrixXd out_root = k.psi_out.transpose() * p.out_root;
      const Eigen::MatrixXd in_root = k.psi_in.transpose() * p.in_root;
      v += out_root.cwiseAbs2() * ScaleSquared(p) *
           in_root.cwiseAbs2().transpose();
    }
  }
  return var;
}

double KroneckerChain::LogDetCovariance(
    const std::vector<LayerShape>& shapes) const {
  // det(Z_in (x) Z_out) = det(Z_in)^out det(Z_out)^(in+1).
  double log_det = 0;
  for (size_t l = 0; l < layers.size(); ++l) {
    const Layer& r = layers[l];
    log_det += 2.0 * (shapes[l].out * LogAbsDet(r.in_root) +
                      (shapes[l].in + 1) * LogAbsDet(r.out_root)) +
               ScaleSquared(r).array().log().sum();
  }
  return log_det;
}

Eigen::VectorXd KroneckerChain::QuadraticForms(
    const PerExampleGrads<double>& jacobian) const {
  // g^T Xi^T R R^T Xi g = sum_l |R_l^T (Xi g)_l|^2 with
  // (Xi g)_l = a_l (x) d_l - (Psi_in a_{l+1}) (x) (Psi_out d_{l+1}): with
  // p = Z_in^T a, q = Z_out^T d and p', q' those of the second term,
  // |R_l^T u|^2 = sum_oi C^2(o,i) (q_o p_i - q'_o p'_i)^2.
  Eigen::VectorXd total = Eigen::VectorXd::Zero(jacobian.count());
  for (size_t l = 0; l < layers.size(); ++l) {
    const Layer& r = layers[l];
    const Eigen::MatrixXd c2 = ScaleSquared(r);
    const Eigen::MatrixXd p = jacobian.inputs(l) * r.in_root;
    const Eigen::MatrixXd q = jacobian.deltas(l) * r.out_root;
    total += (q.cwiseAbs2() * c2).cwiseProduct(p.cwiseAbs2()).rowwise().sum();
    if (l + 1 < layers.size()) {
      const Link& k = links[l];
      const Eigen::MatrixXd p2 =
          jacobian.inputs(l + 1) * (k.psi_in.transpose() * r.in_root);
      const Eigen::MatrixXd q2 =
          jacobian.deltas(l + 1) * (k.psi_out.transpose() * r.out_root);
      total -= 2.0 * (q.cwiseProduct(q2) * c2)
                         .cwiseProduct(p.cwiseProduct(p2))
                         .rowwise()
                         .sum();
      total +=
          (q2.cwiseAbs2() * c2).cwiseProduct(p2.cwiseAbs2()).rowwise().sum();
    }
  }
  return total;
}

Eigen::MatrixXd KroneckerChain::DenseCovariance(
    const std::vector<LayerShape>& shapes) const {
  int64_t dim = 0;
  for (const LayerShape& s : shapes) dim = std::max(dim, s.offset + s.size());
  // X = Xi^T R, Sigma = X X^T.
  Eigen::MatrixXd root = Eigen::MatrixXd::Zero(dim, dim);
  Eigen::MatrixXd xi_t = Eigen::MatrixXd::Identity(dim, dim);
  for (size_t l = 0; l < layers.size(); ++l) {
    const LayerShape& s = shapes[l];
    const Eigen::VectorXd c = Eigen::Map<const Eigen::VectorXd>(
        ScaleSquared(layers[l]).cwiseSqrt().eval().data(), s.size());
    root.block(s.offset, s.offset, s.size(), s.size()) =
        Kron(layers[l].in_root, layers[l].out_root) * c.asDiagonal();
    if (l > 0) {
      const LayerShape& p = shapes[l - 1];
      xi_t.block(s.offset, p.offset, s.size(), p.size()) =
          -Kron(links[l - 1].psi_in, links[l - 1].psi_out).transpose();
    }
  }
  const Eigen::MatrixXd x = xi_t * root;
  return x * x.transpose();
}

int64_t KroneckerChain::NumValues() const {
  int64_t values = 0;
  for (const Layer& y : layers) {
    values += y.out_root.size() + y.in_root.size() + y.out_coupling.size() +
              y.in_coupling.size();
  }
  for (const Link& k : links) values += k.psi_out.size() + k.psi_in.size();
  return values;
}

// ------------------------------------------------------------- posterior

absl::StatusOr<std::unique_ptr<KroneckerChainPosterior>>
KroneckerChainPosterior::Create(const ModelSpec& model, Eigen::VectorXd mean,
                                KroneckerChain chain) {
  const std::vector<LayerShape> shapes = model.Layers();
  if (mean.size() != model.NumParameters()) {
    return absl::InvalidArgumentError(
        absl::StrCat("kronecker_chain posterior: mean has ", mean.size(),
                     " entries; the model has ", model.NumParameters()));
  }
  if (!mean.allFinite()) {
    return absl::InvalidArgumentError("posterior mean has a non-finite entry");
  }
  BNN_RETURN_IF_ERROR(chain.Check(shapes));
  auto p =
      std::unique_ptr<KroneckerChainPosterior>(new KroneckerChainPosterior());
  p->shapes_ = shapes;
  p->mean_ = std::move(mean);
  p->chain_ = std::move(chain);
  return p;
}

absl::Status KroneckerChainPosterior::Sample(const CounterRng& rng,
                                             int num_samples,
                                             const Interrupt& interrupt,
                                             Eigen::MatrixXd* out) const {
  // Column s: the normals of stream s, mapped through Xi^T R in place.
  const int64_t d = dim();
  out->resize(d, num_samples);
  return internal::ForEachColumnTile(num_samples, d, internal::kColumnsPerTile,
                                     interrupt, [&](int64_t c0, int64_t n) {
                                       for (int64_t s = c0; s < c0 + n; ++s) {
                                         double* col = out->col(s).data();
                                         rng.FillNormal(
                                             static_cast<uint64_t>(s), 0, col,
                                             static_cast<size_t>(d));
                                         chain_.Transform(shapes_, col, col);
                                         out->col(s) += mean_;
                                       }
                                     });
}

Eigen::VectorXd KroneckerChainPosterior::MarginalVariances() const {
  return chain_.MarginalVariances(shapes_);
}

absl::StatusOr<Eigen::MatrixXd> KroneckerChainPosterior::Covariance() const {
  BNN_RETURN_IF_ERROR(CheckDenseDim(dim()));
  return chain_.DenseCovariance(shapes_);
}

absl::StatusOr<double> KroneckerChainPosterior::KlToPrior(
    const Eigen::VectorXd& prior_precision) const {
  BNN_RETURN_IF_ERROR(internal::CheckPriorSize(prior_precision, dim()));
  return internal::GaussianKl(mean_, MarginalVariances(),
                              -chain_.LogDetCovariance(shapes_),
                              prior_precision);
}

absl::StatusOr<Eigen::VectorXd> KroneckerChainPosterior::LinearizedVariance(
    const PerExampleGrads<double>& jacobian) const {
  return chain_.QuadraticForms(jacobian);
}

void KroneckerChainPosterior::ToProto(snapshot::Posterior* proto) const {
  auto* p = proto->mutable_kronecker_chain();
  p->set_version(kVersion);
  auto assign = [](const auto& m, google::protobuf::RepeatedField<double>* f) {
    f->Assign(m.data(), m.data() + m.size());
  };
  for (size_t l = 0; l < shapes_.size(); ++l) {
    const KroneckerChain::Layer& y = chain_.layers[l];
    auto* pl = p->add_layers();
    pl->set_rows(shapes_[l].out);
    pl->set_cols(shapes_[l].in + 1);
    const auto mean = mean_.segment(shapes_[l].offset, shapes_[l].size());
    assign(mean, pl->mutable_mean());
    assign(y.out_root, pl->mutable_out_root());
    assign(y.in_root, pl->mutable_in_root());
    assign(y.out_coupling, pl->mutable_out_coupling());
    assign(y.in_coupling, pl->mutable_in_coupling());
  }
  for (const KroneckerChain::Link& k : chain_.links) {
    auto* pk = p->add_links();
    assign(k.psi_out, pk->mutable_psi_out());
    assign(k.psi_in, pk->mutable_psi_in());
  }
}

int64_t KroneckerChainPosterior::MemoryBytes() const {
  return MulBytes({mean_.size() + chain_.NumValues(), sizeof(double)});
}

int64_t KroneckerChainPosterior::SampleBytes(int num_samples) const {
  // The result, plus per thread the current and previous layer's z and the
  // scaled normals of the widest layer.
  int64_t widest = 0;
  for (const LayerShape& s : shapes_) widest = std::max(widest, s.size());
  return AddBytes(MulBytes({dim(), num_samples, sizeof(double)}),
                  MulBytes({4 * std::max(1, omp_get_max_threads()), widest,
                            sizeof(double)}));
}

int64_t KroneckerChainPosterior::LinearizedVarianceBytes(int64_t rows) const {
  // p, q, p', q' and two products of the widest pair of layers.
  int64_t widest = 0;
  for (const LayerShape& s : shapes_) {
    widest = std::max<int64_t>(widest, s.in + 1 + s.out);
  }
  return MulBytes({rows, 3 * widest + 3, sizeof(double)});
}

}  // namespace bnn
