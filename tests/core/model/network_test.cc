// Per-example gradients against central finite differences (plain, with
// dropout masks and with pre-activation noise), and every Goodfellow product
// and Kronecker statistic against the materialised gradient matrix J.
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

// -log p(y_i | x_i, theta) through a one-sample forward pass, with `noise`
// (its masks restricted to this example's row) if non-null.
double ExampleNll(const Network<double>& net, const Eigen::MatrixXd& x, int i,
                  double y, const Eigen::VectorXd& theta, double tau,
                  const LayerNoise<double>* noise = nullptr) {
  ForwardPass<double> pass;
  net.Forward(x.row(i), theta, &pass, noise);
  Eigen::VectorXd f = pass.output().row(0).transpose();
  return NegLogLikelihood<double>(net.spec().likelihood, f.data(),
                                  net.spec().output_dim, y, tau, nullptr);
}

// Random inverted-dropout masks (0 or 2) on every layer's inputs, and a
// fixed additive noise on every pre-activation, one row per (sample,
// example); Rows() restricts both to some rows.
struct FixedNoise {
  std::vector<Eigen::MatrixXd> masks, offsets;

  LayerNoise<double> Rows(int first, int count) const {
    LayerNoise<double> noise;
    for (const auto& m : masks)
      noise.input_masks.push_back(m.middleRows(first, count));
    std::vector<Eigen::MatrixXd> rows;
    for (const auto& o : offsets) rows.push_back(o.middleRows(first, count));
    noise.pre_activation_noise = [rows](int l, const Eigen::MatrixXd&,
                                        Eigen::MatrixXd* z) { *z += rows[l]; };
    return noise;
  }
};

FixedNoise MakeNoise(const Network<double>& net, int rows, Rng& rng) {
  FixedNoise noise;
  for (const LayerShape& l : net.layers()) {
    Eigen::MatrixXd mask(rows, l.in);
    for (int j = 0; j < l.in; ++j)
      for (int r = 0; r < rows; ++r) mask(r, j) = rng.Uniform() < 0.3 ? 0 : 2;
    noise.masks.push_back(mask);
    noise.offsets.push_back(RandomMatrix(rows, l.out, rng, 0.3));
  }
  return noise;
}

// Backward's per-example gradients (and NLLs) against central differences
// of ExampleNll for every (sample, example) column, with `fixed` noise if
// non-null; returns the largest relative error.
double MaxGradientError(const Network<double>& net, const Eigen::MatrixXd& x,
                        const Eigen::MatrixXd& theta, const Eigen::VectorXd& y,
                        double tau, const FixedNoise* fixed) {
  const LayerNoise<double> noise = fixed != nullptr
                                       ? fixed->Rows(0, kRows * kSamples)
                                       : LayerNoise<double>();
  ForwardPass<double> pass;
  net.Forward(x, theta, &pass, fixed != nullptr ? &noise : nullptr);
  // The ReLU kink would defeat finite differences; the seed keeps every
  // pre-activation well away from it (checked, so a change of seed fails
  // loudly instead of flaking).
  for (size_t l = 0; l + 1 < pass.pre.size(); ++l) {
    EXPECT_GT(pass.pre[l].cwiseAbs().minCoeff(), 1e-3);
  }
  PerExampleGrads<double> grads;
  Eigen::VectorXd nll;
  net.Backward(y, tau, theta, pass, &grads, &nll);
  const Eigen::MatrixXd j = grads.Materialize();
  EXPECT_EQ(j.rows(), net.num_parameters());
  EXPECT_EQ(j.cols(), kRows * kSamples);

  const double h = 1e-6;
  double max_rel = 0;
  for (int s = 0; s < kSamples; ++s) {
    for (int i = 0; i < kRows; ++i) {
      const int col = s * kRows + i;
      const LayerNoise<double> row =
          fixed != nullptr ? fixed->Rows(col, 1) : LayerNoise<double>();
      const LayerNoise<double>* r = fixed != nullptr ? &row : nullptr;
      EXPECT_NEAR(nll[col], ExampleNll(net, x, i, y[i], theta.col(s), tau, r),
                  1e-12);
      for (int64_t k = 0; k < net.num_parameters(); ++k) {
        Eigen::VectorXd plus = theta.col(s), minus = theta.col(s);
        plus[k] += h;
        minus[k] -= h;
        const double fd = (ExampleNll(net, x, i, y[i], plus, tau, r) -
                           ExampleNll(net, x, i, y[i], minus, tau, r)) /
                          (2 * h);
        max_rel = std::max(
            max_rel, std::abs(j(k, col) - fd) / std::max(1e-3, std::abs(fd)));
      }
    }
  }
  return max_rel;
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
  EXPECT_LT(MaxGradientError(net, x, theta, y, 2.5, nullptr), 1e-4);
}

TEST_P(GradientTest, MaskedAndNoisyGradientsMatchCentralDifferences) {
  const auto [activation, likelihood] = GetParam();
  const Network<double> net(SmallSpec(activation, likelihood));
  Rng rng(23);
  const Eigen::MatrixXd x = RandomMatrix(kRows, 3, rng);
  const Eigen::MatrixXd theta =
      RandomMatrix(static_cast<int>(net.num_parameters()), kSamples, rng, 0.8);
  const Eigen::VectorXd y = Targets(likelihood, rng);
  const FixedNoise fixed = MakeNoise(net, kRows * kSamples, rng);
  EXPECT_LT(MaxGradientError(net, x, theta, y, 1.5, &fixed), 1e-4);
}

