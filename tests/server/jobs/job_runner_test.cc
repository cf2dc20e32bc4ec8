#include "server/jobs/job_runner.h"

#include <memory>
#include <string>

#include <absl/time/clock.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "bnn/methods/registry.h"
#include "bnn/train/trainer.h"

#include "server/jobs/job_plan.h"
#include "server/store/dataset_file.h"
#include "tests/server/server_test_util.h"

namespace bnn::server {
namespace {

using ::bnn::server::testutil::CubicDataset;
using ::bnn::server::testutil::StatusIs;
using ::bnn::server::testutil::TempDir;
using ::testing::HasSubstr;

class JobRunnerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    datasets_ = *DatasetStore::Open(dir_.path() + "/datasets");
    snapshots_ = *SnapshotStore::Open(dir_.path() + "/snapshots");
    predictors_ = *PredictorCache::Create({}, snapshots_.get());
    jobs_ = *JobStore::Open(dir_.path() + "/jobs");
    dataset_id_ = datasets_->Create(CubicDataset(30), "cubic")->dataset_id();
    runner_ = *JobRunner::Create(
        {}, jobs_.get(), datasets_.get(), snapshots_.get(), predictors_.get(),
        &MethodRegistry::Builtin(), &metrics_, &budget_);
  }

  // A job of `epochs` passes of 3 steps each.
  store::JobRecord Job(int epochs) const {
    store::JobRecord job;
    job.set_dataset_id(dataset_id_);
    job.set_dataset_version(1);
    job.set_method("slang");
    (*job.mutable_params())["batch_size"] = "10";
    job.add_hidden_sizes(4);
    job.add_activations("tanh");
    job.set_epochs(epochs);
    job.set_seed(3);
    return job;
  }

  // Polls until `done(job)` holds; fails the test after 30 s.
  template <typename Predicate>
  store::JobRecord WaitFor(const std::string& id, Predicate done) {
    const absl::Time deadline = absl::Now() + absl::Seconds(30);
    while (true) {
      const absl::StatusOr<store::JobRecord> job = runner_->Get(id);
      EXPECT_TRUE(job.ok()) << job.status();
      if (!job.ok() || done(*job)) return job.value_or(store::JobRecord());
      if (absl::Now() > deadline) {
        ADD_FAILURE() << "job " << id << " stuck in "
                      << store::JobRecord::State_Name(job->state());
        return *job;
      }
      absl::SleepFor(absl::Milliseconds(5));
    }
  }
  store::JobRecord WaitForState(const std::string& id,
                                store::JobRecord::State state) {
    return WaitFor(id, [state](const store::JobRecord& job) {
      return job.state() == state;
    });
  }
  // The runner publishes bnn_training_jobs just after a state change.
  void ExpectJobsGauge(const std::string& state, double value) {
    const absl::Time deadline = absl::Now() + absl::Seconds(5);
    while (metrics_.training_jobs(state).Value() != value &&
           absl::Now() < deadline) {
      absl::SleepFor(absl::Milliseconds(1));
    }
    EXPECT_EQ(metrics_.training_jobs(state).Value(), value) << state;
  }

  TempDir dir_;
  std::unique_ptr<DatasetStore> datasets_;
  std::unique_ptr<SnapshotStore> snapshots_;
  std::unique_ptr<PredictorCache> predictors_;
  std::unique_ptr<JobStore> jobs_;
  ServerMetrics metrics_;
  // Roomy enough for every job of these tests.
  MemoryBudget budget_{int64_t{1} << 30};
  std::string dataset_id_;
  std::unique_ptr<JobRunner> runner_;  // last: stopped first
};

