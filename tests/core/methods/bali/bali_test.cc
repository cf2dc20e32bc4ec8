// BALI against closed forms: one layer update with beta = 1 and the full data
// is the conjugate posterior of multivariate Bayesian linear regression
// (eq. 16); matrix-normal samples have covariance Sigma (x) R; and on the
// sinc task the predictive is more uncertain away from the data.
#include "bnn/methods/bali.h"

#include <cmath>

#include <Eigen/Dense>
#include <gtest/gtest.h>

#include "bnn/posterior/gaussian_families.h"
#include "bnn/predict/predictor.h"
#include "bnn/train/trainer.h"

#include "methods/bali/mniw.h"

namespace bnn {
namespace {

Eigen::MatrixXd Gaussian(int rows, int cols, Rng& rng) {
  Eigen::MatrixXd m(rows, cols);
  for (int j = 0; j < cols; ++j)
    for (int i = 0; i < rows; ++i) m(i, j) = rng.Normal();
  return m;
}

struct ClosedForm {
  Eigen::MatrixXd r, m, u;
};

// R = (R_0^-1 + X'X)^-1, M = R X'Y, U = U_0 + Y'Y - M' R^-1 M (M_0 = 0).
ClosedForm Conjugate(const Eigen::MatrixXd& x, const Eigen::MatrixXd& y,
                     double prior_variance, double u0) {
  ClosedForm c;
  Eigen::MatrixXd r_inv = x.transpose() * x;
  r_inv.diagonal().array() += 1 / prior_variance;
  c.r = r_inv.inverse();
  c.m = c.r * x.transpose() * y;
  c.u = y.transpose() * y - c.m.transpose() * r_inv * c.m;
  c.u.diagonal().array() += u0;
  return c;
}

double RelErr(const Eigen::MatrixXd& a, const Eigen::MatrixXd& b) {
  return (a - b).cwiseAbs().maxCoeff() / (1e-300 + b.cwiseAbs().maxCoeff());
}

TEST(MniwTest, ConjugateUpdateEqualsTheClosedForm) {
  Rng rng(1);
  const Eigen::MatrixXd x = Gaussian(40, 4, rng), y = Gaussian(40, 3, rng);
  const ClosedForm want = Conjugate(x, y, 2.5, 0.4);
  auto got = internal::ConjugateUpdate(x.transpose() * x, x.transpose() * y,
                                       y.transpose() * y, 2.5, 0.4);
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_LT(RelErr(got->m, want.m), 1e-9);
  EXPECT_LT(RelErr(got->r_inv.solve(Eigen::MatrixXd::Identity(4, 4)), want.r),
            1e-9);
  EXPECT_LT(RelErr(got->u, want.u), 1e-9);
  // An indefinite X'X is reported, not turned into NaN.
  auto bad =
      internal::ConjugateUpdate(-10 * Eigen::MatrixXd::Identity(4, 4),
                                x.transpose() * y, y.transpose() * y, 2.5, 0.4);
  EXPECT_EQ(bad.status().code(), absl::StatusCode::kFailedPrecondition);
}

TEST(BaliTest, FullBatchStepWithBetaOneIsTheConjugatePosterior) {
  // A linear model is one layer with the true targets (regression): after
  // one full-batch step with beta = 1 (so b_t = 1 and the EMA is the data)
  // and N_eff = N = B, the layer posterior is eq. 16 on [x, 1] and y.
  const int n = 30;
  Rng rng(2);
  Dataset data;
  data.num_features = 2;
  Eigen::MatrixXd x(n, 3), y(n, 1);
  for (int i = 0; i < n; ++i) {
    const double a = rng.Normal(), b = rng.Normal();
    data.features.insert(data.features.end(), {a, b});
    data.targets.push_back(0.5 * a - b + 0.2 * rng.Normal());
    x.row(i) << a, b, 1;
    y(i, 0) = data.targets.back();
  }
  TrainRequest r;
  r.method = "bali";
  r.params = {{"standardize", "false"},
              {"batch_size", "30"},
              {"beta", "1"},
              {"beta_decay_factor", "1"},
              {"prior_variance", "40"},
              {"noise_prior_scale", "0.01"}};
  r.options.epochs = 1;
  auto fit = Train(r, data, MethodRegistry::Builtin());
  ASSERT_TRUE(fit.ok()) << fit.status();
  const ClosedForm want = Conjugate(x, y, 40, 0.01 * n);
  const auto& layer =
      static_cast<const KroneckerPosterior&>(*fit->posterior).layers()[0];
  EXPECT_LT(RelErr(layer.mean.transpose(), want.m), 1e-9);
  EXPECT_LT(RelErr(layer.in_factor * layer.in_factor.transpose(), want.r),
            1e-9);
  // Sigma = U / (u_0 + N + D_y + 1) with u_0 = D_y + 1 (prior_dof = 1).
  const double dof = (1 + 1) + n + 1 + 1;
  EXPECT_LT(
      RelErr(layer.out_factor * layer.out_factor.transpose(), want.u / dof),
      1e-9);
  EXPECT_NEAR(fit->noise_precision, dof / want.u(0, 0), 1e-9 * dof);
}

TEST(MniwTest, MatrixNormalSamplesOfA3x2LayerHaveCovarianceSigmaKronR) {
  Rng rng(3);
  const Eigen::MatrixXd a = Gaussian(3, 3, rng), b = Gaussian(2, 2, rng);
  const Eigen::MatrixXd r =
      a * a.transpose() + 0.5 * Eigen::MatrixXd::Identity(3, 3);
  const Eigen::MatrixXd sigma =
      b * b.transpose() + 0.5 * Eigen::MatrixXd::Identity(2, 2);
  const Eigen::LLT<Eigen::MatrixXd> r_inv(r.inverse());
  const Eigen::MatrixXd l_sigma = sigma.llt().matrixL();
  const Eigen::MatrixXd m = Gaussian(3, 2, rng);
  const int n = 200000;
  Eigen::MatrixXd vecs(6, n);
  for (int k = 0; k < n; ++k) {
    const Eigen::MatrixXd w =
        internal::SampleMatrixNormal(m, r_inv, l_sigma, rng);
    vecs.col(k) = Eigen::Map<const Eigen::VectorXd>(w.data(), 6) -
                  Eigen::Map<const Eigen::VectorXd>(m.data(), 6);
  }
  const Eigen::MatrixXd cov = vecs * vecs.transpose() / n;
  // Column-major vec(W): Cov = Sigma (x) R.
  Eigen::MatrixXd want(6, 6);
  for (int i = 0; i < 2; ++i)
    for (int j = 0; j < 2; ++j)
      want.block(3 * i, 3 * j, 3, 3) = sigma(i, j) * r;
  const Eigen::VectorXd sd = want.diagonal().cwiseSqrt();
  for (int i = 0; i < 6; ++i)
    for (int j = 0; j < 6; ++j)
      EXPECT_NEAR(cov(i, j), want(i, j), 0.02 * sd[i] * sd[j]) << i << "," << j;
}

TEST(BaliTest, SincPredictiveIsMoreUncertainOutsideTheData) {
  // §5.1: f(x) = 2 sin(20 x)/(20 x) - 1 on x ~ U[-1, 1], noise 0.1.
  Rng rng(4);
  Dataset data;
  data.num_features = 1;
  for (int i = 0; i < 128; ++i) {
    const double x = rng.Uniform(-1, 1);
    data.features.push_back(x);
    data.targets.push_back(2 * std::sin(20 * x) / (20 * x) - 1 +
                           0.1 * rng.Normal());
  }
  TrainRequest r;
  r.method = "bali";
  r.hidden_sizes = {32, 32};
  r.activations = {Activation::kTanh};
  r.params = {{"batch_size", "128"}, {"init_std", "3"}};
  r.options.epochs = 600;
  r.options.seed = 2;
  auto fit = Train(r, data, MethodRegistry::Builtin());
  ASSERT_TRUE(fit.ok()) << fit.status();
  auto predictor = Predictor::Create(std::make_shared<Snapshot>(*fit));
  ASSERT_TRUE(predictor.ok());
  std::vector<double> inside, outside;
  for (double x = -0.9; x <= 0.9; x += 0.1) inside.push_back(x);
  for (double x = 1.5; x <= 2.0; x += 0.1) {
    outside.push_back(x);
    outside.push_back(-x);
  }
  PredictOptions o;
  o.num_samples = 256;
  auto in = (*predictor)->Predict(inside, inside.size(), o);
  auto out = (*predictor)->Predict(outside, outside.size(), o);
  ASSERT_TRUE(in.ok() && out.ok());
  double max_in = 0, min_out = 1e300;
  for (double v : in->epistemic_variance) max_in = std::max(max_in, v);
  for (double v : out->epistemic_variance) min_out = std::min(min_out, v);
  EXPECT_GT(min_out, max_in) << "max sd inside " << std::sqrt(max_in)
                             << ", min sd outside " << std::sqrt(min_out);
}

}  // namespace
}  // namespace bnn
