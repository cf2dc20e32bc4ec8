// Bayes by Backprop reaches the mean-field optimum of Bayesian linear
// regression with known noise, which is closed-form: precision_j =
// lambda_j + tau sum_i x_ij^2 and the mean of the exact posterior.
#include "bnn/methods/bbb.h"

#include <cmath>

#include <Eigen/Dense>
#include <gtest/gtest.h>

#include "bnn/posterior/posterior.h"
#include "bnn/train/trainer.h"

namespace bnn {
namespace {

TEST(BbbTest, ReachesTheClosedFormMeanFieldOptimum) {
  Rng rng(2);
  const int n = 200;
  const double tau = 4;
  Dataset data;
  data.num_features = 2;
  Eigen::MatrixXd x(n, 3);
  Eigen::VectorXd y(n);
  for (int i = 0; i < n; ++i) {
    const double a = rng.Normal(), b = rng.Normal();
    const double t = 1.5 * a - 0.5 * b + 0.3 + rng.Normal() / std::sqrt(tau);
    data.features.insert(data.features.end(), {a, b});
    data.targets.push_back(t);
    x.row(i) << a, b, 1;
    y[i] = t;
  }
  const Eigen::MatrixXd precision =
      tau * x.transpose() * x + Eigen::MatrixXd::Identity(3, 3);
  const Eigen::VectorXd mean = precision.ldlt().solve(tau * x.transpose() * y);
  const Eigen::VectorXd var = precision.diagonal().cwiseInverse();

  TrainRequest r;
  r.method = "bbb";
  r.params = {{"standardize", "false"}, {"noise_precision", "4"},
              {"prior_precision", "1"}, {"bias_prior_precision", "1"},
              {"batch_size", "200"},    {"mc_samples", "20"},
              {"learning_rate", "0.01"}};
  r.options.epochs = 3000;
  r.options.seed = 1;
  auto fit = Train(r, data, MethodRegistry::Builtin());
  ASSERT_TRUE(fit.ok()) << fit.status();
  ASSERT_EQ(fit->posterior->family(), "diagonal");
  const Eigen::VectorXd got_var = fit->posterior->MarginalVariances();
  for (int j = 0; j < 3; ++j) {
    // Adam's stationary noise: ~0.2 posterior sd (measured); bound 0.5.
    EXPECT_NEAR(fit->posterior->mean()[j], mean[j], 0.5 * std::sqrt(var[j]));
    EXPECT_NEAR(got_var[j], var[j], 0.25 * var[j]);
  }
}

}  // namespace
}  // namespace bnn
