// The ELBO estimator is unbiased (checked against an exact quadrature of
// the expected log-likelihood) and the symmetric KL matches the dense
// formula.
#include "bnn/predict/evaluation.h"

#include <cmath>

#include <Eigen/Dense>
#include <gtest/gtest.h>

#include "bnn/linalg/optimize.h"
#include "bnn/model/likelihood.h"
#include "bnn/posterior/gaussian_families.h"
#include "bnn/posterior/low_rank_gaussian.h"

#include "tests/test_util/logistic.h"

namespace bnn {
namespace {

Eigen::MatrixXd RandomSpd(int d, Rng& rng) {
  Eigen::MatrixXd a(d, d);
  for (int i = 0; i < d; ++i)
    for (int j = 0; j < d; ++j) a(i, j) = rng.Normal();
  return a * a.transpose() + 0.5 * Eigen::MatrixXd::Identity(d, d);
}

Snapshot LogisticSnapshot(const Eigen::VectorXd& mean,
                          const Eigen::MatrixXd& precision) {
  Snapshot s;
  s.task = Task::kBinary;
  s.class_values = {0, 1};
  s.model = ModelSpec::ForTask(Task::kBinary, 4, 2, {}, Activation::kRelu);
  s.params = {{"prior_precision", "2"}, {"bias_prior_precision", "0.5"}};
  s.standardization.feature_mean.assign(4, 0.0);
  s.standardization.feature_std.assign(4, 1.0);
  s.posterior = *FullGaussianPosterior::Create(mean, precision);
  return s;
}

TEST(EstimateElboTest, UnbiasedAgainstExactQuadrature) {
  Rng rng(4);
  const int d = 5;  // 4 features + bias
  Eigen::VectorXd mean(d);
  for (int j = 0; j < d; ++j) mean[j] = rng.Normal();
  const Eigen::MatrixXd precision = RandomSpd(d, rng);
  const Snapshot snap = LogisticSnapshot(mean, precision);
  const Dataset data = ::bnn::testing::LogisticData(40, 4, false, 9);

  // E_q[log p(D | theta)] exactly: each x^T theta is N(x^T m, x^T S x).
  const Eigen::MatrixXd cov = precision.inverse();
  const Quadrature q = GaussHermite(64);
  double exact = 0;
  for (int64_t i = 0; i < data.num_rows(); ++i) {
    Eigen::VectorXd x(d);
    for (int j = 0; j < 4; ++j) x[j] = data.row(i)[j];
    x[4] = 1;
    const double m = x.dot(mean), sd = std::sqrt(x.dot(cov * x));
    for (int k = 0; k < q.nodes.size(); ++k) {
      const double f = m + sd * q.nodes[k];
      exact -= q.weights[k] * NegLogLikelihood<double>(Likelihood::kBernoulli,
                                                       &f, 1, data.targets[i],
                                                       1.0, nullptr);
    }
  }
  // The mean of many small-S estimates vs the exact value.
  const int repeats = 400;
  double sum = 0, sum_sq = 0;
  Rng draws(11);
  for (int r = 0; r < repeats; ++r) {
    auto e = EstimateElbo(snap, data, 4, draws);
    ASSERT_TRUE(e.ok()) << e.status();
    sum += e->expected_log_likelihood;
    sum_sq += e->expected_log_likelihood * e->expected_log_likelihood;
  }
  const double avg = sum / repeats;
  const double se = std::sqrt((sum_sq / repeats - avg * avg) / (repeats - 1));
  EXPECT_NEAR(avg, exact, 4 * se) << "se " << se;

  // KL to the prior matches the dense formula with lambda = (2, 2, 2, 2, 0.5).
  Eigen::VectorXd lambda = Eigen::VectorXd::Constant(d, 2.0);
  lambda[4] = 0.5;
  const double kl =
      0.5 * ((lambda.asDiagonal() * cov).trace() +
             mean.dot(lambda.cwiseProduct(mean)) - d -
             lambda.array().log().sum() + std::log(precision.determinant()));
  auto e = EstimateElbo(snap, data, 8, draws);
  ASSERT_TRUE(e.ok());
  EXPECT_NEAR(e->kl, kl, 1e-9 * std::abs(kl));
  EXPECT_DOUBLE_EQ(e->elbo, e->expected_log_likelihood - e->kl);
}

TEST(SymmetricKlTest, MatchesTheDenseFormulaAcrossFamilies) {
  Rng rng(5);
  const int d = 4;
  Eigen::VectorXd ma(d), mb(d), diag(d);
  for (int j = 0; j < d; ++j) {
    ma[j] = rng.Normal();
    mb[j] = rng.Normal();
    diag[j] = rng.Uniform(0.5, 2);
  }
  const Eigen::MatrixXd pa = RandomSpd(d, rng);
  Eigen::MatrixXd u(d, 1);
  for (int j = 0; j < d; ++j) u(j, 0) = rng.Normal();
  auto a = *FullGaussianPosterior::Create(ma, pa);
  auto b = *LowRankGaussianPosterior::Create(mb, u, diag);
  Eigen::MatrixXd pb = u * u.transpose();
  pb.diagonal() += diag;
  const Eigen::MatrixXd sa = pa.inverse(), sb = pb.inverse();
  auto kl = [&](const Eigen::VectorXd& m0, const Eigen::MatrixXd& s0,
                const Eigen::VectorXd& m1, const Eigen::MatrixXd& s1) {
    const Eigen::MatrixXd p1 = s1.inverse();
    return 0.5 * ((p1 * s0).trace() + (m1 - m0).dot(p1 * (m1 - m0)) - d +
                  std::log(s1.determinant() / s0.determinant()));
  };
  const double want = 0.5 * (kl(ma, sa, mb, sb) + kl(mb, sb, ma, sa));
  auto got = SymmetricKl(*a, *b);
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_NEAR(*got, want, 1e-9 * want);
  EXPECT_NEAR(*SymmetricKl(*a, *a), 0.0, 1e-10);
}

}  // namespace
}  // namespace bnn