TEST_F(JobRunnerTest, TrainsAndStoresTheSnapshot) {
  const absl::StatusOr<store::JobRecord> submitted = runner_->Submit(Job(2));
  ASSERT_TRUE(submitted.ok()) << submitted.status();
  const store::JobRecord job =
      WaitForState(submitted->job_id(), store::JobRecord::SUCCEEDED);
  EXPECT_EQ(job.error(), "");
  EXPECT_EQ(job.step(), 6);
  EXPECT_EQ(job.total_steps(), 6);
  EXPECT_EQ(job.epoch(), 2);
  EXPECT_EQ(job.progress(), 1.0);
  EXPECT_GT(job.last_loss(), 0.0);
  EXPECT_GE(job.started_unix_ms(), job.created_unix_ms());
  EXPECT_GE(job.finished_unix_ms(), job.started_unix_ms());
  const auto predictor = predictors_->Get(job.snapshot_id());
  ASSERT_TRUE(predictor.ok()) << predictor.status();
  EXPECT_EQ((*predictor)->snapshot().training.dataset_id, dataset_id_);
  EXPECT_EQ((*predictor)->snapshot().training.seed, 3u);
  EXPECT_EQ((*predictor)->snapshot().model.activations,
            std::vector<Activation>{Activation::kTanh});
  EXPECT_EQ(metrics_.training_steps("slang").Value(), 6);
  EXPECT_EQ(metrics_.snapshots().Value(), 1);
  ExpectJobsGauge("succeeded", 1);
  ExpectJobsGauge("running", 0);
}

TEST_F(JobRunnerTest, FailedTrainingRecordsTheError) {
  store::JobRecord bad = Job(2);
  (*bad.mutable_params())["batch_size"] = "0";
  const std::string id = runner_->Submit(bad)->job_id();
  const store::JobRecord job = WaitForState(id, store::JobRecord::FAILED);
  EXPECT_THAT(job.error(), HasSubstr("batch_size"));
  EXPECT_EQ(job.snapshot_id(), "");
  ExpectJobsGauge("failed", 1);
}

TEST_F(JobRunnerTest, CancelsQueuedAndRunningJobs) {
  // One worker: the long job runs, the second waits behind it.
  const std::string running = runner_->Submit(Job(1000000))->job_id();
  const std::string queued = runner_->Submit(Job(1))->job_id();
  WaitFor(running, [](const store::JobRecord& job) { return job.step() > 0; });
  EXPECT_EQ(runner_->Get(queued)->state(), store::JobRecord::QUEUED);
  ExpectJobsGauge("queued", 1);
  ExpectJobsGauge("running", 1);

  const absl::StatusOr<store::JobRecord> cancelled = runner_->Cancel(queued);
  ASSERT_TRUE(cancelled.ok()) << cancelled.status();
  EXPECT_EQ(cancelled->state(), store::JobRecord::CANCELLED);

  EXPECT_EQ(runner_->Cancel(running)->state(), store::JobRecord::RUNNING);
  const store::JobRecord stopped =
      WaitForState(running, store::JobRecord::CANCELLED);
  EXPECT_LT(stopped.step(), stopped.total_steps());
  EXPECT_EQ(stopped.snapshot_id(), "");
  // The cancelled queued job never ran, and cancelling again is a no-op.
  EXPECT_EQ(runner_->Get(queued)->started_unix_ms(), 0);
  EXPECT_EQ(runner_->Cancel(queued)->state(), store::JobRecord::CANCELLED);
  ExpectJobsGauge("cancelled", 2);
}

TEST_F(JobRunnerTest, ShutdownFailsRunningJobsAndKeepsQueuedOnesForRestart) {
  const std::string running = runner_->Submit(Job(1000000))->job_id();
  const std::string queued = runner_->Submit(Job(1))->job_id();
  WaitFor(running, [](const store::JobRecord& job) { return job.step() > 0; });
  runner_->Shutdown();
  const store::JobRecord failed = *runner_->Get(running);
  EXPECT_EQ(failed.state(), store::JobRecord::FAILED);
  EXPECT_EQ(failed.error(), kRestartedJobError);
  EXPECT_EQ(runner_->Get(queued)->state(), store::JobRecord::QUEUED);
  EXPECT_THAT(runner_->Submit(Job(1)).status(),
              StatusIs(absl::StatusCode::kUnavailable, "shutting down"));

  // The next process's store keeps the queued job queued, and its runner
  // trains it.
  runner_.reset();
  jobs_ = *JobStore::Open(dir_.path() + "/jobs");
  EXPECT_EQ(jobs_->Get(queued)->state(), store::JobRecord::QUEUED);
  EXPECT_EQ(jobs_->Get(running)->state(), store::JobRecord::FAILED);
  runner_ = *JobRunner::Create({}, jobs_.get(), datasets_.get(),
                               snapshots_.get(), predictors_.get(),
                               &MethodRegistry::Builtin(), &metrics_, &budget_);
  EXPECT_NE(WaitForState(queued, store::JobRecord::SUCCEEDED).snapshot_id(),
            "");
}

