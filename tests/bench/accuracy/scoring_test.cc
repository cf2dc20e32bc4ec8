// The harness's metrics against independent computations: the quadrature
// ELBO against the core's Monte Carlo estimator, the original-units
// conversion of RMSE and test log-likelihood, rank correlation, and the
// reliability diagram and ROC curve against hand-computed fixtures.
#include "bench/accuracy/scoring.h"

#include <cmath>
#include <memory>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "bnn/predict/evaluation.h"
#include "bnn/predict/metrics.h"
#include "bnn/random.h"

#include "tests/test_util/logistic.h"

namespace bnn::experiment {
namespace {

using ::bnn::testing::LogisticData;
using ::bnn::testing::TrainLogistic;

// A wide posterior (weak prior, few rows) exercises the quadrature where the
// logit's sd is large, as with SLANG's near-flat bias prior.
TEST(ScoringTest, QuadratureElboAgreesWithMonteCarlo) {
  const Dataset data = LogisticData(40, 3, true, 11);
  for (const char* method : {"exact_full", "exact_diag"}) {
    auto fit = TrainLogistic(
        method, data, 300,
        {{"prior_precision", "0.01"}, {"bias_prior_precision", "0.001"}});
    ASSERT_TRUE(fit.ok()) << fit.status();
    auto quadrature = NegativeElboPerExample(*fit, data, 2, 1);
    ASSERT_TRUE(quadrature.ok()) << quadrature.status();
    EXPECT_THAT(quadrature->estimator, ::testing::StartsWith("gauss_hermite"));
    EXPECT_EQ(quadrature->standard_error, 0.0);

    Rng rng(5);
    auto mc = EstimateElbo(*fit, data, 200000, rng);
    ASSERT_TRUE(mc.ok()) << mc.status();
    const double n = data.num_rows();
    EXPECT_NEAR(quadrature->per_example, -mc->elbo / n,
                4 * mc->standard_error / n + 1e-6)
        << method;
  }
}

TEST(ScoringTest, NegativeElboOfANetworkFallsBackToMonteCarlo) {
  const Dataset data = LogisticData(30, 2, false, 2);
  TrainRequest r;
  r.method = "bbb";
  r.params = {{"epochs", "2"}, {"seed", "1"}};
  r.hidden_sizes = {4};
  auto fit = Train(r, data, MethodRegistry::Builtin());
  ASSERT_TRUE(fit.ok()) << fit.status();
  auto elbo = NegativeElboPerExample(*fit, data, 50, 3);
  ASSERT_TRUE(elbo.ok()) << elbo.status();
  EXPECT_EQ(elbo->estimator, "monte_carlo_50");
  EXPECT_GT(elbo->standard_error, 0.0);
  EXPECT_TRUE(std::isfinite(elbo->per_example));
}

Dataset Regression(double scale, double shift) {
  Rng rng(4);
  Dataset d;
  d.num_features = 2;
  for (int i = 0; i < 60; ++i) {
    const double a = rng.Normal(), b = rng.Normal();
    d.features.insert(d.features.end(), {a, b});
    d.targets.push_back(scale * (a - 0.5 * b + 0.3 * rng.Normal()) + shift);
  }
  return d;
}

// Standardisation makes the fitted model identical whatever the target's
// units; in original units RMSE scales with them and the log-likelihood of
// a density shifts by -log(scale). Catches a missing tau / target_std^2.
TEST(ScoringTest, RegressionScoresAreInOriginalUnits) {
  constexpr double kScale = 7.0;
  RegressionScores scores[2];
  for (int k = 0; k < 2; ++k) {
    const Dataset data = Regression(k == 0 ? 1.0 : kScale, k == 0 ? 0 : 3);
    TrainRequest r;
    r.method = "slang";
    r.params = {{"epochs", "20"}, {"seed", "1"}, {"noise_precision", "4"}};
    r.hidden_sizes = {5};
    auto fit = Train(r, data, MethodRegistry::Builtin());
    ASSERT_TRUE(fit.ok()) << fit.status();
    auto s = ScoreRegression(*fit, data, 30, 9);
    ASSERT_TRUE(s.ok()) << s.status();
    scores[k] = *s;
  }
  EXPECT_NEAR(scores[1].rmse, kScale * scores[0].rmse, 1e-6 * scores[1].rmse);
  EXPECT_NEAR(scores[1].test_ll, scores[0].test_ll - std::log(kScale), 1e-6);
}

TEST(ScoringTest, ClassificationScoresAreProbabilities) {
  const Dataset data = LogisticData(80, 3, false, 6);
  auto fit = TrainLogistic("exact_full", data, 100);
  ASSERT_TRUE(fit.ok());
  auto s = ScoreClassification(*fit, data, 200, 1);
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_GT(s->nll, 0.0);
  EXPECT_LT(s->nll, std::log(2.0));  // better than a coin on its own data
  EXPECT_GT(s->accuracy, 0.6);
  EXPECT_GT(s->auroc, 0.6);
  EXPECT_GE(s->ece, 0.0);
  EXPECT_FALSE(ScoreRegression(*fit, data, 10, 1).ok());
}

TEST(ScoringTest, SpearmanUsesAverageRanks) {
  Eigen::VectorXd a(4), b(4);
  a << 1, 2, 3, 4;
  b << 10, 20, 30, 40;
  EXPECT_DOUBLE_EQ(SpearmanCorrelation(a, b), 1.0);
  EXPECT_DOUBLE_EQ(SpearmanCorrelation(a, -b), -1.0);
  // Ties: ranks of b are (1.5, 1.5, 3, 4); Pearson of (1,2,3,4) with them.
  b << 5, 5, 6, 7;
  EXPECT_NEAR(SpearmanCorrelation(a, b), 0.9486832980505138, 1e-12);
  EXPECT_TRUE(std::isnan(SpearmanCorrelation(a, Eigen::VectorXd::Ones(4))));
  EXPECT_TRUE(std::isnan(SpearmanCorrelation(a, Eigen::VectorXd::Ones(3))));
}

TEST(ScoringTest, MarginalVarianceAgreementDetectsShrinkage) {
  const Dataset data = LogisticData(150, 3, true, 5);
  auto full = TrainLogistic("exact_full", data, 300);
  auto diag = TrainLogistic("exact_diag", data, 300);
  ASSERT_TRUE(full.ok() && diag.ok());
  const VarianceAgreement self =
      CompareMarginalVariances(*full->posterior, *full->posterior);
  EXPECT_DOUBLE_EQ(self.spearman, 1.0);
  EXPECT_DOUBLE_EQ(self.mean_log_ratio, 0.0);
  const VarianceAgreement mf =
      CompareMarginalVariances(*diag->posterior, *full->posterior);
  EXPECT_LT(mf.mean_log_ratio, 0.0);
}

// Hand-computed: 15 bins of width 1/15; 0.9 falls in bin 13
// (0.8667, 0.9333], 0.95 in bin 14, 0.5 in bin 7 (0.4667, 0.5333] and 0.62
// in bin 9 (0.6, 0.6667].
TEST(ReliabilityDiagramTest, BinsMatchTheEce) {
  const std::vector<double> probs = {0.9, 0.1, 0.95, 0.05, 0.5,  0.5,
                                     0.1, 0.9, 0.9,  0.1,  0.38, 0.62};
  const std::vector<double> labels = {0, 1, 0, 1, 1, 1};
  const std::vector<ReliabilityBin> bins =
      ReliabilityDiagram(probs, 2, labels, 15);
  ASSERT_EQ(bins.size(), 15u);
  EXPECT_DOUBLE_EQ(bins[0].lower, 0.0);
  EXPECT_DOUBLE_EQ(bins[14].upper, 1.0);
  // Rows 0, 3 (0.9, right) and 4 (0.9, wrong).
  EXPECT_EQ(bins[13].count, 3);
  EXPECT_NEAR(bins[13].confidence, 0.9, 1e-12);
  EXPECT_NEAR(bins[13].accuracy, 2.0 / 3.0, 1e-12);
  EXPECT_EQ(bins[14].count, 1);  // 0.95 on class 0, label 1
  EXPECT_EQ(bins[14].accuracy, 0.0);
  EXPECT_EQ(bins[7].count, 1);  // 0.5: the first class wins the tie
  EXPECT_EQ(bins[7].accuracy, 1.0);
  EXPECT_EQ(bins[9].count, 1);
  EXPECT_EQ(bins[8].count + bins[10].count + bins[0].count, 0);
  double ece = 0;
  int64_t total = 0;
  for (const ReliabilityBin& b : bins) {
    ece += b.count * std::abs(b.accuracy - b.confidence);
    total += b.count;
  }
  EXPECT_EQ(total, 6);
  EXPECT_NEAR(ece / 6, ExpectedCalibrationError(probs, 2, labels, 15), 1e-12);
}

TEST(RocCurveTest, HandComputedCurveAndAreaWithTies) {
  // Positives score 0.9, 0.5, 0.5; negatives 0.5, 0.1.
  const std::vector<double> scores = {0.9, 0.5, 0.5, 0.5, 0.1};
  const bool positive[] = {true, true, true, false, false};
  const std::vector<RocPoint> curve = RocCurve(scores, positive, 200);
  ASSERT_EQ(curve.size(), 4u);
  EXPECT_TRUE(std::isinf(curve[0].threshold));
  EXPECT_EQ(curve[0].fpr, 0.0);
  EXPECT_EQ(curve[0].tpr, 0.0);
  EXPECT_DOUBLE_EQ(curve[1].tpr, 1.0 / 3.0);
  EXPECT_EQ(curve[1].fpr, 0.0);
  EXPECT_EQ(curve[2].threshold, 0.5);
  EXPECT_DOUBLE_EQ(curve[2].tpr, 1.0);
  EXPECT_DOUBLE_EQ(curve[2].fpr, 0.5);
  EXPECT_EQ(curve[3].fpr, 1.0);
  EXPECT_EQ(curve[3].tpr, 1.0);
  double area = 0;
  for (size_t k = 1; k < curve.size(); ++k) {
    area += (curve[k].fpr - curve[k - 1].fpr) *
            (curve[k].tpr + curve[k - 1].tpr) / 2;
  }
  // Mann-Whitney with ties as one half: (2 + 1 + 0.5 + ... ) / 6 = 5/6.
  EXPECT_NEAR(area, 5.0 / 6.0, 1e-12);
  EXPECT_NEAR(area, Auroc(scores, positive), 1e-12);
  EXPECT_TRUE(RocCurve(scores, {false, false, false, false, false}).empty());
}

TEST(RocCurveTest, ThinningKeepsBothEndsAndOrder) {
  Rng rng(3);
  std::vector<double> scores(1000);
  std::unique_ptr<bool[]> positive(new bool[1000]);
  for (int i = 0; i < 1000; ++i) {
    positive[i] = i % 2 == 0;
    scores[i] = rng.Normal() + (positive[i] ? 1.0 : 0.0);
  }
  const std::vector<RocPoint> curve =
      RocCurve(scores, absl::MakeConstSpan(positive.get(), 1000), 200);
  ASSERT_EQ(curve.size(), 200u);
  EXPECT_EQ(curve.front().fpr, 0.0);
  EXPECT_EQ(curve.front().tpr, 0.0);
  EXPECT_EQ(curve.back().fpr, 1.0);
  EXPECT_EQ(curve.back().tpr, 1.0);
  for (size_t k = 1; k < curve.size(); ++k) {
    EXPECT_GE(curve[k].fpr, curve[k - 1].fpr);
    EXPECT_GE(curve[k].tpr, curve[k - 1].tpr);
  }
}

}  // namespace
}  // namespace bnn::experiment
