#include "methods/nng/kfac.h"

#include <cmath>

#include <Eigen/Eigenvalues>

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

void SampleKfac(const std::vector<LayerShape>& layers,
                const std::vector<KfacFactors>& factors,
                const Eigen::VectorXd& mean, double scale, double gamma_in,
                int count, Rng& rng, Eigen::MatrixXd* out) {
  out->resize(mean.size(), count);
  for (size_t l = 0; l < layers.size(); ++l) {
    const LayerShape& shape = layers[l];
    const Eigen::MatrixXd pa = factors[l].InputRoot(gamma_in);
    const Eigen::MatrixXd ps = factors[l].OutputRoot(gamma_in);
    Eigen::MatrixXd e(shape.out, shape.in + 1);
    for (int c = 0; c < count; ++c) {
      rng.FillNormal(e);
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

}  // namespace bnn::internal
