#include "bnn/linalg/optimize.h"

#include <cmath>

#include <gtest/gtest.h>

namespace bnn {
namespace {

TEST(GaussHermiteTest, ExactForPolynomialsBelowDegree2n) {
  const Quadrature q = GaussHermite(10);
  EXPECT_NEAR(q.weights.sum(), 1.0, 1e-13);
  // E[Z^2k] = (2k - 1)!!, odd moments vanish.
  double double_factorial = 1;
  for (int k = 1; k <= 9; ++k) {
    double_factorial *= 2 * k - 1;
    EXPECT_NEAR(q.weights.dot(q.nodes.array().pow(2 * k).matrix()),
                double_factorial, 1e-9 * double_factorial)
        << k;
    EXPECT_NEAR(q.weights.dot(q.nodes.array().pow(2 * k - 1).matrix()), 0.0,
                1e-9 * double_factorial);
  }
}

TEST(LbfgsTest, MinimisesRosenbrock) {
  Lbfgs solver(
      [](const Eigen::VectorXd& x, Eigen::VectorXd* g) {
        const double a = 1 - x[0], b = x[1] - x[0] * x[0];
        (*g)[0] = -2 * a - 400 * x[0] * b;
        (*g)[1] = 200 * b;
        return a * a + 100 * b * b;
      },
      Eigen::Vector2d(-1.2, 1.0), {});
  int iterations = 0;
  while (*solver.Iterate() && iterations < 500) ++iterations;
  EXPECT_TRUE(solver.converged());
  EXPECT_NEAR(solver.x()[0], 1.0, 1e-6);
  EXPECT_NEAR(solver.x()[1], 1.0, 1e-6);
  EXPECT_LT(iterations, 100);
}

TEST(LbfgsTest, RejectsANonFiniteStart) {
  Lbfgs solver(
      [](const Eigen::VectorXd& x, Eigen::VectorXd* g) {
        g->setZero(x.size());
        return std::log(x[0]);
      },
      Eigen::VectorXd::Zero(1), {});
  EXPECT_EQ(solver.Iterate().status().code(),
            absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace bnn
