// HMC on conjugate Bayesian linear regression recovers the exact posterior,
// within Monte Carlo error bounds computed from the chains themselves
// (effective sample size by Geyer's initial positive sequence).
#include "bnn/methods/hmc.h"

#include <cmath>

#include <Eigen/Dense>
#include <gtest/gtest.h>

#include "bnn/posterior/sample_families.h"
#include "bnn/train/trainer.h"

namespace bnn {
namespace {

// ESS of one coordinate over chains of equal length (chains are columns).
double EffectiveSampleSize(const Eigen::MatrixXd& chains) {
  const int n = static_cast<int>(chains.rows());
  const int m = static_cast<int>(chains.cols());
  const double mean = chains.mean();
  const double var =
      (chains.array() - mean).square().sum() / (static_cast<double>(n) * m);
  auto rho = [&](int lag) {
    double acc = 0;
    for (int c = 0; c < m; ++c)
      for (int t = 0; t + lag < n; ++t)
        acc += (chains(t, c) - mean) * (chains(t + lag, c) - mean);
    return acc / (static_cast<double>(n) * m * var);
  };
  // Geyer: sum autocorrelation pairs while they stay positive.
  double sum = -1;
  for (int k = 0; 2 * k + 1 < n; ++k) {
    const double pair = rho(2 * k) + rho(2 * k + 1);
    if (pair <= 0) break;
    sum += 2 * pair;
  }
  return n * m / std::max(1.0, sum);
}

TEST(HmcTest, RecoversTheConjugateLinearRegressionPosterior) {
  const int n = 50;
  const double tau = 4.0;
  Rng rng(8);
  Dataset data;
  data.num_features = 2;
  Eigen::MatrixXd x(n, 3);
  Eigen::VectorXd y(n);
  for (int i = 0; i < n; ++i) {
    const double a = rng.Normal(), b = rng.Normal() + 0.5 * a;
    const double t = a - 2 * b + 0.3 + rng.Normal() / std::sqrt(tau);
    data.features.insert(data.features.end(), {a, b});
    data.targets.push_back(t);
    x.row(i) << a, b, 1;  // theta = [w1, w2, bias]
    y[i] = t;
  }
  const Eigen::MatrixXd precision =
      tau * x.transpose() * x + Eigen::MatrixXd::Identity(3, 3);
  const Eigen::MatrixXd cov = precision.inverse();
  const Eigen::VectorXd mean = cov * (tau * x.transpose() * y);

  const int chains = 4, warmup = 300, kept = 1500;
  TrainRequest r;
  r.method = "hmc";
  r.params = {{"standardize", "false"},
              {"noise_precision", "4"},
              {"chains", std::to_string(chains)},
              {"warmup", std::to_string(warmup)},
              {"leapfrog_steps", "40"}};
  r.options.epochs = warmup + kept;
  r.options.seed = 9;
  auto fit = Train(r, data, MethodRegistry::Builtin());
  ASSERT_TRUE(fit.ok()) << fit.status();
  const auto& samples =
      static_cast<const SampleSetPosterior&>(*fit->posterior).samples();
  ASSERT_EQ(samples.cols(), chains * kept);

  for (int j = 0; j < 3; ++j) {
    // Kept samples are interleaved by chain: column t * chains + c.
    Eigen::MatrixXd by_chain(kept, chains);
    for (int t = 0; t < kept; ++t)
      for (int c = 0; c < chains; ++c)
        by_chain(t, c) = samples(j, t * chains + c);
    const double ess = EffectiveSampleSize(by_chain);
    ASSERT_GT(ess, 200) << "coordinate " << j << " mixes too slowly";
    const double sd = std::sqrt(cov(j, j));
    const double got_mean = by_chain.mean();
    const double got_var =
        (by_chain.array() - got_mean).square().sum() / (kept * chains - 1);
    // Standard errors of a mean and of a variance from ESS draws.
    EXPECT_NEAR(got_mean, mean[j], 4 * sd / std::sqrt(ess)) << j;
    EXPECT_NEAR(got_var, cov(j, j), 4 * std::sqrt(2.0 / ess) * cov(j, j)) << j;
  }
  // The correlated pair (w1, w2): sample covariance vs exact.
  const Eigen::MatrixXd c = samples.colwise() - samples.rowwise().mean();
  const Eigen::MatrixXd sample_cov = c * c.transpose() / (samples.cols() - 1);
  EXPECT_NEAR(sample_cov(0, 1), cov(0, 1),
              0.15 * std::sqrt(cov(0, 0) * cov(1, 1)));
}

}  // namespace
}  // namespace bnn
