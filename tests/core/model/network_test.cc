// Per-example gradients against central finite differences, and every
// Goodfellow product against the materialised gradient matrix J.
#include "bnn/model/network.h"

#include <cmath>
#include <tuple>

#include <gtest/gtest.h>

#include "bnn/model/likelihood.h"
#include "bnn/random.h"

namespace bnn {
namespace {

constexpr int kRows = 3;     // M
constexpr int kSamples = 2;  // S

ModelSpec SmallSpec(Activation activation, Likelihood likelihood) {
  ModelSpec spec;
  spec.input_dim = 3;
  spec.hidden_sizes = {4, 3};
  spec.activations = {activation, activation};
  spec.likelihood = likelihood;
  spec.output_dim = likelihood == Likelihood::kCategorical ? 3 : 1;
  return spec;
}

Eigen::MatrixXd RandomMatrix(int rows, int cols, Rng& rng, double scale = 1) {
  Eigen::MatrixXd m(rows, cols);
  for (int j = 0; j < cols; ++j) {
    for (int i = 0; i < rows; ++i) m(i, j) = scale * rng.Normal();
  }
  return m;
}

Eigen::VectorXd Targets(Likelihood likelihood, Rng& rng) {
  Eigen::VectorXd y(kRows);
  for (int i = 0; i < kRows; ++i) {
    switch (likelihood) {
      case Likelihood::kGaussian:
        y[i] = rng.Normal();
        break;
      case Likelihood::kBernoulli:
        y[i] = static_cast<double>(rng.UniformInt(2));
        break;
      case Likelihood::kCategorical:
        y[i] = static_cast<double>(rng.UniformInt(3));
        break;
    }
  }
  return y;
}

// -log p(y_i | x_i, theta) through a one-sample forward pass.
double ExampleNll(const Network<double>& net, const Eigen::MatrixXd& x, int i,
                  double y, const Eigen::VectorXd& theta, double tau) {
  ForwardPass<double> pass;
  net.Forward(x.row(i), theta, &pass);
  Eigen::VectorXd f = pass.output().row(0).transpose();
  return NegLogLikelihood<double>(net.spec().likelihood, f.data(),
                                  net.spec().output_dim, y, tau, nullptr);
}

class GradientTest
    : public ::testing::TestWithParam<std::tuple<Activation, Likelihood>> {};

TEST_P(GradientTest, PerExampleGradientsMatchCentralDifferences) {
  const auto [activation, likelihood] = GetParam();
  const Network<double> net(SmallSpec(activation, likelihood));
  Rng rng(17);
  const Eigen::MatrixXd x = RandomMatrix(kRows, 3, rng);
  const Eigen::MatrixXd theta =
      RandomMatrix(static_cast<int>(net.num_parameters()), kSamples, rng, 0.8);
  const Eigen::VectorXd y = Targets(likelihood, rng);
  const double tau = 2.5;

  ForwardPass<double> pass;
  net.Forward(x, theta, &pass);
  // The ReLU kink would defeat finite differences; the seed keeps every
  // pre-activation well away from it (checked, so a change of seed fails
  // loudly instead of flaking).
  for (size_t l = 0; l + 1 < pass.pre.size(); ++l) {
    ASSERT_GT(pass.pre[l].cwiseAbs().minCoeff(), 1e-3);
  }
  PerExampleGrads<double> grads;
  Eigen::VectorXd nll;
  net.Backward(y, tau, theta, pass, &grads, &nll);
  const Eigen::MatrixXd j = grads.Materialize();
  ASSERT_EQ(j.rows(), net.num_parameters());
  ASSERT_EQ(j.cols(), kRows * kSamples);

  const double h = 1e-6;
  double max_rel = 0;
  for (int s = 0; s < kSamples; ++s) {
    for (int i = 0; i < kRows; ++i) {
      const int col = s * kRows + i;
      EXPECT_NEAR(nll[col], ExampleNll(net, x, i, y[i], theta.col(s), tau),
                  1e-12);
      for (int64_t k = 0; k < net.num_parameters(); ++k) {
        Eigen::VectorXd plus = theta.col(s), minus = theta.col(s);
        plus[k] += h;
        minus[k] -= h;
        const double fd = (ExampleNll(net, x, i, y[i], plus, tau) -
                           ExampleNll(net, x, i, y[i], minus, tau)) /
                          (2 * h);
        const double rel =
            std::abs(j(k, col) - fd) / std::max(1e-3, std::abs(fd));
        max_rel = std::max(max_rel, rel);
      }
    }
  }
  EXPECT_LT(max_rel, 1e-4);
}

INSTANTIATE_TEST_SUITE_P(
    AllActivationsAndLikelihoods, GradientTest,
    ::testing::Combine(::testing::Values(Activation::kRelu, Activation::kTanh,
                                         Activation::kLeakyTanh,
                                         Activation::kIdentity),
                       ::testing::Values(Likelihood::kGaussian,
                                         Likelihood::kBernoulli,
                                         Likelihood::kCategorical)));

TEST(NetworkTest, LogisticRegressionHasOneLayerWithBiasLast) {
  ModelSpec spec;
  spec.input_dim = 2;
  spec.likelihood = Likelihood::kBernoulli;
  const Network<double> net(spec);
  ASSERT_EQ(net.num_parameters(), 3);
  // f(x) = w1 x1 + w2 x2 + b with theta = [w1, w2, b].
  Eigen::VectorXd theta(3);
  theta << 0.5, -2.0, 0.25;
  Eigen::MatrixXd x(1, 2);
  x << 3.0, 1.0;
  ForwardPass<double> pass;
  net.Forward(x, theta, &pass);
  EXPECT_DOUBLE_EQ(pass.output()(0, 0), 1.5 - 2.0 + 0.25);
}

TEST(NetworkTest, BatchedSamplesEqualSeparatePasses) {
  const Network<double> net(
      SmallSpec(Activation::kTanh, Likelihood::kGaussian));
  Rng rng(3);
  const Eigen::MatrixXd x = RandomMatrix(5, 3, rng);
  const Eigen::MatrixXd theta =
      RandomMatrix(static_cast<int>(net.num_parameters()), 4, rng);
  ForwardPass<double> all, one;
  net.Forward(x, theta, &all);
  for (int s = 0; s < 4; ++s) {
    net.Forward(x, theta.col(s), &one);
    EXPECT_LT((all.output().middleRows(s * 5, 5) - one.output())
                  .cwiseAbs()
                  .maxCoeff(),
              1e-12)
        << "sample " << s;
  }
}

class ProductsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    Rng rng(5);
    x_ = RandomMatrix(4, 3, rng);
    theta_ = RandomMatrix(static_cast<int>(net_.num_parameters()), 3, rng);
    y_ = Eigen::VectorXd::Zero(4);
    y_ << 0, 2, 1, 2;
    net_.Forward(x_, theta_, &pass_);
    net_.Backward(y_, 1.0, theta_, pass_, &grads_, nullptr);
    j_ = grads_.Materialize();
  }

