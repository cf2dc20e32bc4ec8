// The Monte Carlo predictive against a hand-rolled computation from the same
// posterior samples.
#include "bnn/predict/predictor.h"

#include <cmath>

#include <gtest/gtest.h>

#include "bnn/model/likelihood.h"
#include "bnn/model/network.h"
#include "bnn/posterior/low_rank_gaussian.h"

namespace bnn {
namespace {

std::shared_ptr<Snapshot> MakeSnapshot(Task task, int classes) {
  auto s = std::make_shared<Snapshot>();
  s->task = task;
  s->model = ModelSpec::ForTask(task, 2, classes, {4}, Activation::kTanh);
  const int64_t dim = s->model.NumParameters();
  Rng rng(99);
  Eigen::VectorXd mean(dim), d(dim);
  Eigen::MatrixXd u(dim, 2);
  for (int64_t j = 0; j < dim; ++j) {
    mean[j] = rng.Normal();
    d[j] = rng.Uniform(2, 5);
    u(j, 0) = 0.5 * rng.Normal();
    u(j, 1) = 0.5 * rng.Normal();
  }
  s->posterior = *LowRankGaussianPosterior::Create(mean, u, d);
  s->standardization.feature_mean = {1.0, -2.0};
  s->standardization.feature_std = {2.0, 0.5};
  if (task == Task::kRegression) {
    s->standardization.target_mean = 10;
    s->standardization.target_std = 3;
    s->noise_precision = 4;
  } else {
    for (int c = 0; c < (classes > 2 ? classes : 2); ++c) {
      s->class_values.push_back(10.0 * c - 1);
    }
  }
  return s;
}

const std::vector<double> kRows = {0.5, -1.0, 3.0, -2.5, -1.0, 0.0};

TEST(PredictorTest, RegressionMatchesHandComputedMoments) {
  auto snapshot = MakeSnapshot(Task::kRegression, 0);
  auto predictor = Predictor::Create(snapshot);
  ASSERT_TRUE(predictor.ok()) << predictor.status();
  PredictOptions options;
  options.num_samples = 7;
  options.seed = 123;
  auto p = (*predictor)->Predict(kRows, 3, options);
  ASSERT_TRUE(p.ok()) << p.status();

  // Same draws by hand: Rng(seed) -> posterior samples -> standardised rows.
  Rng rng(options.seed);
  Eigen::MatrixXd theta;
  snapshot->posterior->Sample(7, rng, &theta);
  const Network<double> net(snapshot->model);
  for (int i = 0; i < 3; ++i) {
    Eigen::MatrixXd x(1, 2);
    x << (kRows[2 * i] - 1.0) / 2.0, (kRows[2 * i + 1] + 2.0) / 0.5;
    ForwardPass<double> pass;
    net.Forward(x, theta, &pass);
    const Eigen::VectorXd f =
        pass.output().col(0) * 3.0 + Eigen::VectorXd::Constant(7, 10.0);
    const double mean = f.mean();
    const double epistemic = (f.array() - mean).square().mean();
    EXPECT_NEAR(p->mean[i], mean, 1e-12);
    EXPECT_NEAR(p->epistemic_variance[i], epistemic, 1e-10);
    EXPECT_DOUBLE_EQ(p->aleatoric_variance[i], 9.0 / 4.0);
    EXPECT_DOUBLE_EQ(p->variance[i], p->epistemic_variance[i] + 9.0 / 4.0);
  }
}

TEST(PredictorTest, SameSeedIsBitwiseIdenticalOtherSeedDiffers) {
  auto predictor = Predictor::Create(MakeSnapshot(Task::kRegression, 0));
  ASSERT_TRUE(predictor.ok());
  PredictOptions options;
  options.num_samples = 16;
  options.seed = 5;
  auto a = (*predictor)->Predict(kRows, 3, options);
  auto b = (*predictor)->Predict(kRows, 3, options);
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_EQ(a->mean, b->mean);
  EXPECT_EQ(a->variance, b->variance);
  options.seed = 6;
  auto c = (*predictor)->Predict(kRows, 3, options);
  ASSERT_TRUE(c.ok());
  EXPECT_NE(a->mean, c->mean);
}

TEST(PredictorTest, ChunkingDoesNotChangeResults) {
  auto snapshot = MakeSnapshot(Task::kRegression, 0);
  PredictorOptions small;
  small.chunk_rows = 1;
  auto chunked = Predictor::Create(snapshot, small);
  auto whole = Predictor::Create(snapshot);
  ASSERT_TRUE(chunked.ok() && whole.ok());
  PredictOptions options;
  options.num_samples = 9;
  auto a = (*chunked)->Predict(kRows, 3, options);
  auto b = (*whole)->Predict(kRows, 3, options);
  ASSERT_TRUE(a.ok() && b.ok());
  for (int i = 0; i < 3; ++i) {
    EXPECT_NEAR(a->mean[i], b->mean[i], 1e-12);
    EXPECT_NEAR(a->variance[i], b->variance[i], 1e-10);
  }
}

TEST(PredictorTest, MulticlassProbabilitiesAndEntropy) {
  auto snapshot = MakeSnapshot(Task::kMulticlass, 3);
  auto predictor = Predictor::Create(snapshot);
  ASSERT_TRUE(predictor.ok()) << predictor.status();
  PredictOptions options;
  options.num_samples = 5;
  auto p = (*predictor)->Predict(kRows, 3, options);
  ASSERT_TRUE(p.ok());
  ASSERT_EQ(p->num_classes, 3);
  for (int i = 0; i < 3; ++i) {
    double sum = 0, entropy = 0, best = -1;
    int arg = 0;
    for (int c = 0; c < 3; ++c) {
      const double q = p->probabilities[3 * i + c];
      sum += q;
      entropy -= q * std::log(q);
      if (q > best) best = q, arg = c;
    }
    EXPECT_NEAR(sum, 1.0, 1e-12);
    EXPECT_NEAR(p->entropy[i], entropy, 1e-12);
    EXPECT_EQ(p->predicted_class[i], snapshot->class_values[arg]);
  }
}

TEST(PredictorTest, BinaryAveragesSigmoidsNotLogits) {
  auto snapshot = MakeSnapshot(Task::kBinary, 2);
  auto predictor = Predictor::Create(snapshot);
  ASSERT_TRUE(predictor.ok()) << predictor.status();
  PredictOptions options;
  options.num_samples = 6;
  options.seed = 2;
  auto p = (*predictor)->Predict(kRows, 3, options);
  ASSERT_TRUE(p.ok());
  Rng rng(2);
  Eigen::MatrixXd theta;
  snapshot->posterior->Sample(6, rng, &theta);
  const Network<double> net(snapshot->model);
  Eigen::MatrixXd x(1, 2);
  x << (kRows[0] - 1.0) / 2.0, (kRows[1] + 2.0) / 0.5;
  ForwardPass<double> pass;
  net.Forward(x, theta, &pass);
  double p1 = 0;
  for (int s = 0; s < 6; ++s) p1 += Sigmoid(pass.output()(s, 0)) / 6;
  EXPECT_NEAR(p->probabilities[1], p1, 1e-12);
  EXPECT_NEAR(p->probabilities[0], 1 - p1, 1e-12);
}

TEST(PredictorTest, RejectsBadRequests) {
  PredictorOptions limits;
  limits.max_samples = 32;
  auto predictor =
      Predictor::Create(MakeSnapshot(Task::kRegression, 0), limits);
  ASSERT_TRUE(predictor.ok());
  PredictOptions options;
  options.num_samples = 33;
  auto too_many = (*predictor)->Predict(kRows, 3, options);
  EXPECT_EQ(too_many.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(too_many.status().message().find("num_samples = 33"),
            absl::string_view::npos);
  options.num_samples = 0;
  EXPECT_EQ((*predictor)->Predict(kRows, 3, options).status().code(),
            absl::StatusCode::kInvalidArgument);
  options.num_samples = 4;
  auto ragged = (*predictor)->Predict(kRows, 2, options);
  EXPECT_EQ(ragged.status().code(), absl::StatusCode::kInvalidArgument);
  std::vector<double> nan_rows = kRows;
  nan_rows[3] = std::nan("");
  auto nan = (*predictor)->Predict(nan_rows, 3, options);
  EXPECT_EQ(nan.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(nan.status().message().find("row 1, feature 1"),
            absl::string_view::npos)
      << nan.status();
}

}  // namespace
}  // namespace bnn
