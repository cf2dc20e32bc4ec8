#include "server/jobs/loss_curve.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace bnn::server {
namespace {

std::vector<int64_t> Steps(const store::JobRecord& job) {
  EXPECT_EQ(job.loss_curve_steps_size(), job.loss_curve_losses_size());
  return {job.loss_curve_steps().begin(), job.loss_curve_steps().end()};
}

TEST(LossCurveTest, KeepsEveryStepUntilFull) {
  store::JobRecord job;
  for (int64_t step = 1; step <= kMaxLossPoints; ++step) {
    AddLossPoint(step, 1.0 / step, &job);
  }
  ASSERT_EQ(job.loss_curve_steps_size(), kMaxLossPoints);
  EXPECT_EQ(job.loss_curve_steps(9), 10);
  EXPECT_DOUBLE_EQ(job.loss_curve_losses(9), 0.1);
  EXPECT_EQ(job.loss_curve_stride(), 1);
}

TEST(LossCurveTest, HalvesTheResolutionWhenFullAndStaysBounded) {
  store::JobRecord job;
  constexpr int64_t kSteps = 12345;
  for (int64_t step = 1; step <= kSteps; ++step) {
    AddLossPoint(step, static_cast<double>(step), &job);
    ASSERT_LE(job.loss_curve_steps_size(), kMaxLossPoints) << step;
  }
  // 12345 steps need a stride of 16 (12345 / 16 = 771 points).
  EXPECT_EQ(job.loss_curve_stride(), 16);
  EXPECT_EQ(job.loss_curve_steps_size(), kSteps / 16);
  const std::vector<int64_t> steps = Steps(job);
  for (size_t i = 0; i < steps.size(); ++i) {
    EXPECT_EQ(steps[i], 16 * static_cast<int64_t>(i + 1));
    EXPECT_EQ(job.loss_curve_losses(static_cast<int>(i)),
              static_cast<double>(steps[i]));
  }
}

TEST(LossCurveTest, ARepeatedStepReplacesItsLoss) {
  store::JobRecord job;
  AddLossPoint(1, 3.0, &job);
  AddLossPoint(1, 2.0, &job);  // the end of the pass reports step 1 again
  ASSERT_EQ(job.loss_curve_losses_size(), 1);
  EXPECT_EQ(job.loss_curve_losses(0), 2.0);
}

TEST(LossCurveTest, TruncatesBeyondAResumedStep) {
  store::JobRecord job;
  for (int64_t step = 1; step <= 10; ++step) AddLossPoint(step, 1.0, &job);
  TruncateLossCurve(6, &job);
  EXPECT_THAT(Steps(job), ::testing::ElementsAre(1, 2, 3, 4, 5, 6));
  AddLossPoint(7, 1.0, &job);
  EXPECT_THAT(Steps(job), ::testing::ElementsAre(1, 2, 3, 4, 5, 6, 7));
}

}  // namespace
}  // namespace bnn::server
