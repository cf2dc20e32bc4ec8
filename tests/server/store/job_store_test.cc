#include "server/store/job_store.h"

#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include <absl/strings/str_cat.h>
#include <absl/time/clock.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "server/store/ids.h"
#include "tests/server/server_test_util.h"
#include "tests/server/store/store_dir.h"

namespace bnn::server {
namespace {

using ::bnn::server::testutil::ReadFileOrEmpty;
using ::bnn::server::testutil::StatusIs;
using ::bnn::server::testutil::StoreDir;
using ::bnn::server::testutil::TempDir;
using ::testing::ElementsAre;
using ::testing::Pair;
using ::testing::UnorderedElementsAre;
using State = store::JobRecord::State;

store::JobRecord Request() {
  store::JobRecord record;
  record.set_dataset_id("ds-0123456789abcdef");
  record.set_method("slang");
  (*record.mutable_params())["rank"] = "2";
  record.add_hidden_sizes(50);
  record.add_activations("relu");
  record.set_epochs(10);
  record.set_seed(7);
  return record;
}

class JobStoreTest : public ::testing::Test {
 protected:
  // Reopens the data directory and the store on it, as a restart would.
  std::unique_ptr<JobStore> Open() {
    dir_.Reopen();
    absl::StatusOr<std::unique_ptr<JobStore>> store =
        JobStore::Open(dir_.metadata(), CheckpointDir());
    EXPECT_TRUE(store.ok()) << store.status();
    return store.ok() ? *std::move(store) : nullptr;
  }
  std::string CheckpointDir() const { return temp_.path() + "/checkpoints"; }
  // Moves job `id` to `state` (persisted).
  static void SetState(JobStore* store, const std::string& id, State state) {
    ASSERT_TRUE(store
                    ->Update(id,
                             [state](store::JobRecord* r) {
                               r->set_state(state);
                               return true;
                             })
                    .ok());
  }

