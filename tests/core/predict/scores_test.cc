// bnn::Evaluate against the metrics computed directly from a prediction
// with the same samples, for regression and classification, and its
// refusals.
#include "bnn/predict/scores.h"

#include <cmath>
#include <memory>
#include <vector>

#include <gtest/gtest.h>

#include "bnn/posterior/low_rank_gaussian.h"
#include "bnn/predict/metrics.h"
#include "bnn/random.h"

namespace bnn {
namespace {

std::shared_ptr<Snapshot> MakeSnapshot(Task task, int classes, int inputs) {
  auto s = std::make_shared<Snapshot>();
  s->task = task;
  s->model = ModelSpec::ForTask(task, inputs, classes, {6}, Activation::kTanh);
  const int64_t dim = s->model.NumParameters();
  Rng rng(17);
  Eigen::VectorXd mean(dim), d(dim);
  Eigen::MatrixXd u(dim, 1);
  for (int64_t j = 0; j < dim; ++j) {
    mean[j] = rng.Normal();
    d[j] = rng.Uniform(1, 3);
    u(j, 0) = rng.Normal();
  }
  s->posterior = *LowRankGaussianPosterior::Create(mean, u, d);
  s->standardization.feature_mean.assign(inputs, 0.5);
  s->standardization.feature_std.assign(inputs, 2.0);
  if (task == Task::kRegression) {
    s->standardization.target_mean = 1.5;
    s->standardization.target_std = 3.0;
    s->noise_precision = 4.0;
  } else {
    for (int c = 0; c < classes; ++c) s->class_values.push_back(10 + c);
  }
  return s;
}

std::vector<double> Values(int n, uint64_t seed, double scale) {
  Rng rng(seed);
  std::vector<double> v(n);
  for (double& x : v) x = scale * rng.Normal();
  return v;
}

TEST(EvaluateTest, RegressionEqualsTheMetricsOfThePrediction) {
  auto predictor = Predictor::Create(MakeSnapshot(Task::kRegression, 0, 2));
  ASSERT_TRUE(predictor.ok()) << predictor.status();
  const int n = 40;
  const std::vector<double> rows = Values(2 * n, 1, 1.0);
  const std::vector<double> y = Values(n, 2, 3.0);
  EvaluateOptions options;
  options.num_samples = 20;
  options.seed = 77;
  auto got = Evaluate(**predictor, rows, y, n, {}, 0, options);
  ASSERT_TRUE(got.ok()) << got.status();

  PredictOptions predict;
  predict.num_samples = 20;
  predict.seed = 77;
  predict.per_sample = true;
  const Prediction p = *(*predictor)->Predict(rows, n, predict);
  const double tau = 4.0 / (3.0 * 3.0);
  const double ll = GaussianMixtureLogLikelihood(p.sample_outputs, 20, y, tau);
  EXPECT_NEAR(*got->rmse, Rmse(p.mean, y), 1e-12);
  EXPECT_NEAR(*got->log_likelihood, ll, 1e-12);
  EXPECT_NEAR(*got->nll, -ll, 1e-12);
  // Classification scores do not apply.
  EXPECT_FALSE(got->accuracy.has_value());
  EXPECT_FALSE(got->ece.has_value());
  EXPECT_TRUE(got->reliability.empty());
  EXPECT_EQ(got->num_rows, n);
  EXPECT_EQ(got->num_samples, 20);
}

TEST(EvaluateTest, ClassificationEqualsTheMetricsOfThePrediction) {
  auto predictor = Predictor::Create(MakeSnapshot(Task::kMulticlass, 3, 2));
  ASSERT_TRUE(predictor.ok()) << predictor.status();
  const int n = 50, m = 30;
  const std::vector<double> rows = Values(2 * n, 3, 1.0);
  const std::vector<double> ood = Values(2 * m, 4, 6.0);
  std::vector<double> labels(n);
  for (int i = 0; i < n; ++i) labels[i] = i % 3;
  EvaluateOptions options;
  options.num_samples = 16;
  options.seed = 5;
  options.ece_bins = 7;
  auto got = Evaluate(**predictor, rows, labels, n, ood, m, options);
  ASSERT_TRUE(got.ok()) << got.status();

  PredictOptions predict;
  predict.num_samples = 16;
  predict.seed = 5;
  const Prediction p = *(*predictor)->Predict(rows, n, predict);
  const Prediction q = *(*predictor)->Predict(ood, m, predict);
  EXPECT_NEAR(*got->nll, LogLoss(p.probabilities, 3, labels), 1e-12);
  EXPECT_NEAR(*got->accuracy, Accuracy(p.probabilities, 3, labels), 1e-12);
  EXPECT_NEAR(*got->brier, Brier(p.probabilities, 3, labels), 1e-12);
  EXPECT_NEAR(*got->ece,
              ExpectedCalibrationError(p.probabilities, 3, labels, 7), 1e-12);
  ASSERT_EQ(got->reliability.size(), 7u);
  int64_t counted = 0;
  for (const ReliabilityBin& bin : got->reliability) counted += bin.count;
  EXPECT_EQ(counted, n);
  // OOD rows are the positives.
  std::vector<double> entropy = p.entropy, mi = p.mutual_information;
  entropy.insert(entropy.end(), q.entropy.begin(), q.entropy.end());
  mi.insert(mi.end(), q.mutual_information.begin(), q.mutual_information.end());
  std::unique_ptr<bool[]> positive(new bool[n + m]);
  for (int i = 0; i < n + m; ++i) positive[i] = i >= n;
  EXPECT_NEAR(*got->auroc_entropy,
              Auroc(entropy, absl::MakeConstSpan(positive.get(), n + m)),
              1e-12);
  EXPECT_NEAR(*got->auroc_mutual_information,
              Auroc(mi, absl::MakeConstSpan(positive.get(), n + m)), 1e-12);
  EXPECT_EQ(got->ood_rows, m);
  EXPECT_FALSE(got->rmse.has_value());
  EXPECT_FALSE(got->log_likelihood.has_value());
}

TEST(EvaluateTest, RefusesBadInputsNamingThem) {
  auto regression = Predictor::Create(MakeSnapshot(Task::kRegression, 0, 2));
  auto classifier = Predictor::Create(MakeSnapshot(Task::kBinary, 2, 2));
  const std::vector<double> rows = Values(4, 1, 1.0);
  EvaluateOptions options;
  auto s = Evaluate(**regression, rows, {1.0, 2.0}, 2, rows, 2, options);
  EXPECT_EQ(s.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(s.status().message().find("regression"), absl::string_view::npos);
  s = Evaluate(**classifier, rows, {0.0, 2.0}, 2, {}, 0, options);
  EXPECT_EQ(s.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(s.status().message().find("target 1"), absl::string_view::npos);
  options.ece_bins = 0;
  s = Evaluate(**classifier, rows, {0.0, 1.0}, 2, {}, 0, options);
  EXPECT_NE(s.status().message().find("ece_bins"), absl::string_view::npos);
}

TEST(EvaluateTest, MemoryEstimateGrowsWithTheOodRows) {
  auto classifier = Predictor::Create(MakeSnapshot(Task::kMulticlass, 3, 2));
  EvaluateOptions options;
  const int64_t alone =
      EstimateEvaluateMemory(**classifier, 1000, 0, options).bytes;
  const int64_t with_ood =
      EstimateEvaluateMemory(**classifier, 1000, 5000, options).bytes;
  EXPECT_GT(with_ood, alone + 5000 * 8 * 3);
}

}  // namespace
}  // namespace bnn
