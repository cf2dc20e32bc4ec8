// Standardisation: population statistics fitted on a training split, a
// constant column mapped to 0, targets standardised for regression only, and
// the inverse maps for predictions.
#include "bnn/data/standardizer.h"

#include <cmath>
#include <vector>

#include "absl/status/status.h"
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "bnn/data/dataset.h"

namespace bnn {
namespace {

using ::testing::AllOf;
using ::testing::DoubleNear;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::Pointwise;

constexpr double kTol = 1e-12;

// 4 rows x 2 features: column 0 = 1..4, column 1 constant 7; targets 2..8.
class StandardizerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    train_.num_features = 2;
    train_.features = {1, 7, 2, 7, 3, 7, 4, 7};
    train_.targets = {2, 4, 6, 8};
  }
  Dataset train_;
};

TEST_F(StandardizerTest, FitsPopulationMeanAndStd) {
  const Standardization s = FitStandardization(train_);
  ASSERT_EQ(s.feature_mean.size(), 2u);
  ASSERT_EQ(s.feature_std.size(), 2u);
  EXPECT_DOUBLE_EQ(s.feature_mean[0], 2.5);
  // Population: sqrt(((1.5^2 + 0.5^2) * 2) / 4) = sqrt(1.25); the sample
  // std would be sqrt(5/3).
  EXPECT_DOUBLE_EQ(s.feature_std[0], std::sqrt(1.25));
  EXPECT_DOUBLE_EQ(s.target_mean, 5.0);
  EXPECT_DOUBLE_EQ(s.target_std, std::sqrt(5.0));
  EXPECT_FALSE(s.empty());
}

TEST_F(StandardizerTest, ConstantColumnGetsStdOne) {
  const Standardization s = FitStandardization(train_);
  EXPECT_DOUBLE_EQ(s.feature_mean[1], 7.0);
  EXPECT_EQ(s.feature_std[1], 1.0);
}

TEST_F(StandardizerTest, ConstantTargetGetsStdOne) {
  train_.targets = {3, 3, 3, 3};
  const Standardization s = FitStandardization(train_);
  EXPECT_DOUBLE_EQ(s.target_mean, 3.0);
  EXPECT_EQ(s.target_std, 1.0);
}

TEST_F(StandardizerTest, ApplyStandardisesFeaturesAndRegressionTargets) {
  const Standardization s = FitStandardization(train_);
  Dataset d = train_;
  ASSERT_TRUE(s.Apply(&d).ok());
  const double a = 1.0 / std::sqrt(1.25);
  EXPECT_THAT(
      d.features,
      Pointwise(DoubleNear(kTol), std::vector<double>{-1.5 * a, 0, -0.5 * a, 0,
                                                      0.5 * a, 0, 1.5 * a, 0}));
  const double b = 1.0 / std::sqrt(5.0);
  EXPECT_THAT(d.targets, Pointwise(DoubleNear(kTol),
                                   std::vector<double>{-3 * b, -b, b, 3 * b}));
}

TEST_F(StandardizerTest, ApplyToAnotherSplitUsesTheTrainingStatistics) {
  const Standardization s = FitStandardization(train_);
  Dataset test;
  test.num_features = 2;
  test.features = {2.5, 8};
  test.targets = {5 + std::sqrt(5.0)};
  ASSERT_TRUE(s.Apply(&test).ok());
  EXPECT_NEAR(test.features[0], 0.0, kTol);
  EXPECT_NEAR(test.features[1], 1.0, kTol);  // (8 - 7) / 1
  EXPECT_NEAR(test.targets[0], 1.0, kTol);
}

TEST_F(StandardizerTest, ClassificationTargetsAreUntouched) {
  train_.task = Task::kBinary;
  train_.num_classes = 2;
  train_.targets = {0, 1, 1, 0};
  const Standardization fitted = FitStandardization(train_);
  EXPECT_EQ(fitted.target_mean, 0.0);
  EXPECT_EQ(fitted.target_std, 1.0);

  // Even a standardisation carrying target statistics leaves class indices
  // alone; features are still transformed.
  Standardization s = fitted;
  s.target_mean = 5;
  s.target_std = 2;
  Dataset d = train_;
  ASSERT_TRUE(s.Apply(&d).ok());
  EXPECT_THAT(d.targets, ElementsAre(0, 1, 1, 0));
  EXPECT_NEAR(d.features[0], -1.5 / std::sqrt(1.25), kTol);
}

