// Evaluation metrics against values computed by hand: RMSE, the MC mixture's
// test log-likelihood (and its stability), log-loss, accuracy, Brier, ECE
// with several bins and AUROC (perfect, reversed, ties, a mixed case, a
// missing class).
#include "bnn/predict/metrics.h"

#include <chrono>
#include <cmath>
#include <future>
#include <limits>
#include <memory>
#include <thread>
#include <vector>

#include "absl/types/span.h"
#include <gtest/gtest.h>

#include "bnn/random.h"

namespace bnn {
namespace {

constexpr double kTol = 1e-12;
constexpr double kPi = 3.14159265358979323846;

TEST(RmseTest, HandComputed) {
  const std::vector<double> mean = {1, 2, 3};
  const std::vector<double> y = {1, 4, 0};
  EXPECT_NEAR(Rmse(mean, y), std::sqrt((0.0 + 4 + 9) / 3), kTol);
  EXPECT_EQ(Rmse(y, y), 0.0);
}

// log N(y | f, 1/tau), written out.
double LogNormal(double y, double f, double tau) {
  return 0.5 * std::log(tau / (2 * kPi)) - 0.5 * tau * (y - f) * (y - f);
}

TEST(GaussianMixtureLogLikelihoodTest, MatchesDirectLogMeanExp) {
  // 2 rows x 3 samples, sample-major: samples[s * n + i].
  const int n = 2, s = 3;
  const std::vector<double> samples = {0.1,  2.0,   // s = 0
                                       0.5,  1.0,   // s = 1
                                       -0.3, 3.5};  // s = 2
  const std::vector<double> y = {0.2, 1.8};
  const double tau = 2.0;
  double want = 0;
  for (int i = 0; i < n; ++i) {
    double mixture = 0;
    for (int k = 0; k < s; ++k) {
      mixture += std::exp(LogNormal(y[i], samples[k * n + i], tau)) / s;
    }
    want += std::log(mixture) / n;
  }
  EXPECT_NEAR(GaussianMixtureLogLikelihood(samples, s, y, tau), want, 1e-12);
}

TEST(GaussianMixtureLogLikelihoodTest, OneSampleIsTheGaussianLogDensity) {
  const std::vector<double> samples = {1.0, -2.0, 0.5};
  const std::vector<double> y = {1.5, -1.0, 0.5};
  const double tau = 0.7;
  double want = 0;
  for (int i = 0; i < 3; ++i) want += LogNormal(y[i], samples[i], tau) / 3;
  EXPECT_NEAR(GaussianMixtureLogLikelihood(samples, 1, y, tau), want, 1e-12);
}

TEST(GaussianMixtureLogLikelihoodTest, StableWithHugeResiduals) {
  // exp(-0.5 * 1e6) underflows to 0 in a naive log-mean-exp (giving -inf);
  // the stable form keeps the exact value.
  const double tau = 1.0;
  const std::vector<double> y = {0.0};
  // All three samples 1000 away.
  std::vector<double> samples = {1000.0, -1000.0, 1000.0};
  double ll = GaussianMixtureLogLikelihood(samples, 3, y, tau);
  ASSERT_TRUE(std::isfinite(ll));
  EXPECT_NEAR(ll, LogNormal(0, 1000, tau), 1e-6);
  // The closest sample dominates: log(1/3) + log N(0 | 1000, 1) up to
  // exp(-0.5 * (1e6 - 1e6)) terms of the others (here 1001 and 1002 away).
  samples = {1000.0, 1001.0, 1002.0};
  ll = GaussianMixtureLogLikelihood(samples, 3, y, tau);
  ASSERT_TRUE(std::isfinite(ll));
  const double want = LogNormal(0, 1000, tau) +
                      std::log((1 + std::exp(-0.5 * (1001.0 * 1001 - 1e6)) +
                                std::exp(-0.5 * (1002.0 * 1002 - 1e6))) /
                               3);
  EXPECT_NEAR(ll, want, 1e-6);
  // Residuals of 1e6 with a large precision.
  samples = {1e6, 2e6, -1e6};
  EXPECT_TRUE(
      std::isfinite(GaussianMixtureLogLikelihood(samples, 3, y, 100.0)));
}

TEST(GaussianMixtureLogLikelihoodTest, OverflowingResidualIsMinusInfinity) {
  const std::vector<double> y = {0.0, 0.0};
  const std::vector<double> samples = {1e200, 0.0};  // row 0 is hopeless
  EXPECT_EQ(GaussianMixtureLogLikelihood(samples, 1, y, 1.0),
            -std::numeric_limits<double>::infinity());
}

TEST(LogLossTest, HandComputed) {
  const std::vector<double> probs = {0.7,  0.2, 0.1,  //
                                     0.1,  0.3, 0.6,  //
                                     0.25, 0.5, 0.25};
  const std::vector<double> labels = {0, 2, 1};
  EXPECT_NEAR(LogLoss(probs, 3, labels),
              -(std::log(0.7) + std::log(0.6) + std::log(0.5)) / 3, kTol);
}

TEST(LogLossTest, ZeroProbabilityIsLargeButFinite) {
  const std::vector<double> probs = {1.0, 0.0};
  const std::vector<double> labels = {1};
  const double loss = LogLoss(probs, 2, labels);
  EXPECT_TRUE(std::isfinite(loss));
  EXPECT_GT(loss, 600);
}

TEST(AccuracyTest, HandComputed) {
  const std::vector<double> probs = {0.7, 0.2,  0.1,    // -> 0
                                     0.1, 0.3,  0.6,    // -> 2
                                     0.2, 0.5,  0.3,    // -> 1
                                     0.4, 0.35, 0.25};  // -> 0
  EXPECT_DOUBLE_EQ(Accuracy(probs, 3, std::vector<double>{0, 2, 1, 1}), 0.75);
  EXPECT_DOUBLE_EQ(Accuracy(probs, 3, std::vector<double>{0, 2, 1, 0}), 1.0);
  EXPECT_DOUBLE_EQ(Accuracy(probs, 3, std::vector<double>{1, 0, 0, 2}), 0.0);
}

TEST(BrierTest, HandComputed) {
  const std::vector<double> probs = {0.7, 0.2, 0.1,  //
                                     0.1, 0.3, 0.6};
  const std::vector<double> labels = {0, 1};
  // Row 0: 0.09 + 0.04 + 0.01 = 0.14. Row 1: 0.01 + 0.49 + 0.36 = 0.86.
  EXPECT_NEAR(Brier(probs, 3, labels), (0.14 + 0.86) / 2, kTol);
  // A certain, correct prediction scores 0; a certain, wrong one 2.
  EXPECT_NEAR(Brier(std::vector<double>{0, 1}, 2, std::vector<double>{1}), 0,
              kTol);
  EXPECT_NEAR(Brier(std::vector<double>{0, 1}, 2, std::vector<double>{0}), 2,
              kTol);
}

// Five binary predictions whose top-class confidences fall in bins 14, 14,
// 10, 9 and 8 of 15 (none near a bin edge).
class EceTest : public ::testing::Test {
 protected:
  const std::vector<double> probs_ = {0.95, 0.05,   // conf .95, correct
                                      0.97, 0.03,   // conf .97, wrong
                                      0.30, 0.70,   // conf .70, correct
                                      0.62, 0.38,   // conf .62, wrong
                                      0.45, 0.55};  // conf .55, correct
  const std::vector<double> labels_ = {0, 1, 1, 1, 1};
};

TEST_F(EceTest, DefaultIsFifteenBins) {
  // Bin 14: n = 2, acc 0.5, conf 0.96 -> 2/5 * 0.46. Bins 10, 9, 8 hold one
  // row each: 1/5 * (0.3 + 0.62 + 0.45).
  const double want = 0.4 * 0.46 + 0.2 * (0.3 + 0.62 + 0.45);
  EXPECT_NEAR(ExpectedCalibrationError(probs_, 2, labels_), want, 1e-12);
  EXPECT_NEAR(ExpectedCalibrationError(probs_, 2, labels_, 15), want, 1e-12);
}

TEST_F(EceTest, TenBinsMergeTwoRows) {
  // With 10 bins 0.62 and 0.70 share bin 6: acc 0.5, conf 0.66.
  const double want = 0.4 * 0.46 + 0.4 * 0.16 + 0.2 * 0.45;
  EXPECT_NEAR(ExpectedCalibrationError(probs_, 2, labels_, 10), want, 1e-12);
}

TEST_F(EceTest, OneBinIsTheGapBetweenAccuracyAndMeanConfidence) {
  const double conf = (0.95 + 0.97 + 0.70 + 0.62 + 0.55) / 5;
  EXPECT_NEAR(ExpectedCalibrationError(probs_, 2, labels_, 1),
              std::abs(0.6 - conf), 1e-12);
}

TEST(ExpectedCalibrationErrorTest, MulticlassUsesTopClassConfidence) {
  // Two rows with confidence 0.5 (one right, one wrong) are calibrated; a
  // certain correct row too.
  const std::vector<double> probs = {0.5, 0.3, 0.2,  //
                                     0.1, 0.4, 0.5,  //
                                     0.0, 1.0, 0.0};
  EXPECT_NEAR(ExpectedCalibrationError(probs, 3, std::vector<double>{0, 1, 1}),
              0.0, 1e-12);
  // Make the certain row wrong: that bin contributes 1/3 * |0 - 1|.
  EXPECT_NEAR(ExpectedCalibrationError(probs, 3, std::vector<double>{0, 1, 2}),
              1.0 / 3, 1e-12);
}

TEST(AurocTest, PerfectReversedAndTies) {
  const std::vector<double> scores = {0.1, 0.2, 0.8, 0.9};
  // absl::Span<const bool> needs contiguous bools (not std::vector<bool>).
  const bool perfect[] = {false, false, true, true};
  const bool reversed[] = {true, true, false, false};
  EXPECT_DOUBLE_EQ(Auroc(scores, perfect), 1.0);
  EXPECT_DOUBLE_EQ(Auroc(scores, reversed), 0.0);
  const std::vector<double> tied = {0.3, 0.3, 0.3, 0.3};
  EXPECT_DOUBLE_EQ(Auroc(tied, perfect), 0.5);
}

TEST(AurocTest, HandComputedMixedCase) {
  // Positives {0.35, 0.8}, negatives {0.1, 0.4}: 3 of 4 pairs ordered.
  const std::vector<double> scores = {0.1, 0.4, 0.35, 0.8};
  const bool positive[] = {false, false, true, true};
  EXPECT_DOUBLE_EQ(Auroc(scores, positive), 0.75);
}

TEST(AurocTest, TiesBetweenClassesCountOneHalf) {
  // Positives {0.5, 0.9}, negatives {0.5, 0.2}: 0.5 + 1 + 1 + 1 of 4.
  const std::vector<double> scores = {0.5, 0.5, 0.2, 0.9};
  const bool positive[] = {true, false, false, true};
  EXPECT_DOUBLE_EQ(Auroc(scores, positive), 0.875);
}

TEST(AurocTest, MatchesPairwiseCountOnRandomScoresWithTies) {
  Rng rng(11);
  const int n = 200;
  std::vector<double> scores(n);
  bool positive[n] = {};
  for (int i = 0; i < n; ++i) {
    scores[i] = std::floor(rng.Uniform() * 10) / 10;  // many ties
    positive[i] = rng.Uniform() < 0.3 + 0.4 * scores[i];
  }
  double wins = 0, pairs = 0;
  for (int i = 0; i < n; ++i) {
    if (!positive[i]) continue;
    for (int j = 0; j < n; ++j) {
      if (positive[j]) continue;
      pairs += 1;
      wins += scores[i] > scores[j] ? 1.0 : scores[i] == scores[j] ? 0.5 : 0;
    }
  }
  ASSERT_GT(pairs, 0);
  EXPECT_NEAR(Auroc(scores, absl::Span<const bool>(positive, n)), wins / pairs,
              1e-12);
}

TEST(AurocTest, NanWhenAClassIsAbsent) {
  const std::vector<double> scores = {0.1, 0.5, 0.9};
  const bool all_positive[] = {true, true, true};
  const bool all_negative[] = {false, false, false};
  EXPECT_TRUE(std::isnan(Auroc(scores, all_positive)));
  EXPECT_TRUE(std::isnan(Auroc(scores, all_negative)));
  EXPECT_TRUE(
      std::isnan(Auroc(absl::Span<const double>(), absl::Span<const bool>())));
}

// BUG (core/src/predict/metrics.cc:122/130, Auroc's tie-grouping loop): a NaN
// score never compares equal to itself, so `while (scores[order[j]] ==
// scores[order[i]]) ++j;` leaves j == i and `i = j` loops forever (std::sort
// with NaN is also undefined). Expected: return promptly, with NaN since the
// ranking is undefined. Runs on a detached thread so that the hang fails this
// test after 2 s instead of stalling the binary.
TEST(AurocTest, NanScoreTerminatesWithNan) {
  struct Shared {
    std::vector<double> scores = {0.1, std::nan(""), 0.3, 0.2};
    bool positive[4] = {true, false, true, false};
    std::promise<double> result;
  };
  auto shared = std::make_shared<Shared>();
  std::future<double> done = shared->result.get_future();
  std::thread([shared] {
    shared->result.set_value(
        Auroc(shared->scores, absl::Span<const bool>(shared->positive, 4)));
  }).detach();
  ASSERT_TRUE(done.wait_for(std::chrono::seconds(2)) ==
              std::future_status::ready)
      << "Auroc did not return on a NaN score";
  EXPECT_TRUE(std::isnan(done.get()));
}

}  // namespace
}  // namespace bnn