TEST_P(GradientTest, MasksOfOnesChangeNothing) {
  // Dropout with rate 0 is the plain network: same outputs and gradients.
  const auto [activation, likelihood] = GetParam();
  const Network<double> net(SmallSpec(activation, likelihood));
  Rng rng(29);
  const Eigen::MatrixXd x = RandomMatrix(kRows, 3, rng);
  const Eigen::MatrixXd theta =
      RandomMatrix(static_cast<int>(net.num_parameters()), kSamples, rng);
  const Eigen::VectorXd y = Targets(likelihood, rng);
  LayerNoise<double> ones;
  for (const LayerShape& l : net.layers()) {
    ones.input_masks.push_back(Eigen::MatrixXd::Ones(kRows * kSamples, l.in));
  }
  ForwardPass<double> plain_pass, masked_pass;
  PerExampleGrads<double> plain, masked;
  net.Forward(x, theta, &plain_pass);
  net.Backward(y, 2.0, theta, plain_pass, &plain, nullptr);
  net.Forward(x, theta, &masked_pass, &ones);
  net.Backward(y, 2.0, theta, masked_pass, &masked, nullptr);
  EXPECT_EQ(plain_pass.output(), masked_pass.output());
  EXPECT_EQ(plain.Materialize(), masked.Materialize());
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

// Gram's scratch products are reused across calls, minibatch sizes and
// heads (one output for regression and binary classification, several for
// categorical).
TEST(GramTest, OneOutputHeadAndReusedBuffers) {
  Rng rng(13);
  for (const Likelihood likelihood :
       {Likelihood::kGaussian, Likelihood::kBernoulli,
        Likelihood::kCategorical}) {
    const Network<double> net(SmallSpec(Activation::kRelu, likelihood));
    PerExampleGrads<double> grads;
    ForwardPass<double> pass;
    Eigen::MatrixXd gram;
    for (const int rows : {6, 2, 9}) {
      const Eigen::MatrixXd x = RandomMatrix(rows, 3, rng);
      const Eigen::MatrixXd theta =
          RandomMatrix(static_cast<int>(net.num_parameters()), 2, rng);
      Eigen::VectorXd y(rows);
      for (int i = 0; i < rows; ++i) y[i] = i % 2;
      net.Forward(x, theta, &pass);
      net.Backward(y, 1.0, theta, pass, &grads, nullptr);
      const Eigen::MatrixXd j = grads.Materialize();
      grads.Gram(&gram);
      EXPECT_LT((gram - j.transpose() * j).cwiseAbs().maxCoeff(), 1e-12)
          << LikelihoodToString(likelihood) << ", " << rows << " rows";
    }
  }
}

TEST_F(ProductsTest, KroneckerMomentsAreTheFactorsOfJJt) {
  for (int l = 0; l < static_cast<int>(net_.layers().size()); ++l) {
    const Eigen::MatrixXd& a = pass_.inputs[l];
    const Eigen::MatrixXd& d = grads_.deltas(l);
    Eigen::MatrixXd in = Eigen::MatrixXd::Identity(a.cols(), a.cols());
    Eigen::MatrixXd out = Eigen::MatrixXd::Identity(d.cols(), d.cols());
    grads_.AccumulateInputMoment(l, 0.25, 2.0, &in);
    grads_.AccumulateDeltaMoment(l, 0.5, 3.0, &out);
    Eigen::MatrixXd want_in =
        0.25 * Eigen::MatrixXd::Identity(a.cols(), a.cols());
    Eigen::MatrixXd want_out =
        0.5 * Eigen::MatrixXd::Identity(d.cols(), d.cols());
    for (int r = 0; r < a.rows(); ++r) {
      want_in += 2.0 * a.row(r).transpose() * a.row(r);
      want_out += 3.0 * d.row(r).transpose() * d.row(r);
    }
    EXPECT_LT((in - want_in).cwiseAbs().maxCoeff(), 1e-12) << "layer " << l;
    EXPECT_LT((out - want_out).cwiseAbs().maxCoeff(), 1e-12) << "layer " << l;
  }
}

TEST(NetworkTest, NoiseHookSeesEveryLayerInOrder) {
  const Network<double> net(
      SmallSpec(Activation::kTanh, Likelihood::kGaussian));
  Rng rng(31);
  const Eigen::MatrixXd x = RandomMatrix(5, 3, rng);
  const Eigen::MatrixXd theta =
      RandomMatrix(static_cast<int>(net.num_parameters()), 2, rng);
  ForwardPass<double> plain;
  net.Forward(x, theta, &plain);
  std::vector<int> seen;
  LayerNoise<double> noise;
  noise.pre_activation_noise = [&](int l, const Eigen::MatrixXd& inputs,
                                   Eigen::MatrixXd* z) {
    seen.push_back(l);
    // Before any noise the layers see the plain pass.
    EXPECT_EQ(inputs, plain.inputs[l]);
    EXPECT_EQ(*z, plain.pre[l]);
  };
  ForwardPass<double> pass;
  net.Forward(x, theta, &pass, &noise);
  EXPECT_EQ(seen, (std::vector<int>{0, 1, 2}));
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
