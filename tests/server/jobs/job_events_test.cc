#include "server/jobs/job_events.h"

#include <optional>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace bnn::server {
namespace {

JobEvent Progress(int64_t step) {
  JobEvent event;
  event.kind = JobEvent::Kind::kProgress;
  event.state = store::JobRecord::RUNNING;
  event.step = step;
  return event;
}

JobEvent State(store::JobRecord::State state, int64_t step) {
  JobEvent event;
  event.kind = JobEvent::Kind::kState;
  event.state = state;
  event.step = step;
  return event;
}

std::vector<int64_t> Steps(const std::vector<JobEvent>& events) {
  std::vector<int64_t> steps;
  for (const JobEvent& event : events) steps.push_back(event.step);
  return steps;
}

TEST(JobEventsTest, WakesWatchersWhoTakeEventsInOrder) {
  JobEvents events;
  int wakes = 0;
  const JobEvents::Start start =
      events.Watch("job-1", std::nullopt, [&] { ++wakes; });
  EXPECT_TRUE(start.backlog.empty());
  uint64_t last = start.last_seq;
  events.Publish("job-1", State(store::JobRecord::RUNNING, 0));
  events.Publish("job-1", Progress(1));
  events.Publish("job-2", Progress(7));  // another job's
  EXPECT_EQ(wakes, 2);
  const std::vector<JobEvent> taken = events.Take("job-1", &last);
  EXPECT_THAT(Steps(taken), ::testing::ElementsAre(0, 1));
  EXPECT_EQ(taken[1].seq, 2u);
  EXPECT_TRUE(events.Take("job-1", &last).empty());
  events.Unsubscribe("job-1", start.subscription);
  events.Publish("job-1", Progress(2));
  EXPECT_EQ(wakes, 2);
}

TEST(JobEventsTest, AReconnectGetsTheKeptEventsAfterItsStep) {
  JobEvents events;
  for (int64_t step = 1; step <= 5; ++step)
    events.Publish("job", Progress(step));
  const JobEvents::Start start = events.Watch("job", 3, [] {});
  EXPECT_THAT(Steps(start.backlog), ::testing::ElementsAre(4, 5));
  EXPECT_EQ(start.last_seq, 5u);
  EXPECT_TRUE(events.Watch("job", std::nullopt, [] {}).backlog.empty());
}

TEST(JobEventsTest, KeepsABoundedWindow) {
  JobEvents events;
  for (int64_t step = 1; step <= JobEvents::kMaxKeptEvents + 10; ++step) {
    events.Publish("job", Progress(step));
  }
  uint64_t last = 0;
  const std::vector<JobEvent> taken = events.Take("job", &last);
  ASSERT_EQ(taken.size(), static_cast<size_t>(JobEvents::kMaxKeptEvents));
  EXPECT_EQ(taken.front().step, 11);
}

TEST(JobEventsTest, AFinalStateEndsTheJobsEntryAfterItsWatchersTookIt) {
  JobEvents events;
  uint64_t last = 0;
  std::vector<JobEvent> taken;
  events.Watch("job", std::nullopt, [&] {
    for (JobEvent& e : events.Take("job", &last)) taken.push_back(e);
  });
  events.Publish("job", State(store::JobRecord::SUCCEEDED, 9));
  ASSERT_EQ(taken.size(), 1u);
  EXPECT_EQ(taken[0].state, store::JobRecord::SUCCEEDED);
  EXPECT_EQ(events.watchers(), 0);  // the entry is gone
}

TEST(JobEventsTest, ClosingWakesWatchersAndSparesRunningJobs) {
  JobEvents events;
  int wakes = 0;
  events.Watch("queued", std::nullopt, [&] { ++wakes; });
  events.Watch("running", std::nullopt, [&] { ++wakes; });
  events.Publish("running", State(store::JobRecord::RUNNING, 0));
  wakes = 0;
  EXPECT_FALSE(events.Closing("queued"));
  events.Close();
  EXPECT_EQ(wakes, 2);
  EXPECT_TRUE(events.Closing("queued"));
  EXPECT_TRUE(events.Closing("unknown"));
  EXPECT_FALSE(events.Closing("running"));
  events.Publish("running", State(store::JobRecord::INTERRUPTED, 5));
  EXPECT_TRUE(events.Closing("running"));
}

}  // namespace
}  // namespace bnn::server
