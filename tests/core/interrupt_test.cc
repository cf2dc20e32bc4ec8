// Interrupt: the checks long computations run between units of work.
#include "bnn/interrupt.h"

#include <atomic>

#include <gtest/gtest.h>

namespace bnn {
namespace {

TEST(InterruptTest, WithProgressPassesReportsAndKeepsTheChecks) {
  std::atomic<bool> flag{false};
  int64_t done = -1, total = -1;
  const Interrupt plain = Interrupt::OnFlag(&flag, "call");
  const Interrupt reporting =
      plain.WithProgress([&](int64_t d, int64_t t) { done = d, total = t; });
  reporting.Progress(3, 10);
  EXPECT_EQ(done, 3);
  EXPECT_EQ(total, 10);
  plain.Progress(4, 10);  // the original has no sink
  EXPECT_EQ(done, 3);
  flag = true;
  EXPECT_EQ(reporting.Check().code(), absl::StatusCode::kCancelled);
  Interrupt().Progress(1, 1);  // no sink, no effect
}

TEST(InterruptTest, DefaultNeverInterrupts) {
  const Interrupt none;
  EXPECT_FALSE(none);
  EXPECT_TRUE(none.Check().ok());
}

TEST(InterruptTest, FlagCancelsOnceSet) {
  std::atomic<bool> flag{false};
  const Interrupt interrupt = Interrupt::OnFlag(&flag, "training");
  EXPECT_TRUE(interrupt);
  EXPECT_TRUE(interrupt.Check().ok());
  flag = true;
  const absl::Status status = interrupt.Check();
  EXPECT_EQ(status.code(), absl::StatusCode::kCancelled);
  EXPECT_EQ(status.message(), "training cancelled");
}

TEST(InterruptTest, DeadlineExceededOncePassed) {
  EXPECT_TRUE(Interrupt::AtDeadline(absl::Now() + absl::Hours(1)).Check().ok());
  EXPECT_EQ(
      Interrupt::AtDeadline(absl::Now() - absl::Seconds(1)).Check().code(),
      absl::StatusCode::kDeadlineExceeded);
}

TEST(InterruptTest, EitherReportsTheFirstThatFires) {
  std::atomic<bool> flag{false};
  const Interrupt both =
      Interrupt::Either(Interrupt::OnFlag(&flag),
                        Interrupt::AtDeadline(absl::Now() - absl::Seconds(1)));
  EXPECT_EQ(both.Check().code(), absl::StatusCode::kDeadlineExceeded);
  flag = true;
  EXPECT_EQ(both.Check().code(), absl::StatusCode::kCancelled);
}

TEST(InterruptTest, TimeLeftIsTheDeadlinesAndTheSmallerOfTwo) {
  EXPECT_EQ(Interrupt().TimeLeft(), absl::InfiniteDuration());
  std::atomic<bool> flag{false};
  EXPECT_EQ(Interrupt::OnFlag(&flag).TimeLeft(), absl::InfiniteDuration());
  const Interrupt hour = Interrupt::AtDeadline(absl::Now() + absl::Hours(1));
  EXPECT_GT(hour.TimeLeft(), absl::Minutes(59));
  EXPECT_LE(hour.TimeLeft(), absl::Hours(1));
  const Interrupt sooner = Interrupt::Either(
      hour, Interrupt::AtDeadline(absl::Now() + absl::Seconds(10)));
  EXPECT_GT(sooner.TimeLeft(), absl::Seconds(9));
  EXPECT_LE(sooner.TimeLeft(), absl::Seconds(10));
  EXPECT_EQ(Interrupt::Either(Interrupt::OnFlag(&flag), hour).TimeLeft() >
                absl::Minutes(59),
            true);
  // A custom one reports what its function says.
  const Interrupt custom([] { return absl::OkStatus(); },
                         [] { return absl::Milliseconds(7); });
  EXPECT_EQ(custom.TimeLeft(), absl::Milliseconds(7));
}

}  // namespace
}  // namespace bnn