  TempDir temp_;
  StoreDir dir_{temp_.path() + "/data"};
};

TEST_F(JobStoreTest, CreateAssignsIdStateAndTime) {
  std::unique_ptr<JobStore> store = Open();
  const absl::StatusOr<store::JobRecord> job = store->Create(Request());
  ASSERT_TRUE(job.ok()) << job.status();
  EXPECT_TRUE(IsId(kJobIdPrefix, job->job_id()));
  EXPECT_EQ(job->state(), store::JobRecord::QUEUED);
  EXPECT_GT(job->created_unix_ms(), 0);
  EXPECT_EQ(job->method(), "slang");
  EXPECT_EQ(store->Get(job->job_id())->SerializeAsString(),
            job->SerializeAsString());
}

TEST_F(JobStoreTest, UpdatesPersistUnlessMemoryOnly) {
  std::string id;
  {
    std::unique_ptr<JobStore> store = Open();
    id = store->Create(Request())->job_id();
    SetState(store.get(), id, store::JobRecord::SUCCEEDED);
    ASSERT_TRUE(store
                    ->Update(
                        id,
                        [](store::JobRecord* r) {
                          r->set_step(99);
                          return true;
                        },
                        JobStore::Durability::kMemoryOnly)
                    .ok());
    EXPECT_EQ(store->Get(id)->step(), 99);
  }
  const absl::StatusOr<store::JobRecord> reread = Open()->Get(id);
  ASSERT_TRUE(reread.ok()) << reread.status();
  EXPECT_EQ(reread->state(), store::JobRecord::SUCCEEDED);
  EXPECT_EQ(reread->step(), 0);
}

TEST_F(JobStoreTest, DeclinedUpdatesChangeNothing) {
  std::unique_ptr<JobStore> store = Open();
  const std::string id = store->Create(Request())->job_id();
  const absl::StatusOr<store::JobRecord> after =
      store->Update(id, [](store::JobRecord* r) {
        r->set_error("scribbled on the copy");
        return false;
      });
  ASSERT_TRUE(after.ok());
  EXPECT_EQ(after->error(), "");
  EXPECT_EQ(store->Get(id)->error(), "");
}

TEST_F(JobStoreTest, RestartInterruptsRunningJobsAndKeepsQueuedOnes) {
  std::string queued, later_queued, running, cancelling, succeeded, cancelled;
  {
    std::unique_ptr<JobStore> store = Open();
    queued = store->Create(Request())->job_id();
    running = store->Create(Request())->job_id();
    cancelling = store->Create(Request())->job_id();
    succeeded = store->Create(Request())->job_id();
    cancelled = store->Create(Request())->job_id();
    absl::SleepFor(absl::Milliseconds(2));  // a later creation time
    later_queued = store->Create(Request())->job_id();
    SetState(store.get(), running, store::JobRecord::RUNNING);
    SetState(store.get(), cancelling, store::JobRecord::CANCELLING);
    SetState(store.get(), succeeded, store::JobRecord::SUCCEEDED);
    SetState(store.get(), cancelled, store::JobRecord::CANCELLED);
  }
  std::unique_ptr<JobStore> store = Open();
  const absl::StatusOr<store::JobRecord> interrupted = store->Get(running);
  ASSERT_TRUE(interrupted.ok()) << interrupted.status();
  EXPECT_EQ(interrupted->state(), store::JobRecord::INTERRUPTED);
  EXPECT_EQ(interrupted->error(), "");
  EXPECT_EQ(interrupted->finished_unix_ms(), 0);
  EXPECT_EQ(interrupted->method(), "slang");  // the request is kept
  EXPECT_EQ(store->Get(cancelling)->state(), store::JobRecord::CANCELLED);
  EXPECT_GT(store->Get(cancelling)->finished_unix_ms(), 0);
  EXPECT_EQ(store->Get(queued)->state(), store::JobRecord::QUEUED);
  EXPECT_EQ(store->Get(succeeded)->state(), store::JobRecord::SUCCEEDED);
  EXPECT_EQ(store->Get(cancelled)->state(), store::JobRecord::CANCELLED);
  EXPECT_THAT(store->CountByState(),
              UnorderedElementsAre(Pair(store::JobRecord::QUEUED, 2),
                                   Pair(store::JobRecord::INTERRUPTED, 1),
                                   Pair(store::JobRecord::SUCCEEDED, 1),
                                   Pair(store::JobRecord::CANCELLED, 2)));
  // Oldest first.
  std::vector<std::string> queued_ids;
  for (const store::JobRecord& job : store->Queued()) {
    queued_ids.push_back(job.job_id());
  }
  EXPECT_THAT(queued_ids, ElementsAre(queued, later_queued));
  ASSERT_EQ(store->Interrupted().size(), 1u);
  EXPECT_EQ(store->Interrupted()[0].job_id(), running);
  // The recovery was written: a second restart sees the same.
  store.reset();
  EXPECT_EQ(Open()->Get(running)->state(), store::JobRecord::INTERRUPTED);
}

// Servers sharing a store (PostgreSQL) each queue, run and recover only
// the jobs they accepted; a cancel committed through another server is not
// overwritten by the running job's progress.
TEST_F(JobStoreTest, SharedStoreServersKeepTheirOwnJobs) {
  dir_.Reopen();
  const auto open = [&](const std::string& runner) {
    absl::StatusOr<std::unique_ptr<JobStore>> store = JobStore::Open(
        dir_.metadata(), absl::StrCat(CheckpointDir(), "-", runner), runner);
    EXPECT_TRUE(store.ok()) << store.status();
    return store.ok() ? *std::move(store) : nullptr;
  };
  std::unique_ptr<JobStore> a = open("srv-000000000000000a");
  std::unique_ptr<JobStore> b = open("srv-000000000000000b");
  ASSERT_NE(a, nullptr);
  ASSERT_NE(b, nullptr);
  const store::JobRecord a_running = *a->Create(Request());
  const store::JobRecord a_queued = *a->Create(Request());
  const store::JobRecord b_queued = *b->Create(Request());
  EXPECT_EQ(a_running.runner(), "srv-000000000000000a");
  SetState(a.get(), a_running.job_id(), store::JobRecord::RUNNING);
  ASSERT_EQ(a->Queued().size(), 1u);
  EXPECT_EQ(a->Queued()[0].job_id(), a_queued.job_id());
  ASSERT_EQ(b->Queued().size(), 1u);
  EXPECT_EQ(b->Queued()[0].job_id(), b_queued.job_id());
  // B restarts: A's running job is not B's to interrupt.
  b = open("srv-000000000000000b");
  ASSERT_NE(b, nullptr);
  EXPECT_EQ(b->Get(a_running.job_id())->state(), store::JobRecord::RUNNING);
  EXPECT_TRUE(b->Interrupted().empty());
  // A's progress in memory, then B cancels, then A checkpoints.
  ASSERT_TRUE(a->Update(
                   a_running.job_id(),
                   [](store::JobRecord* r) {
                     r->set_step(5);
                     return true;
                   },
                   JobStore::Durability::kMemoryOnly)
                  .ok());
  SetState(b.get(), a_running.job_id(), store::JobRecord::CANCELLING);
  absl::StatusOr<store::JobRecord> checkpointed =
      a->Update(a_running.job_id(), [](store::JobRecord*) { return true; });
  ASSERT_TRUE(checkpointed.ok()) << checkpointed.status();
  EXPECT_EQ(checkpointed->state(), store::JobRecord::CANCELLING);
  EXPECT_EQ(checkpointed->step(), 5);
  EXPECT_EQ(b->Get(a_running.job_id())->state(), store::JobRecord::CANCELLING);
  // A queued job cancelled through B does not start on A.
  SetState(b.get(), a_queued.job_id(), store::JobRecord::CANCELLED);
  absl::StatusOr<store::JobRecord> started =
      a->Update(a_queued.job_id(), [](store::JobRecord* r) {
        if (r->state() != store::JobRecord::QUEUED) return false;
        r->set_state(store::JobRecord::RUNNING);
        return true;
      });
  ASSERT_TRUE(started.ok()) << started.status();
  EXPECT_EQ(started->state(), store::JobRecord::CANCELLED);
  // A restarts: its cancelling job is cancelled; B's queued one is not A's.
  a.reset();
  a = open("srv-000000000000000a");
  ASSERT_NE(a, nullptr);
  EXPECT_EQ(a->Get(a_running.job_id())->state(), store::JobRecord::CANCELLED);
  EXPECT_TRUE(a->Queued().empty());
  EXPECT_EQ(a->Get(b_queued.job_id())->state(), store::JobRecord::QUEUED);
}

TEST_F(JobStoreTest, OpeningDeletesCheckpointsOfFinishedAndUnknownJobs) {
  std::string interrupted, succeeded;
  std::unique_ptr<JobStore> store = Open();
  interrupted = store->Create(Request())->job_id();
  succeeded = store->Create(Request())->job_id();
  SetState(store.get(), interrupted, store::JobRecord::INTERRUPTED);
  SetState(store.get(), succeeded, store::JobRecord::SUCCEEDED);
  const std::string unknown = "job-00000000000000ff";
  for (const std::string& id : {interrupted, succeeded, unknown}) {
    std::ofstream(store->CheckpointPath(id)) << "checkpoint";
  }
  EXPECT_EQ(store->CheckpointPath(interrupted),
            CheckpointDir() + "/" + interrupted + ".ckpt");
  store.reset();
  store = Open();
  EXPECT_EQ(ReadFileOrEmpty(store->CheckpointPath(interrupted)), "checkpoint");
  EXPECT_EQ(ReadFileOrEmpty(store->CheckpointPath(succeeded)), "");
  EXPECT_EQ(ReadFileOrEmpty(store->CheckpointPath(unknown)), "");
}

TEST_F(JobStoreTest, ListsNewestFirstFilteredAndPaged) {
  std::unique_ptr<JobStore> store = Open();
  std::vector<std::string> ids;  // oldest first
  for (int i = 0; i < 7; ++i) {
    store::JobRecord request = Request();
    request.set_method(i % 2 == 0 ? "slang" : "bali");
    if (i == 3) request.set_model_name("m");
    if (i == 5) request.set_dataset_id("ds-00000000000000bb");
    ids.push_back(store->Create(request)->job_id());
    absl::SleepFor(absl::Milliseconds(2));
  }
  SetState(store.get(), ids[1], store::JobRecord::SUCCEEDED);
  const auto list = [&](const JobFilter& filter,
                        const std::optional<JobCursor>& after, int limit,
                        bool* more) {
    std::vector<std::string> listed;
    const absl::StatusOr<std::vector<store::JobRecord>> jobs =
        store->ListNewestFirst(filter, after, limit, more);
    EXPECT_TRUE(jobs.ok()) << jobs.status();
    if (!jobs.ok()) return listed;
    for (const store::JobRecord& job : *jobs) {
      listed.push_back(job.job_id());
    }
    return listed;
  };
  bool more = false;
  EXPECT_THAT(list({}, std::nullopt, 3, &more),
              ElementsAre(ids[6], ids[5], ids[4]));
  EXPECT_TRUE(more);
  const store::JobRecord fifth = *store->Get(ids[4]);
  EXPECT_THAT(list({}, JobCursor{fifth.created_unix_ms(), ids[4]}, 3, &more),
              ElementsAre(ids[3], ids[2], ids[1]));
  EXPECT_TRUE(more);
  const store::JobRecord second = *store->Get(ids[1]);
  EXPECT_THAT(list({}, JobCursor{second.created_unix_ms(), ids[1]}, 3, &more),
              ElementsAre(ids[0]));
  EXPECT_FALSE(more);

  JobFilter bali;
  bali.method = "bali";
  EXPECT_THAT(list(bali, std::nullopt, 10, &more),
              ElementsAre(ids[5], ids[3], ids[1]));
  EXPECT_FALSE(more);
  JobFilter succeeded;
  succeeded.states = {store::JobRecord::SUCCEEDED};
  EXPECT_THAT(list(succeeded, std::nullopt, 10, &more), ElementsAre(ids[1]));
  JobFilter queued_or_succeeded;
  queued_or_succeeded.states = {store::JobRecord::QUEUED,
                                store::JobRecord::SUCCEEDED};
  EXPECT_EQ(list(queued_or_succeeded, std::nullopt, 10, &more).size(), 7u);
  JobFilter model;
  model.model_name = "m";
  EXPECT_THAT(list(model, std::nullopt, 10, &more), ElementsAre(ids[3]));
  JobFilter dataset;
  dataset.dataset_id = "ds-00000000000000bb";
  EXPECT_THAT(list(dataset, std::nullopt, 10, &more), ElementsAre(ids[5]));
  dataset.method = "slang";  // and
  EXPECT_TRUE(list(dataset, std::nullopt, 10, &more).empty());
}

TEST_F(JobStoreTest, UnknownIdIsNotFound) {
  std::unique_ptr<JobStore> store = Open();
  EXPECT_THAT(store->Get("job-0000000000000000").status(),
              StatusIs(absl::StatusCode::kNotFound,
                       "job_id 'job-0000000000000000' not found"));
  EXPECT_THAT(store
                  ->Update("job-0000000000000000",
                           [](store::JobRecord*) { return true; })
                  .status(),
              StatusIs(absl::StatusCode::kNotFound, "job_id"));
}

// Progress kept in memory is what Get and the listings return while the job
// runs; the next persisted update commits it.
TEST_F(JobStoreTest, LiveProgressIsListedAndCommittedWithTheNextUpdate) {
  std::unique_ptr<JobStore> store = Open();
  const std::string id = store->Create(Request())->job_id();
  SetState(store.get(), id, store::JobRecord::RUNNING);
  ASSERT_TRUE(store
                  ->Update(
                      id,
                      [](store::JobRecord* r) {
                        r->set_step(42);
                        return true;
                      },
                      JobStore::Durability::kMemoryOnly)
                  .ok());
  EXPECT_EQ(store->Get(id)->step(), 42);
  bool more = false;
  EXPECT_EQ((*store->ListNewestFirst({}, std::nullopt, 10, &more))[0].step(),
            42);
  EXPECT_EQ(store->List()[0].step(), 42);
  const absl::StatusOr<store::JobRecord> in_store =
      dir_.metadata()->Read([&](MetadataReader& r) { return r.GetJob(id); });
  EXPECT_EQ(in_store->step(), 0);
  // A checkpoint's update commits it.
  ASSERT_TRUE(store->Update(id, [](store::JobRecord*) { return true; }).ok());
  store.reset();
  store = Open();
  const absl::StatusOr<store::JobRecord> reread = store->Get(id);
  EXPECT_EQ(reread->step(), 42);
  EXPECT_EQ(reread->state(), store::JobRecord::INTERRUPTED);
}

}  // namespace
}  // namespace bnn::server
