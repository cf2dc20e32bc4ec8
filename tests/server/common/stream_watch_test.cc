#include "server/common/stream_watch.h"

#include <atomic>

#include <absl/synchronization/mutex.h>
#include <absl/time/clock.h>
#include <gtest/gtest.h>

namespace bnn::server {
namespace {

class FakeStream final : public StreamWatch::Stream {
 public:
  absl::Time WaitingSince() const override {
    absl::MutexLock lock(&mu_);
    return waiting_since_;
  }
  void OnIdle() override { ++idle_calls_; }

  void Wait(absl::Time since) {
    absl::MutexLock lock(&mu_);
    waiting_since_ = since;
  }
  int idle_calls() const { return idle_calls_; }

 private:
  mutable absl::Mutex mu_;
  absl::Time waiting_since_ = absl::InfiniteFuture();
  std::atomic<int> idle_calls_{0};
};

TEST(StreamWatchTest, CapsTheStreams) {
  StreamWatch watch(2, absl::Seconds(60));
  FakeStream a, b, c;
  EXPECT_TRUE(watch.Add(&a));
  EXPECT_TRUE(watch.Add(&b));
  EXPECT_FALSE(watch.Add(&c));
  EXPECT_EQ(watch.size(), 2);
  watch.Remove(&a);
  EXPECT_TRUE(watch.Add(&c));
  watch.Remove(&b);
  watch.Remove(&c);
}

TEST(StreamWatchTest, EndsStreamsWaitingTooLongOnce) {
  StreamWatch watch(4, absl::Milliseconds(100));
  FakeStream waiting, busy;
  ASSERT_TRUE(watch.Add(&waiting));
  ASSERT_TRUE(watch.Add(&busy));
  waiting.Wait(absl::Now());
  absl::SleepFor(absl::Milliseconds(400));
  EXPECT_EQ(waiting.idle_calls(), 1);
  EXPECT_EQ(busy.idle_calls(), 0);  // not waiting for its client
  watch.Remove(&waiting);
  watch.Remove(&busy);
}

}  // namespace
}  // namespace bnn::server