TEST_F(JobRunnerTest, AwaitStoppedRecordsJobsStillRunningAtTheDeadline) {
  const std::string running = runner_->Submit(Job(1000000))->job_id();
  WaitFor(running, [](const store::JobRecord& job) { return job.step() > 0; });
  // Without BeginShutdown the job keeps training past the deadline, as one
  // in a long step would.
  EXPECT_FALSE(runner_->AwaitStopped(absl::Now() + absl::Milliseconds(50)));
  const store::JobRecord job = *runner_->Get(running);
  EXPECT_EQ(job.state(), store::JobRecord::FAILED);
  EXPECT_EQ(job.error(), kRestartedJobError);
  runner_->BeginShutdown();
  EXPECT_TRUE(runner_->AwaitStopped(absl::Now() + absl::Seconds(30)));
}

TEST_F(JobRunnerTest, TrainsTheRecordedDatasetVersion) {
  const store::DatasetMeta v1 = *datasets_->Get(dataset_id_);
  Dataset more = *DatasetSchema(v1);
  more.features = CubicDataset(10, 2).features;
  more.targets = CubicDataset(10, 2).targets;
  ASSERT_TRUE(datasets_->Append(dataset_id_, more, 1).ok());
  const std::string id = runner_->Submit(Job(1))->job_id();  // version 1
  const store::JobRecord job = WaitForState(id, store::JobRecord::SUCCEEDED);
  const Snapshot& snapshot = (*predictors_->Get(job.snapshot_id()))->snapshot();
  EXPECT_EQ(snapshot.training.dataset_version, 1);
  EXPECT_EQ(snapshot.training.num_train, 30);
  EXPECT_EQ(snapshot.training.dataset_hash, v1.hash());
}

TEST_F(JobRunnerTest, WarmStartsFromTheParent) {
  const std::string first = runner_->Submit(Job(1))->job_id();
  const std::string parent =
      WaitForState(first, store::JobRecord::SUCCEEDED).snapshot_id();
  store::JobRecord warm = Job(1);
  warm.set_parent_snapshot_id(parent);
  warm.set_prior_from_parent(true);
  const std::string id = runner_->Submit(warm)->job_id();
  const store::JobRecord job = WaitForState(id, store::JobRecord::SUCCEEDED);
  const Snapshot& snapshot = (*predictors_->Get(job.snapshot_id()))->snapshot();
  EXPECT_EQ(snapshot.training.parent_snapshot_id, parent);
  EXPECT_TRUE(snapshot.training.prior_from_parent);
}

TEST_F(JobRunnerTest, MissingParentFailsTheJob) {
  store::JobRecord warm = Job(1);
  warm.set_parent_snapshot_id("snap-0000000000000001");
  const std::string id = runner_->Submit(warm)->job_id();
  const store::JobRecord job = WaitForState(id, store::JobRecord::FAILED);
  EXPECT_THAT(job.error(),
              HasSubstr("NOT_FOUND: snapshot_id 'snap-0000000000000001' not "
                        "found"));
}