TEST_F(StandardizerTest, FeaturesOrTargetsCanBeLeftAsIdentity) {
  const Standardization no_features = FitStandardization(train_, false, true);
  EXPECT_THAT(no_features.feature_mean, ElementsAre(0, 0));
  EXPECT_THAT(no_features.feature_std, ElementsAre(1, 1));
  EXPECT_DOUBLE_EQ(no_features.target_mean, 5.0);

  const Standardization no_targets = FitStandardization(train_, true, false);
  EXPECT_DOUBLE_EQ(no_targets.feature_mean[0], 2.5);
  EXPECT_EQ(no_targets.target_mean, 0.0);
  EXPECT_EQ(no_targets.target_std, 1.0);
  Dataset d = train_;
  ASSERT_TRUE(no_targets.Apply(&d).ok());
  EXPECT_THAT(d.targets, ElementsAre(2, 4, 6, 8));
}

TEST_F(StandardizerTest, UnscaleInvertsTheTargetTransform) {
  Standardization s;
  s.target_mean = 5;
  s.target_std = 2;
  EXPECT_DOUBLE_EQ(s.UnscaleMean(1.5), 8.0);
  EXPECT_DOUBLE_EQ(s.UnscaleMean(0.0), 5.0);
  EXPECT_DOUBLE_EQ(s.UnscaleVariance(0.25), 1.0);

  const Standardization fitted = FitStandardization(train_);
  Dataset d = train_;
  ASSERT_TRUE(fitted.Apply(&d).ok());
  for (int64_t i = 0; i < d.num_rows(); ++i) {
    EXPECT_NEAR(fitted.UnscaleMean(d.targets[i]), train_.targets[i], 1e-12);
  }
  // Unit variance in standardised units is the population variance, 5.
  EXPECT_NEAR(fitted.UnscaleVariance(1.0), 5.0, 1e-12);
}

TEST_F(StandardizerTest, TransformRowMatchesApply) {
  const Standardization s = FitStandardization(train_);
  double row[2] = {4, 9};
  s.TransformRow(row);
  EXPECT_NEAR(row[0], 1.5 / std::sqrt(1.25), kTol);
  EXPECT_NEAR(row[1], 2.0, kTol);
}

TEST_F(StandardizerTest, ApplyWithWrongFeatureCountIsInvalid) {
  const Standardization s = FitStandardization(train_);
  Dataset d;
  d.num_features = 3;
  d.features = {1, 2, 3};
  d.targets = {4};
  const absl::Status status = s.Apply(&d);
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(status.message()),
              AllOf(HasSubstr("2 features"), HasSubstr("dataset has 3")));
  EXPECT_THAT(d.features, ElementsAre(1, 2, 3));  // untouched
  EXPECT_THAT(d.targets, ElementsAre(4));
}

// The sums are taken on values scaled by a power of two: near the top of the
// double range the plain sum overflowed to inf (y = 1e308 + ...), and for
// ordinary values the result is bit for bit the plain formula's.
TEST(StandardizerScaleTest, HugeValuesGiveFiniteStatistics) {
  Dataset d;
  d.num_features = 1;
  d.features = {1.7e308, 1.5e308, 1.6e308, 1.4e308};
  d.targets = {1e308, 1.7e308, 1.2e308, 1.1e308};
  ASSERT_TRUE(d.Validate().ok());
  const Standardization s = FitStandardization(d);
  EXPECT_NEAR(s.feature_mean[0] / 1e308, 1.55, 1e-12);
  // Deviations +-0.15, +-0.05 (x 1e308): variance 0.0125e616.
  EXPECT_NEAR(s.feature_std[0] / 1e308, std::sqrt(0.0125), 1e-12);
  EXPECT_NEAR(s.target_mean / 1e308, 1.25, 1e-12);
  EXPECT_TRUE(std::isfinite(s.target_std));
  Dataset z = d;
  ASSERT_TRUE(s.Apply(&z).ok());
  for (double v : z.features) EXPECT_TRUE(std::isfinite(v));
  for (double v : z.targets) EXPECT_TRUE(std::isfinite(v));
  EXPECT_NEAR(z.features[0], 0.15 / std::sqrt(0.0125), 1e-12);
}

TEST(StandardizerScaleTest, OrdinaryValuesMatchThePlainFormulaBitForBit) {
  Dataset d;
  d.num_features = 1;
  double sum = 0;
  for (int i = 0; i < 101; ++i) {
    d.features.push_back(0.1 * i * i - 3.7 + 1.0 / (i + 1));
    d.targets.push_back(1e5 + std::sin(i));
    sum += d.targets.back();
  }
  const double mean = sum / 101;
  double var = 0;
  for (double y : d.targets) var += (y - mean) * (y - mean);
  const Standardization s = FitStandardization(d);
  EXPECT_EQ(s.target_mean, mean);
  EXPECT_EQ(s.target_std, std::sqrt(var / 101));
}

TEST(StandardizationDefaultTest, DefaultIsEmptyIdentity) {
  const Standardization s;
  EXPECT_TRUE(s.empty());
  EXPECT_EQ(s.UnscaleMean(3.0), 3.0);
  EXPECT_EQ(s.UnscaleVariance(3.0), 3.0);
}

}  // namespace
}  // namespace bnn
