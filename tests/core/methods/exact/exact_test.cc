// exact_full / exact_diag satisfy the stationarity conditions of the ELBO,
// checked with an independent quadrature: for q = N(m, S),
//   S^-1 = Lambda + sum_i E[s_i (1 - s_i)] x_i x_i^T    (full; diag for MF)
//   Lambda m = sum_i x_i E[y_i (1 - s_i)],  s_i = sigmoid(y_i x_i^T theta).
#include "bnn/methods/exact.h"

#include <cmath>

#include <Eigen/Dense>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "bnn/linalg/optimize.h"
#include "bnn/posterior/posterior.h"

#include "tests/test_util/logistic.h"
#include "tests/test_util/test_util.h"

namespace bnn {
namespace {

using ::bnn::testing::LogisticData;
using ::bnn::testing::TrainLogistic;

struct Stationarity {
  Eigen::MatrixXd precision;  // Lambda + E[curvature]
  Eigen::VectorXd mean_residual;
};

Stationarity Evaluate(const Dataset& data, const Eigen::VectorXd& m,
                      const Eigen::MatrixXd& s) {
  const int64_t d = m.size();
  const Quadrature q = GaussHermite(64);
  Stationarity out{Eigen::MatrixXd::Identity(d, d), m};  // unit prior
  for (int64_t i = 0; i < data.num_rows(); ++i) {
    Eigen::VectorXd x(d);
    for (int64_t j = 0; j + 1 < d; ++j) x[j] = data.row(i)[j];
    x[d - 1] = 1.0;
    const double y = data.targets[i] > 0.5 ? 1.0 : -1.0;
    const double mean = x.dot(m), sd = std::sqrt(x.dot(s * x));
    double curv = 0, grad = 0;
    for (int k = 0; k < q.nodes.size(); ++k) {
      const double sig = 1 / (1 + std::exp(-y * (mean + sd * q.nodes[k])));
      curv += q.weights[k] * sig * (1 - sig);
      grad += q.weights[k] * y * (1 - sig);
    }
    out.precision += curv * x * x.transpose();
    out.mean_residual -= grad * x;
  }
  return out;
}

TEST(ExactTest, FullSolutionIsStationary) {
  const Dataset data = LogisticData(150, 3, true, 5);
  auto fit = TrainLogistic("exact_full", data, 500);
  ASSERT_TRUE(fit.ok()) << fit.status();
  const Eigen::MatrixXd s = *fit->posterior->Covariance();
  const Stationarity st = Evaluate(data, fit->posterior->mean(), s);
  EXPECT_LT((s.inverse() - st.precision).cwiseAbs().maxCoeff(),
            1e-6 * st.precision.cwiseAbs().maxCoeff());
  EXPECT_LT(st.mean_residual.cwiseAbs().maxCoeff(), 1e-6);
}

TEST(ExactTest, DiagonalSolutionIsStationary) {
  const Dataset data = LogisticData(150, 3, true, 5);
  auto fit = TrainLogistic("exact_diag", data, 500);
  ASSERT_TRUE(fit.ok()) << fit.status();
  const Eigen::MatrixXd s = *fit->posterior->Covariance();
  const Stationarity st = Evaluate(data, fit->posterior->mean(), s);
  EXPECT_LT((s.diagonal().cwiseInverse() - st.precision.diagonal())
                .cwiseAbs()
                .maxCoeff(),
            1e-6 * st.precision.diagonal().maxCoeff());
  EXPECT_LT(st.mean_residual.cwiseAbs().maxCoeff(), 1e-6);
  // Mean-field shrinks the marginal variances relative to the full solution
  // (the pathology SLANG fixes).
  auto full = TrainLogistic("exact_full", data, 500);
  ASSERT_TRUE(full.ok());
  EXPECT_TRUE((fit->posterior->MarginalVariances().array() <=
               full->posterior->MarginalVariances().array() + 1e-12)
                  .all());
}

TEST(ExactTest, RefusesAnythingButLogisticRegression) {
  Dataset regression = LogisticData(20, 2, false, 1);
  regression.task = Task::kRegression;
  regression.num_classes = 0;
  regression.class_values.clear();
  auto s = TrainLogistic("exact_full", regression, 5);
  EXPECT_EQ(s.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(s.status().message().find("logistic regression only"),
            absl::string_view::npos);
}

}  // namespace
}  // namespace bnn