TEST_F(JobRunnerTest, JobLargerThanTheMemoryBudgetFailsAlone) {
  store::JobRecord big = Job(1);
  // 1e6 weights and rank 1000: SLANG's U alone is 8 GB.
  big.set_hidden_sizes(0, 1000);
  big.add_hidden_sizes(1000);
  big.add_activations("tanh");
  (*big.mutable_params())["rank"] = "1000";
  const std::string id = runner_->Submit(big)->job_id();
  const store::JobRecord failed = WaitForState(id, store::JobRecord::FAILED);
  EXPECT_THAT(failed.error(), HasSubstr("RESOURCE_EXHAUSTED"));
  EXPECT_THAT(failed.error(), HasSubstr("--memory-budget-bytes"));
  EXPECT_THAT(failed.error(), HasSubstr("training job " + id));
  EXPECT_EQ(budget_.reserved_bytes(), 0);
  // The runner goes on with the next job.
  const std::string next = runner_->Submit(Job(1))->job_id();
  WaitForState(next, store::JobRecord::SUCCEEDED);
}

TEST_F(JobRunnerTest, AJobsPlanIsTheOneItWasSubmittedWith) {
  const store::DatasetMeta dataset = *datasets_->Get(dataset_id_, 1);
  const absl::StatusOr<TrainingPlan> plan =
      PlanOfJob(Job(2), dataset, nullptr, MethodRegistry::Builtin());
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_EQ(plan->total_steps, 6);  // 2 passes of 30 rows in batches of 10
  EXPECT_EQ(plan->options.seed, 3u);
  // The record of the plan resolves to the same plan.
  const absl::StatusOr<TrainingPlan> again = PlanOfJob(
      JobRecordOf(*plan), dataset, nullptr, MethodRegistry::Builtin());
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_EQ(again->params, plan->params);
  EXPECT_EQ(again->total_steps, plan->total_steps);
  EXPECT_EQ(again->model.hidden_sizes, plan->model.hidden_sizes);
  // A record written before plans were stored, with epochs and seed among
  // its parameters, resolves to the same plan.
  store::JobRecord legacy = Job(2);
  (*legacy.mutable_params())["epochs"] = "2";
  (*legacy.mutable_params())["seed"] = "3";
  const absl::StatusOr<TrainingPlan> old_plan =
      PlanOfJob(legacy, dataset, nullptr, MethodRegistry::Builtin());
  ASSERT_TRUE(old_plan.ok()) << old_plan.status();
  EXPECT_EQ(old_plan->params, plan->params);
  EXPECT_EQ(old_plan->total_steps, plan->total_steps);
}

TEST_F(JobRunnerTest, TheMemoryEstimateCountsTheDatasetAndTheMethod) {
  const store::DatasetMeta dataset = *datasets_->Get(dataset_id_, 1);
  const auto estimate =
      [&](const store::JobRecord& job) -> absl::StatusOr<MemoryEstimate> {
    const absl::StatusOr<TrainingPlan> plan =
        PlanOfJob(job, dataset, nullptr, MethodRegistry::Builtin());
    if (!plan.ok()) return plan.status();
    return EstimateTrainingMemory(*plan, MethodRegistry::Builtin());
  };
  const absl::StatusOr<MemoryEstimate> small = estimate(Job(1));
  ASSERT_TRUE(small.ok()) << small.status();
  store::JobRecord wide = Job(1);
  wide.set_hidden_sizes(0, 1000);
  const absl::StatusOr<MemoryEstimate> large = estimate(wide);
  ASSERT_TRUE(large.ok()) << large.status();
  EXPECT_GT(large->bytes, 100 * small->bytes);
  store::JobRecord bad = Job(1);
  bad.set_method("no-such-method");
  EXPECT_FALSE(estimate(bad).ok());
}

TEST_F(JobRunnerTest, UnknownJobIsNotFound) {
  EXPECT_THAT(runner_->Cancel("job-0000000000000000").status(),
              StatusIs(absl::StatusCode::kNotFound, "job_id"));
}

TEST(JobRunnerCreateTest, RejectsBadOptions) {
  JobRunner::Options options;
  options.max_concurrent_jobs = 0;
  EXPECT_THAT(JobRunner::Create(options, nullptr, nullptr, nullptr, nullptr,
                                nullptr, nullptr, nullptr)
                  .status(),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       "max_concurrent_jobs 0 must be >= 1"));
}

}  // namespace
}  // namespace bnn::server
