// Noisy natural gradient: K-FAC statistics against their definitions, the
// matrix-variate sample covariance against eq. 13, noisy Adam's fixed point on
// a conjugate model, and the Gamma noise model learning tau.
#include "bnn/methods/nng.h"

#include <cmath>

#include <Eigen/Dense>
#include <gtest/gtest.h>

#include "bnn/model/likelihood.h"
#include "bnn/posterior/posterior.h"
#include "bnn/train/trainer.h"

#include "methods/nng/kfac.h"

namespace bnn {
namespace {

Eigen::MatrixXd Gaussian(int rows, int cols, Rng& rng) {
  Eigen::MatrixXd m(rows, cols);
  for (int j = 0; j < cols; ++j)
    for (int i = 0; i < rows; ++i) m(i, j) = rng.Normal();
  return m;
}

TEST(KfacTest, StatisticsMatchTheirDefinitionsWithSampledTargets) {
  // With beta = 1 the factors are the minibatch statistics themselves:
  // A_l = mean_i a_i a_i^T (layer inputs with the bias 1) and
  // S_l = mean_i g_i g_i^T, g_i = d(-log p(y_s | x_i))/d z_l at targets y_s
  // drawn from the model.
  const ModelSpec spec =
      ModelSpec::ForTask(Task::kRegression, 2, 0, {3}, Activation::kTanh);
  const Network<double> net(spec);
  Rng rng(1);
  const Eigen::MatrixXd x = Gaussian(6, 2, rng);
  const Eigen::MatrixXd theta = Gaussian(spec.NumParameters(), 2, rng);
  ForwardPass<double> pass;
  net.Forward(x, theta, &pass);
  const double tau = 4.0;
  Eigen::VectorXd sampled(12);
  for (int r = 0; r < 12; ++r) {
    const double f = pass.output()(r, 0);
    sampled[r] = SampleTarget<double>(Likelihood::kGaussian, &f, 1, tau, rng);
  }
  PerExampleGrads<double> grads;
  net.Backward(sampled, tau, theta, pass, &grads, nullptr);
  auto factors = internal::InitialKfacFactors(net.layers(), 0.0);
  internal::UpdateKfacStatistics(grads, 1.0, &factors);

  // Per-example definitions, independently: layer inputs from single-row
  // passes and output-layer g = tau (f - y_s).
  Eigen::MatrixXd a0 = Eigen::MatrixXd::Zero(3, 3);
  Eigen::MatrixXd s1 = Eigen::MatrixXd::Zero(1, 1);
  for (int r = 0; r < 12; ++r) {
    const int sample = r / 6, row = r % 6;
    Eigen::Vector3d a(x(row, 0), x(row, 1), 1.0);
    a0 += a * a.transpose() / 12;
    ForwardPass<double> one;
    net.Forward(x.row(row), theta.col(sample), &one);
    const double g = tau * (one.output()(0, 0) - sampled[r]);
    s1(0, 0) += g * g / 12;
  }
  EXPECT_LT((factors[0].a - a0).cwiseAbs().maxCoeff(), 1e-12);
  EXPECT_NEAR(factors[1].s(0, 0), s1(0, 0), 1e-10);
  // The hidden layer's S from its per-example gradients (Goodfellow factor
  // rows), and its A from the hidden activations.
  const Eigen::MatrixXd& d0 = grads.deltas(0);
  EXPECT_LT((factors[0].s - d0.transpose() * d0 / 12).cwiseAbs().maxCoeff(),
            1e-12);
  const Eigen::MatrixXd& in1 = grads.inputs(1);
  EXPECT_LT((factors[1].a - in1.transpose() * in1 / 12).cwiseAbs().maxCoeff(),
            1e-12);
}

TEST(KfacTest, SampleCovarianceOfA3x2LayerMatchesEquation13) {
  // One layer of 3 outputs x (1 input + bias).
  const ModelSpec spec =
      ModelSpec::ForTask(Task::kMulticlass, 1, 3, {}, Activation::kRelu);
  ASSERT_EQ(spec.Layers()[0].out, 3);
  Rng rng(2);
  std::vector<internal::KfacFactors> factors(1);
  const Eigen::MatrixXd ra = Gaussian(2, 2, rng), rs = Gaussian(3, 3, rng);
  factors[0].a = ra * ra.transpose() + 0.3 * Eigen::MatrixXd::Identity(2, 2);
  factors[0].s = rs * rs.transpose() + 0.2 * Eigen::MatrixXd::Identity(3, 3);
  ASSERT_TRUE(internal::RefreshKfacFactors(&factors).ok());
  const double scale = 0.5, gamma_in = 0.8, pi = factors[0].pi;
  const Eigen::VectorXd mean = Gaussian(6, 1, rng);
  Eigen::MatrixXd samples;
  internal::SampleKfac(spec.Layers(), factors, mean, scale, gamma_in, 200000,
                       rng, &samples);
  const Eigen::MatrixXd c = samples.colwise() - mean;
  const Eigen::MatrixXd cov = c * c.transpose() / samples.cols();
  // Cov(vec W~) = scale (A + pi sqrt(g) I)^-1 (x) (S + sqrt(g)/pi I)^-1.
  const Eigen::MatrixXd ai =
      (factors[0].a +
       pi * std::sqrt(gamma_in) * Eigen::MatrixXd::Identity(2, 2))
          .inverse();
  const Eigen::MatrixXd si =
      (factors[0].s +
       std::sqrt(gamma_in) / pi * Eigen::MatrixXd::Identity(3, 3))
          .inverse();
  Eigen::MatrixXd want(6, 6);
  for (int i = 0; i < 2; ++i)
    for (int j = 0; j < 2; ++j)
      want.block(3 * i, 3 * j, 3, 3) = scale * ai(i, j) * si;
  const Eigen::VectorXd sd = want.diagonal().cwiseSqrt();
  for (int i = 0; i < 6; ++i)
    for (int j = 0; j < 6; ++j)
      EXPECT_NEAR(cov(i, j), want(i, j), 0.02 * sd[i] * sd[j]) << i << "," << j;
}

// y = w x + b + noise with x in {-1, +1} balanced: w and b decouple, the
// exact posterior is N(mean, 1/(N tau + lambda)) per coordinate, and it is
// also noisy Adam's fixed point (E[g^2] at sampled targets = tau x^2 = tau).
TEST(NoisyAdamTest, ReachesTheConjugatePosteriorFixedPoint) {
  const int n = 200;
  const double tau = 2.0;
  Rng rng(3);
  Dataset data;
  data.num_features = 1;
  double sxy = 0, sy = 0;
  for (int i = 0; i < n; ++i) {
    const double x = i % 2 ? 1.0 : -1.0;
    const double y = 0.7 * x - 0.4 + rng.Normal() / std::sqrt(tau);
    data.features.push_back(x);
    data.targets.push_back(y);
    sxy += x * y;
    sy += y;
  }
  const double post_var = 1.0 / (n * tau + 1.0);
  const double w_mean = tau * sxy * post_var, b_mean = tau * sy * post_var;

  TrainRequest r;
  r.method = "noisy_adam";
  r.params = {{"standardize", "false"}, {"noise_precision", "2"},
              {"batch_size", "20"},     {"learning_rate", "0.01"},
              {"beta", "0.002"},        {"mc_samples", "1"},
              {"momentum", "0.9"}};
  r.options.epochs = 800;
  r.options.seed = 5;
  auto fit = Train(r, data, MethodRegistry::Builtin());
  ASSERT_TRUE(fit.ok()) << fit.status();
  const Eigen::VectorXd mu = fit->posterior->mean();
  const Eigen::VectorXd var = fit->posterior->MarginalVariances();
  // Layout [w, b]. Stationary noise of the iterates ~0.3 posterior sd.
  EXPECT_NEAR(mu[0], w_mean, std::sqrt(post_var));
  EXPECT_NEAR(mu[1], b_mean, std::sqrt(post_var));
  // The EMA of g^2 with beta~ = 0.002 has ~5% relative noise.
  EXPECT_NEAR(var[0], post_var, 0.15 * post_var);
  EXPECT_NEAR(var[1], post_var, 0.15 * post_var);
}

TEST(NngTest, GammaNoiseModelLearnsTheNoisePrecision) {
  // Linear data with noise sd 0.5 (tau = 4 in original units); in the
  // standardised units the model sees, tau_std = 4 var(y).
  const int n = 2000;
  Rng rng(4);
  Dataset data;
  data.num_features = 2;
  for (int i = 0; i < n; ++i) {
    const double a = rng.Normal(), b = rng.Normal();
    data.features.insert(data.features.end(), {a, b});
    data.targets.push_back(1.2 * a - 0.8 * b + 0.5 * rng.Normal());
  }
  double mean = 0, var = 0;
  for (double y : data.targets) mean += y / n;
  for (double y : data.targets) var += (y - mean) * (y - mean) / n;
  for (const char* method : {"noisy_adam", "noisy_kfac"}) {
    TrainRequest r;
    r.method = method;
    r.params = {{"noise_model", "gamma"},
                {"batch_size", "100"},
                {"learning_rate", "0.05"},
                {"beta", "0.01"},
                {"noise_learning_rate", "0.05"}};
    r.options.epochs = 60;
    r.options.seed = 6;
    auto fit = Train(r, data, MethodRegistry::Builtin());
    ASSERT_TRUE(fit.ok()) << method << ": " << fit.status();
    EXPECT_NEAR(fit->noise_precision, 4.0 * var, 0.1 * 4.0 * var) << method;
  }
}

TEST(NngTest, NoisyKfacExportsAKroneckerPosterior) {
  Rng rng(7);
  Dataset data;
  data.num_features = 3;
  for (int i = 0; i < 100; ++i) {
    for (int f = 0; f < 3; ++f) data.features.push_back(rng.Normal());
    data.targets.push_back(rng.Normal());
  }
  TrainRequest r;
  r.method = "noisy_kfac";
  r.hidden_sizes = {5};
  r.options.epochs = 5;
  auto fit = Train(r, data, MethodRegistry::Builtin());
  ASSERT_TRUE(fit.ok()) << fit.status();
  EXPECT_EQ(fit->posterior->family(), "kronecker");
  EXPECT_TRUE(fit->posterior->MarginalVariances().allFinite());

  r.method = "nng_full";
  r.hidden_sizes = {2000};
  auto big = Train(r, data, MethodRegistry::Builtin());
  EXPECT_EQ(big.status().code(), absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace bnn
