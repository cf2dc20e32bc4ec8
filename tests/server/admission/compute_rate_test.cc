#include "server/admission/compute_rate.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace bnn::server {
namespace {

using ::testing::HasSubstr;

TEST(PredictWorkUnitsTest, CountsForwardPassesAndDrawing) {
  EXPECT_DOUBLE_EQ(PredictWorkUnits(100, 64, 751), 64.0 * 751 * 101);
}

TEST(ComputeRateTest, AdmitsEverythingBeforeItHasSeenACallOfTheSize) {
  ComputeRate rate;
  EXPECT_EQ(rate.LowerBound(1e9), std::nullopt);
  EXPECT_TRUE(rate.Admit("Predict", 1e9, absl::Milliseconds(1)).ok());
  // A smaller call's rate does not bound a larger one's (its per-unit cost
  // is higher): only calls of the size or larger count.
  rate.Observe(1e6, absl::Milliseconds(10));
  EXPECT_EQ(rate.LowerBound(1e8), std::nullopt);
  EXPECT_TRUE(rate.Admit("Predict", 1e8, absl::Milliseconds(1)).ok());
}

TEST(ComputeRateTest, BoundIsTheFastestRateOfTheSizeOrLarger) {
  ComputeRate rate;
  rate.Observe(1e6, absl::Milliseconds(40));  // 40 ns/unit
  rate.Observe(1e6, absl::Milliseconds(10));  // 10 ns/unit: the fastest
  rate.Observe(4e6, absl::Milliseconds(80));  // 20 ns/unit, a larger group
  // 1e6 and 0.9e6 units are in one group, [2^19, 2^20).
  const std::optional<absl::Duration> bound = rate.LowerBound(0.9e6);
  ASSERT_TRUE(bound.has_value());
  EXPECT_NEAR(absl::ToDoubleMilliseconds(*bound), 9.0, 1e-9);
  // For a call of 4e6 units (group [2^21, 2^22)) only that group counts.
  EXPECT_NEAR(absl::ToDoubleMilliseconds(*rate.LowerBound(4e6)), 80.0, 1e-9);
}

TEST(ComputeRateTest, RefusesOnlyWhatCannotFinishAndSaysWhy) {
  ComputeRate rate;
  rate.Observe(1e6, absl::Milliseconds(10));  // 10 ns/unit
  EXPECT_TRUE(rate.Admit("Predict", 1e6, absl::Milliseconds(11)).ok());
  const absl::Status refused = rate.Admit("Predict of 10000 rows x 256 samples",
                                          1e6, absl::Milliseconds(5));
  EXPECT_EQ(refused.code(), absl::StatusCode::kDeadlineExceeded);
  EXPECT_THAT(refused.message(),
              HasSubstr("Predict of 10000 rows x 256 samples needs at least "
                        "10ms of computation"));
  EXPECT_THAT(refused.message(), HasSubstr("more than the 5ms left"));
}

TEST(ComputeRateTest, ForgetsRatesOlderThanTheWindow) {
  ComputeRate rate;
  rate.Observe(1e6, absl::Milliseconds(2));  // 2 ns/unit, then a slowdown
  for (int i = 0; i < ComputeRate::kWindow; ++i) {
    rate.Observe(1e6, absl::Milliseconds(20));
  }
  EXPECT_NEAR(absl::ToDoubleMilliseconds(*rate.LowerBound(1e6)), 20.0, 1e-9);
}

TEST(ComputeRateTest, IgnoresCallsTooShortToMeasureARate) {
  ComputeRate rate;
  rate.Observe(1e6, ComputeRate::kMinObserved / 2);
  EXPECT_EQ(rate.LowerBound(1e6), std::nullopt);
}

TEST(ComputeRateTest, AStoppedCallsProgressBoundsCallsOfItsSize) {
  ComputeRate rate;
  // A call of 1e9 units stopped after 1e7 units of forward passes in 10 ms
  // (1 ns/unit): a call of its size needs at least ~1 s.
  rate.ObservePartial(1e9, 1e7, absl::Milliseconds(10));
  ASSERT_TRUE(rate.LowerBound(1e9).has_value());
  EXPECT_NEAR(absl::ToDoubleMilliseconds(*rate.LowerBound(1e9)), 1000.0, 1e-6);
  EXPECT_EQ(rate.Admit("Predict", 1e9, absl::Milliseconds(50)).code(),
            absl::StatusCode::kDeadlineExceeded);
  // As with a finished call, it bounds smaller calls too (their per-unit
  // cost is no lower), but not larger ones.
  EXPECT_NEAR(absl::ToDoubleMilliseconds(*rate.LowerBound(1e7)), 10.0, 1e-6);
  EXPECT_EQ(rate.LowerBound(1e10), std::nullopt);
  // No progress, or too little time to be a rate: nothing is learnt.
  ComputeRate empty;
  empty.ObservePartial(1e9, 0, absl::Milliseconds(10));
  empty.ObservePartial(1e9, 1e6, absl::Microseconds(100));
  EXPECT_EQ(empty.LowerBound(1e9), std::nullopt);
}

TEST(ThreadCpuTimeTest, CountsComputationNotSleep) {
  const absl::Duration before = ThreadCpuTime();
  absl::SleepFor(absl::Milliseconds(50));
  EXPECT_LT(ThreadCpuTime() - before, absl::Milliseconds(20));
  // Spinning adds CPU time (however slowly, on a loaded machine).
  volatile double x = 0;
  const absl::Time start = absl::Now();
  while (ThreadCpuTime() - before < absl::Milliseconds(30) &&
         absl::Now() - start < absl::Seconds(20)) {
    x = x + 1;
  }
  EXPECT_GE(ThreadCpuTime() - before, absl::Milliseconds(30));
}

}  // namespace
}  // namespace bnn::server