  const Network<double> net_{
      SmallSpec(Activation::kLeakyTanh, Likelihood::kCategorical)};
  Eigen::MatrixXd x_, theta_, j_;
  Eigen::VectorXd y_;
  ForwardPass<double> pass_;
  PerExampleGrads<double> grads_;
};

TEST_F(ProductsTest, SumAndWeightedSum) {
  Eigen::VectorXd sum;
  grads_.Sum(&sum);
  EXPECT_LT((sum - j_.rowwise().sum()).cwiseAbs().maxCoeff(), 1e-12);
  Eigen::VectorXd w = Eigen::VectorXd::LinSpaced(j_.cols(), -1.0, 2.0);
  grads_.Sum(&sum, &w);
  EXPECT_LT((sum - j_ * w).cwiseAbs().maxCoeff(), 1e-12);
}

TEST_F(ProductsTest, SquaredSumIsDiagonalOfJJt) {
  Eigen::VectorXd sq;
  grads_.SquaredSum(&sq);
  EXPECT_LT((sq - j_.cwiseAbs2().rowwise().sum()).cwiseAbs().maxCoeff(), 1e-12);
}

TEST_F(ProductsTest, TransposeTimesTimesAndGram) {
  Rng rng(9);
  const Eigen::MatrixXd q = RandomMatrix(static_cast<int>(j_.rows()), 5, rng);
  Eigen::MatrixXd jtq;
  grads_.TransposeTimes(q, &jtq);
  EXPECT_LT((jtq - j_.transpose() * q).cwiseAbs().maxCoeff(), 1e-12);

  const Eigen::MatrixXd v = RandomMatrix(static_cast<int>(j_.cols()), 2, rng);
  Eigen::MatrixXd jv;
  grads_.Times(v, &jv);
  EXPECT_LT((jv - j_ * v).cwiseAbs().maxCoeff(), 1e-12);

  EXPECT_LT((grads_.Gram() - j_.transpose() * j_).cwiseAbs().maxCoeff(), 1e-12);
}

TEST(NetworkTest, FloatAgreesWithDouble) {
  const ModelSpec spec = SmallSpec(Activation::kRelu, Likelihood::kBernoulli);
  const Network<double> net_d(spec);
  const Network<float> net_f(spec);
  Rng rng(11);
  const Eigen::MatrixXd x = RandomMatrix(6, 3, rng);
  const Eigen::MatrixXd theta =
      RandomMatrix(static_cast<int>(net_d.num_parameters()), 2, rng);
  Eigen::VectorXd y(6);
  y << 0, 1, 1, 0, 1, 0;
  ForwardPass<double> pd;
  ForwardPass<float> pf;
  PerExampleGrads<double> gd;
  PerExampleGrads<float> gf;
  net_d.Forward(x, theta, &pd);
  net_f.Forward(x.cast<float>(), theta.cast<float>(), &pf);
  net_d.Backward(y, 1.0, theta, pd, &gd, nullptr);
  net_f.Backward(y.cast<float>(), 1.0f, theta.cast<float>(), pf, &gf, nullptr);
  const Eigen::MatrixXd jd = gd.Materialize();
  const Eigen::MatrixXd jf = gf.Materialize().cast<double>();
  EXPECT_LT((jd - jf).cwiseAbs().maxCoeff(),
            1e-5 * (1 + jd.cwiseAbs().maxCoeff()));
}

}  // namespace
}  // namespace bnn
