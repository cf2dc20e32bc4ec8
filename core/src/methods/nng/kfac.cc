#include "methods/nng/kfac.h"

#include <algorithm>
#include <cmath>

#include "absl/strings/str_cat.h"
#include <Eigen/Eigenvalues>

#include "bnn/status.h"

namespace bnn::internal {

Eigen::MatrixXd KfacFactors::InputRoot(double x) const {
  return qa * (da.array() + pi * std::sqrt(x)).rsqrt().matrix().asDiagonal();
}

Eigen::MatrixXd KfacFactors::OutputRoot(double x) const {
  return qs * (ds.array() + std::sqrt(x) / pi).rsqrt().matrix().asDiagonal();
}

std::vector<KfacFactors> InitialKfacFactors(
    const std::vector<LayerShape>& layers, double c) {
  std::vector<KfacFactors> factors;
  for (const LayerShape& shape : layers) {
    KfacFactors f;
    f.a = c * Eigen::MatrixXd::Identity(shape.in + 1, shape.in + 1);
    f.s = c * Eigen::MatrixXd::Identity(shape.out, shape.out);
    factors.push_back(std::move(f));
  }
  return factors;
}

void UpdateKfacStatistics(const PerExampleGrads<double>& grads, double beta,
                          std::vector<KfacFactors>* factors) {
  const double w = beta / grads.count();
  for (size_t l = 0; l < factors->size(); ++l) {
    KfacFactors& f = (*factors)[l];
    grads.AccumulateInputMoment(static_cast<int>(l), 1 - beta, w, &f.a);
    grads.AccumulateDeltaMoment(static_cast<int>(l), 1 - beta, w, &f.s);
  }
}

absl::Status RefreshKfacFactors(std::vector<KfacFactors>* factors) {
  for (KfacFactors& f : *factors) {
    Eigen::SelfAdjointEigenSolver<Eigen::MatrixXd> ea(f.a), es(f.s);
    if (ea.info() != Eigen::Success || es.info() != Eigen::Success) {
      return absl::InternalError("noisy_kfac: eigendecomposition failed");
    }
    f.qa = ea.eigenvectors();
    f.da = ea.eigenvalues().cwiseMax(0.0);
    f.qs = es.eigenvectors();
    f.ds = es.eigenvalues().cwiseMax(0.0);
    const double ta = f.a.trace() / f.a.rows(), ts = f.s.trace() / f.s.rows();
    f.pi = ta > 0 && ts > 0 ? std::sqrt(ta / ts) : 1.0;
  }
  return absl::OkStatus();
}

void FillKfacNormals(const std::vector<LayerShape>& layers, int count, Rng& rng,
                     Eigen::MatrixXd* eps) {
  int64_t dim = 0;
  for (const LayerShape& s : layers) dim = std::max(dim, s.offset + s.size());
  eps->resize(dim, count);
  for (const LayerShape& shape : layers) {
    for (int c = 0; c < count; ++c) {
      rng.FillNormal(Eigen::Map<Eigen::MatrixXd>(
          eps->col(c).data() + shape.offset, shape.out, shape.in + 1));
    }
  }
}

void SampleKfac(const std::vector<LayerShape>& layers,
                const std::vector<KfacFactors>& factors,
                const Eigen::VectorXd& mean, double scale, double gamma_in,
                int count, Rng& rng, Eigen::MatrixXd* out) {
  Eigen::MatrixXd eps;
  FillKfacNormals(layers, count, rng, &eps);
  out->resize(mean.size(), count);
  for (size_t l = 0; l < layers.size(); ++l) {
    const LayerShape& shape = layers[l];
    const Eigen::MatrixXd pa = factors[l].InputRoot(gamma_in);
    const Eigen::MatrixXd ps = factors[l].OutputRoot(gamma_in);
    for (int c = 0; c < count; ++c) {
      const auto e = Eigen::Map<const Eigen::MatrixXd>(
          eps.col(c).data() + shape.offset, shape.out, shape.in + 1);
      Eigen::Map<Eigen::MatrixXd>(out->col(c).data() + shape.offset, shape.out,
                                  shape.in + 1) =
          Eigen::Map<const Eigen::MatrixXd>(mean.data() + shape.offset,
                                            shape.out, shape.in + 1) +
          std::sqrt(scale) * ps * e * pa.transpose();
    }
  }
}

void PreconditionKfac(const std::vector<LayerShape>& layers,
                      const std::vector<KfacFactors>& factors, double gamma,
                      const Eigen::VectorXd& v, Eigen::VectorXd* out) {
  out->resize(v.size());
  const double root = std::sqrt(gamma);
  for (size_t l = 0; l < layers.size(); ++l) {
    const KfacFactors& f = factors[l];
    const LayerShape& s = layers[l];
    Eigen::Map<const Eigen::MatrixXd> vl(v.data() + s.offset, s.out, s.in + 1);
    // Q_S [(Q_S^T V Q_A) ./ ((d_S + c_S)(d_A + c_A)^T)] Q_A^T.
    const Eigen::MatrixXd rotated = f.qs.transpose() * vl * f.qa;
    const Eigen::MatrixXd denom =
        (f.ds.array() + root / f.pi).matrix() *
        (f.da.array() + f.pi * root).matrix().transpose();
    Eigen::Map<Eigen::MatrixXd>(out->data() + s.offset, s.out, s.in + 1) =
        f.qs * rotated.cwiseQuotient(denom) * f.qa.transpose();
  }
}

std::vector<KfacCrossFactors> InitialKfacCrossFactors(
    const std::vector<LayerShape>& layers) {
  std::vector<KfacCrossFactors> cross;
  for (size_t l = 0; l + 1 < layers.size(); ++l) {
    cross.push_back(
        {Eigen::MatrixXd::Zero(layers[l].in + 1, layers[l + 1].in + 1),
         Eigen::MatrixXd::Zero(layers[l].out, layers[l + 1].out)});
  }
  return cross;
}

void UpdateKfacCrossStatistics(const PerExampleGrads<double>& grads,
                               double beta,
                               std::vector<KfacCrossFactors>* cross) {
  const double w = beta / grads.count();
  for (size_t l = 0; l < cross->size(); ++l) {
    const int i = static_cast<int>(l);
    KfacCrossFactors& c = (*cross)[l];
    c.a *= 1 - beta;
    c.a.noalias() += w * grads.inputs(i).transpose() * grads.inputs(i + 1);
    c.s *= 1 - beta;
    c.s.noalias() += w * grads.deltas(i).transpose() * grads.deltas(i + 1);
  }
}

namespace {

// [A^x]^-1 from the eigendecomposition: Q diag(1 / (d + c)) Q^T.
Eigen::MatrixXd DampedInverse(const Eigen::MatrixXd& q,
                              const Eigen::VectorXd& d, double c) {
  return q * (d.array() + c).inverse().matrix().asDiagonal() * q.transpose();
}

// Z = P V and the eigenvalues of P^T B P (clamped >= 0), for the generalised
// eigenproblem B z = b (P P^T)^-1 z; V = I and b = 0 when `b_matrix` is 0.
absl::Status GeneralisedRoot(const Eigen::MatrixXd& p,
                             const Eigen::MatrixXd& b_matrix,
                             Eigen::MatrixXd* root, Eigen::VectorXd* values) {
  if (b_matrix.isZero(0)) {
    *root = p;
    values->setZero(p.cols());
    return absl::OkStatus();
  }
  const Eigen::MatrixXd whitened = p.transpose() * b_matrix * p;
  Eigen::SelfAdjointEigenSolver<Eigen::MatrixXd> eig(
      0.5 * (whitened + whitened.transpose()));
  if (eig.info() != Eigen::Success) {
    return absl::InternalError("nng_blktri: eigendecomposition failed");
  }
  *root = p * eig.eigenvectors();
  *values = eig.eigenvalues().cwiseMax(0.0);
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<KroneckerChain> BuildKfacChain(
    const std::vector<KfacFactors>& factors,
    const std::vector<KfacCrossFactors>& cross, double x, double scale) {
  const double root = std::sqrt(x);
  KroneckerChain chain;
  const size_t n = factors.size();
  chain.layers.resize(n);
  chain.links.resize(n - 1);
  for (size_t l = 0; l < n; ++l) {
    const KfacFactors& f = factors[l];
    const Eigen::MatrixXd pa = f.InputRoot(x);
    const Eigen::MatrixXd ps = f.OutputRoot(x);
    KroneckerChain::Layer& layer = chain.layers[l];
    if (l + 1 == n) {
      layer = {ps, std::sqrt(scale) * pa, Eigen::VectorXd::Zero(ps.rows()),
               Eigen::VectorXd::Zero(pa.rows())};
      break;
    }
    const KfacFactors& next = factors[l + 1];
    KroneckerChain::Link& link = chain.links[l];
    link.psi_in = cross[l].a * DampedInverse(next.qa, next.da, next.pi * root);
    link.psi_out = cross[l].s * DampedInverse(next.qs, next.ds, root / next.pi);
    const Eigen::MatrixXd b = link.psi_in * cross[l].a.transpose();
    const Eigen::MatrixXd t = link.psi_out * cross[l].s.transpose();
    BNN_RETURN_IF_ERROR(
        GeneralisedRoot(pa, b, &layer.in_root, &layer.in_coupling));
    layer.in_root *= std::sqrt(scale);
    BNN_RETURN_IF_ERROR(
        GeneralisedRoot(ps, t, &layer.out_root, &layer.out_coupling));
    if (!(layer.in_coupling.maxCoeff() * layer.out_coupling.maxCoeff() < 1)) {
      return absl::InternalError(absl::StrCat(
          "nng_blktri: the damped block-tridiagonal Fisher is not positive "
          "definite at layers ",
          l, " and ", l + 1, " (largest coupling product ",
          layer.in_coupling.maxCoeff() * layer.out_coupling.maxCoeff(), ")"));
    }
  }
  return chain;
}

}  // namespace bnn::internal
