#include "server/jobs/job_runner.h"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <memory>
#include <optional>
#include <sstream>
#include <string>
#include <sys/resource.h>
#include <thread>
#include <utility>
#include <vector>

#include <absl/time/clock.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "bnn/io/snapshot.h"
#include "bnn/methods/registry.h"
#include "bnn/predict/predictor.h"
#include "bnn/train/trainer.h"

#include "server/jobs/compute_threads.h"
#include "server/jobs/job_plan.h"
#include "server/store/dataset_file.h"
#include "tests/server/server_test_util.h"
#include "tests/server/store/store_dir.h"
#include "tests/test_util/test_util.h"

namespace bnn::server {
namespace {

using ::bnn::server::testutil::CubicDataset;
using ::bnn::server::testutil::ReadFileOrEmpty;
using ::bnn::server::testutil::StatusIs;
using ::bnn::server::testutil::StoreDir;
using ::bnn::server::testutil::TempDir;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::Pair;

class JobRunnerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    datasets_ = std::make_unique<DatasetStore>(dir_.metadata(), dir_.blobs());
    snapshots_ = std::make_unique<SnapshotStore>(dir_.metadata(), dir_.blobs());
    predictors_ = *PredictorCache::Create({}, snapshots_.get());
    jobs_ = *JobStore::Open(dir_.metadata(), CheckpointDir());
    dataset_id_ = datasets_->Create(CubicDataset(30), "cubic")->dataset_id();
    runner_ = *JobRunner::Create(
        {}, jobs_.get(), datasets_.get(), snapshots_.get(), predictors_.get(),
        &MethodRegistry::Builtin(), &metrics_, &budget_);
  }

  // Stops the runner and starts the next process's: the job store opened
  // again and a runner with `options`.
  void Restart(const JobRunner::Options& options = {}) {
    runner_.reset();
    jobs_ = *JobStore::Open(dir_.metadata(), CheckpointDir());
    runner_ = *JobRunner::Create(
        options, jobs_.get(), datasets_.get(), snapshots_.get(),
        predictors_.get(), &MethodRegistry::Builtin(), &metrics_, &budget_);
  }

  // The snapshot's bytes without its times (training seconds, creation).
  std::string TimelessSnapshot(const std::string& snapshot_id) {
    absl::StatusOr<std::shared_ptr<const Snapshot>> loaded =
        predictors_->GetSnapshot(snapshot_id);
    EXPECT_TRUE(loaded.ok()) << loaded.status();
    if (!loaded.ok()) return "";
    Snapshot copy = **loaded;
    copy.training.seconds = 0;
    copy.created_unix_ms = 0;
    return EncodeSnapshot(copy).value_or("");
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

  std::string CheckpointDir() const { return temp_.path() + "/checkpoints"; }

  TempDir temp_;
  StoreDir dir_{temp_.path() + "/data"};
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
  // Set just after the commit that makes the job SUCCEEDED.
  const absl::Time deadline = absl::Now() + absl::Seconds(5);
  while (metrics_.snapshots().Value() != 1 && absl::Now() < deadline) {
    absl::SleepFor(absl::Milliseconds(1));
  }
  EXPECT_EQ(metrics_.snapshots().Value(), 1);
  ExpectJobsGauge("succeeded", 1);
  ExpectJobsGauge("running", 0);
}

// Nice values of this process's threads (/proc/self/task/*/stat, field 19).
std::vector<int> ThreadNiceValues() {
  std::vector<int> values;
  for (const auto& task :
       std::filesystem::directory_iterator("/proc/self/task")) {
    std::ifstream in(task.path() / "stat");
    std::string stat((std::istreambuf_iterator<char>(in)),
                     std::istreambuf_iterator<char>());
    const size_t paren = stat.rfind(')');
    if (paren == std::string::npos) continue;
    std::istringstream fields(stat.substr(paren + 2));
    std::string field;
    // After "pid (comm) ": state is field 3, nice field 19.
    for (int i = 3; i <= 19 && (fields >> field); ++i) {
    }
    values.push_back(std::stoi(field));
  }
  return values;
}

TEST_F(JobRunnerTest, TrainsAtTheConfiguredNiceValue) {
  // The fixture's runner has the default training_nice (10); the test's
  // own threads stay at 0.
  ASSERT_EQ(JobRunner::Options().training_nice, 10);
  // Under `nice ctest` every thread starts at or above the training nice.
  const int base = getpriority(PRIO_PROCESS, 0);
  if (base >= 10) GTEST_SKIP() << "the test itself runs at nice " << base;
  const std::vector<int> before = ThreadNiceValues();
  ASSERT_EQ(std::count(before.begin(), before.end(), 10), 0);
  const std::string running = runner_->Submit(Job(1000000))->job_id();
  WaitFor(running, [](const store::JobRecord& job) { return job.step() > 0; });
  const std::vector<int> nice = ThreadNiceValues();
  // The job's thread (and any OpenMP threads it started).
  EXPECT_GE(std::count(nice.begin(), nice.end(), 10), 1);
  EXPECT_GE(std::count(nice.begin(), nice.end(), base), 1);
  ASSERT_TRUE(runner_->Cancel(running).ok());
  WaitForState(running, store::JobRecord::CANCELLED);
}

TEST(LowerThreadPriorityTest, LowersOnlyTheCallingThreadAndNeverRaises) {
  // The values below assume the test starts at nice 0 (not `nice ctest`).
  if (const int base = getpriority(PRIO_PROCESS, 0); base != 0) {
    GTEST_SKIP() << "the test itself runs at nice " << base;
  }
  std::thread thread([] {
    EXPECT_EQ(LowerThreadPriority(5), 5);
    EXPECT_EQ(LowerThreadPriority(2), 5);    // never raised again
    EXPECT_EQ(LowerThreadPriority(40), 19);  // clamped
    const std::vector<int> nice = ThreadNiceValues();
    EXPECT_EQ(std::count(nice.begin(), nice.end(), 19), 1);
  });
  thread.join();
  const std::vector<int> nice = ThreadNiceValues();
  EXPECT_EQ(std::count(nice.begin(), nice.end(), 19), 0);
}

// Issue 15: a finished job hands its posterior to the predictor cache, so
// the first Predict neither reads nor decodes the snapshot; and the handed
// predictor predicts what one decoded from the stored bytes does, bit for
// bit, for every posterior family.
TEST_F(JobRunnerTest, AFinishedJobsPredictorIsCachedAndEqualsTheStoredOne) {
  const std::vector<std::pair<std::string, std::string>> methods = {
      {"slang", "low-rank"},       {"bbb", "diagonal"},
      {"noisy_kfac", "kronecker"}, {"bali", "matrix-normal"},
      {"mc_dropout", "dropout"},   {"vogn_full", "full"},
      {"hmc", "samples"},          {"nng_blktri", "kronecker-chain"}};
  for (const auto& [method, family] : methods) {
    SCOPED_TRACE(method + " (" + family + ")");
    store::JobRecord request = Job(2);
    request.set_method(method);
    request.mutable_params()->clear();
    if (method == "hmc") {
      (*request.mutable_params())["chains"] = "1";
      (*request.mutable_params())["warmup"] = "5";
      (*request.mutable_params())["leapfrog_steps"] = "3";
    } else {
      (*request.mutable_params())["batch_size"] = "10";
    }
    const std::string id = runner_->Submit(request)->job_id();
    const store::JobRecord job = WaitFor(id, [](const store::JobRecord& j) {
      return j.state() == store::JobRecord::SUCCEEDED ||
             j.state() == store::JobRecord::FAILED;
    });
    ASSERT_EQ(job.state(), store::JobRecord::SUCCEEDED) << job.error();
    const int64_t misses = predictors_->GetStats().misses;
    const auto cached = predictors_->Get(job.snapshot_id());
    ASSERT_TRUE(cached.ok()) << cached.status();
    EXPECT_EQ(predictors_->GetStats().misses, misses) << "loaded, not handed";
    // The stored bytes, decoded.
    const absl::StatusOr<Snapshot> stored = snapshots_->Read(job.snapshot_id());
    ASSERT_TRUE(stored.ok()) << stored.status();
    const auto decoded = Predictor::Create(
        std::make_shared<const Snapshot>(*stored), PredictorOptions());
    ASSERT_TRUE(decoded.ok()) << decoded.status();
    PredictOptions options;
    options.num_samples = 8;
    options.seed = 11;
    options.cache_samples = false;
    const std::vector<double> rows = {-1.5, -0.2, 0.4, 2.0};
    const auto a = (*cached)->Predict(rows, 4, options);
    const auto b = (*decoded)->Predict(rows, 4, options);
    ASSERT_TRUE(a.ok() && b.ok()) << a.status() << b.status();
    EXPECT_EQ(a->mean, b->mean);
    EXPECT_EQ(a->epistemic_variance, b->epistemic_variance);
  }
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

  // CANCELLING until its step ends, then CANCELLED.
  EXPECT_EQ(runner_->Cancel(running)->state(), store::JobRecord::CANCELLING);
  const store::JobRecord stopped =
      WaitForState(running, store::JobRecord::CANCELLED);
  EXPECT_LT(stopped.step(), stopped.total_steps());
  EXPECT_EQ(stopped.snapshot_id(), "");
  EXPECT_GT(stopped.finished_unix_ms(), 0);
  // A cancelled job leaves no checkpoint.
  EXPECT_EQ(ReadFileOrEmpty(jobs_->CheckpointPath(running)), "");
  // The cancelled queued job never ran, and cancelling again is a no-op.
  EXPECT_EQ(runner_->Get(queued)->started_unix_ms(), 0);
  EXPECT_EQ(runner_->Cancel(queued)->state(), store::JobRecord::CANCELLED);
  EXPECT_EQ(runner_->Cancel(running)->state(), store::JobRecord::CANCELLED);
  ExpectJobsGauge("cancelled", 2);
}

TEST_F(JobRunnerTest, AFullQueueRefusesNewJobs) {
  JobRunner::Options options;
  options.max_queued_jobs = 2;
  Restart(options);
  const std::string running = runner_->Submit(Job(1000000))->job_id();
  WaitFor(running, [](const store::JobRecord& job) { return job.step() > 0; });
  ASSERT_TRUE(runner_->Submit(Job(1)).ok());
  const std::string second = runner_->Submit(Job(1))->job_id();
  EXPECT_THAT(runner_->Submit(Job(1)).status(),
              StatusIs(absl::StatusCode::kResourceExhausted,
                       "2 jobs are queued, the server limit "
                       "(--max-queued-jobs = 2)"));
  // A cancelled job frees its place.
  ASSERT_TRUE(runner_->Cancel(second).ok());
  EXPECT_TRUE(runner_->Submit(Job(1)).ok());
  runner_->Cancel(running).IgnoreError();
}

// Jobs that run to the end are a quarter as long under a sanitizer: the
// fixture's runner trains at nice 10, and beside another test the ASan
// pass ran past this test's timeout.
constexpr int kLongJobDivisor = kSanitizerSlowdown > 1 ? 4 : 1;

TEST_F(JobRunnerTest, ShutdownInterruptsRunningJobsThatResumeBitForBit) {
  // 3 steps per pass: long enough to stop mid-way, short to finish.
  constexpr int kEpochs = 4000 / kLongJobDivisor;
  const std::string reference = runner_->Submit(Job(kEpochs))->job_id();
  const store::JobRecord undisturbed =
      WaitForState(reference, store::JobRecord::SUCCEEDED);

  const std::string running = runner_->Submit(Job(kEpochs))->job_id();
  const std::string queued = runner_->Submit(Job(1))->job_id();
  WaitFor(running,
          [](const store::JobRecord& job) { return job.step() > 100; });
  runner_->Shutdown();
  const store::JobRecord interrupted = *runner_->Get(running);
  ASSERT_EQ(interrupted.state(), store::JobRecord::INTERRUPTED)
      << interrupted.error();
  EXPECT_EQ(interrupted.error(), "");
  EXPECT_LT(interrupted.step(), interrupted.total_steps());
  EXPECT_NE(ReadFileOrEmpty(jobs_->CheckpointPath(running)), "");
  EXPECT_EQ(runner_->Get(queued)->state(), store::JobRecord::QUEUED);
  EXPECT_THAT(runner_->Submit(Job(1)).status(),
              StatusIs(absl::StatusCode::kUnavailable, "shutting down"));
  ExpectJobsGauge("interrupted", 1);

  // The next process resumes the interrupted job (before the queued one)
  // from its checkpoint, to the undisturbed run's snapshot.
  Restart();
  const store::JobRecord resumed =
      WaitForState(running, store::JobRecord::SUCCEEDED);
  EXPECT_EQ(resumed.step(), undisturbed.step());
  EXPECT_EQ(TimelessSnapshot(resumed.snapshot_id()),
            TimelessSnapshot(undisturbed.snapshot_id()));
  EXPECT_EQ(snapshots_->GetMeta(resumed.snapshot_id())->job_id(), running);
  // Its loss curve: steps increasing, none repeated, the last one last.
  const auto& steps = resumed.loss_curve_steps();
  ASSERT_FALSE(steps.empty());
  EXPECT_EQ(steps.size(), resumed.loss_curve_losses_size());
  for (int i = 1; i < steps.size(); ++i) EXPECT_LT(steps[i - 1], steps[i]);
  EXPECT_EQ(steps[steps.size() - 1], resumed.total_steps());
  EXPECT_LE(steps.size(), 1000);
  // Finished: its checkpoint is gone.
  EXPECT_EQ(ReadFileOrEmpty(jobs_->CheckpointPath(running)), "");
  EXPECT_NE(WaitForState(queued, store::JobRecord::SUCCEEDED).snapshot_id(),
            "");
}

TEST_F(JobRunnerTest, ACorruptCheckpointFailsItsJobAlone) {
  const std::string running = runner_->Submit(Job(1000000))->job_id();
  const std::string queued = runner_->Submit(Job(1))->job_id();
  WaitFor(running, [](const store::JobRecord& job) { return job.step() > 0; });
  runner_->Shutdown();
  const std::string path = jobs_->CheckpointPath(running);
  std::string bytes = ReadFileOrEmpty(path);
  ASSERT_FALSE(bytes.empty());
  bytes[bytes.size() / 2] ^= 0x10;
  std::ofstream(path, std::ios::binary | std::ios::trunc) << bytes;

  Restart();
  const store::JobRecord failed =
      WaitForState(running, store::JobRecord::FAILED);
  EXPECT_THAT(failed.error(), HasSubstr("DATA_LOSS"));
  EXPECT_THAT(failed.error(), HasSubstr("checkpoint " + path + " is corrupt"));
  EXPECT_NE(WaitForState(queued, store::JobRecord::SUCCEEDED).snapshot_id(),
            "");
  EXPECT_EQ(ReadFileOrEmpty(path), "");
}

TEST_F(JobRunnerTest, AwaitStoppedRecordsJobsStillRunningAtTheDeadline) {
  const std::string running = runner_->Submit(Job(1000000))->job_id();
  WaitFor(running, [](const store::JobRecord& job) { return job.step() > 0; });
  // Without BeginShutdown the job keeps training past the deadline, as one
  // in a long step would.
  EXPECT_FALSE(runner_->AwaitStopped(absl::Now() + absl::Milliseconds(50)));
  const store::JobRecord job = *runner_->Get(running);
  EXPECT_EQ(job.state(), store::JobRecord::INTERRUPTED);
  EXPECT_EQ(job.error(), "");
  runner_->BeginShutdown();
  EXPECT_TRUE(runner_->AwaitStopped(absl::Now() + absl::Seconds(30)));
}

TEST_F(JobRunnerTest, CheckpointsPeriodicallyAndDeletesTheLastWhenDone) {
  JobRunner::Options options;
  options.checkpoint_interval = absl::Milliseconds(1);
  Restart(options);
  const std::string id = runner_->Submit(Job(1000000))->job_id();
  const std::string path = jobs_->CheckpointPath(id);
  const absl::Time deadline = absl::Now() + absl::Seconds(30);
  while (ReadFileOrEmpty(path).empty() && absl::Now() < deadline) {
    absl::SleepFor(absl::Milliseconds(5));
  }
  EXPECT_NE(ReadFileOrEmpty(path), "");
  // The record is committed with the checkpoint: a process killed now
  // leaves the progress it resumes from (read from the metadata store, not
  // the job store's live progress).
  int64_t persisted_step = 0;
  while (persisted_step == 0 && absl::Now() < deadline) {
    persisted_step = dir_.metadata()
                         ->Read([&](MetadataReader& r) { return r.GetJob(id); })
                         ->step();
  }
  EXPECT_GT(persisted_step, 0);
  // The metrics see the checkpoints: after 300 ms of running, the job has
  // gone far less than that without one.
  absl::SleepFor(absl::Milliseconds(300));
  double age = -1;
  for (const prometheus::MetricFamily& family : metrics_.registry().Collect()) {
    if (family.name != "bnn_training_checkpoint_age_seconds") continue;
    for (const prometheus::ClientMetric& metric : family.metric) {
      age = metric.gauge.value;
    }
  }
  EXPECT_GE(age, 0);
  EXPECT_LT(age, 0.2);
  runner_->Cancel(id).IgnoreError();
  WaitForState(id, store::JobRecord::CANCELLED);
  EXPECT_EQ(ReadFileOrEmpty(path), "");

  const std::string done = runner_->Submit(Job(100))->job_id();
  WaitForState(done, store::JobRecord::SUCCEEDED);
  EXPECT_EQ(ReadFileOrEmpty(jobs_->CheckpointPath(done)), "");
}

TEST_F(JobRunnerTest, OnSucceededSeesTheJobAndItsErrorFailsTheJob) {
  absl::Mutex mu;
  std::vector<std::pair<std::string, std::string>> calls;
  JobRunner::Options options;
  options.on_succeeded = [&](MetadataTransaction&, const store::JobRecord& job,
                             const std::string& snapshot_id) {
    absl::MutexLock lock(&mu);
    calls.emplace_back(job.model_name(), snapshot_id);
    return job.model_name() == "bad"
               ? absl::FailedPreconditionError("model 'bad' is locked")
               : absl::OkStatus();
  };
  Restart(options);
  store::JobRecord good = Job(1);
  good.set_model_name("good");
  good.set_publish(true);
  store::JobRecord bad = Job(1);
  bad.set_model_name("bad");
  const std::string good_id = runner_->Submit(good)->job_id();
  const std::string bad_id = runner_->Submit(bad)->job_id();
  const store::JobRecord succeeded =
      WaitForState(good_id, store::JobRecord::SUCCEEDED);
  const store::JobRecord failed =
      WaitForState(bad_id, store::JobRecord::FAILED);
  EXPECT_THAT(failed.error(), HasSubstr("model 'bad' is locked"));
  EXPECT_NE(failed.snapshot_id(), "");  // stored, not lost
  absl::MutexLock lock(&mu);
  EXPECT_THAT(calls, ElementsAre(Pair("good", succeeded.snapshot_id()),
                                 Pair("bad", failed.snapshot_id())));
}

TEST_F(JobRunnerTest, WatchersGetProgressInStepOrderAndTheFinalState) {
  absl::Mutex mu;
  std::vector<JobEvent> seen;
  uint64_t last_seq = 0;
  JobEvents& events = runner_->events();
  const std::string id = runner_->Submit(Job(3000 / kLongJobDivisor))->job_id();
  std::optional<JobEvents::Start> start;
  {
    // Wake-ups wait until the subscription's start is known.
    absl::MutexLock lock(&mu);
    start = events.Watch(id, std::nullopt, [&] {
      absl::MutexLock lock(&mu);
      for (JobEvent& event : events.Take(id, &last_seq)) {
        seen.push_back(std::move(event));
      }
    });
    last_seq = std::max(last_seq, start->last_seq);
  }
  WaitForState(id, store::JobRecord::SUCCEEDED);
  // The final event follows the record's update.
  const auto final_seen = [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu) {
    return !seen.empty() && seen.back().kind == JobEvent::Kind::kState &&
           seen.back().state == store::JobRecord::SUCCEEDED;
  };
  absl::MutexLock lock(&mu);
  mu.AwaitWithTimeout(absl::Condition(&final_seen), absl::Seconds(10));
  events.Unsubscribe(id, start->subscription);
  ASSERT_FALSE(seen.empty());
  EXPECT_EQ(seen.back().kind, JobEvent::Kind::kState);
  EXPECT_EQ(seen.back().state, store::JobRecord::SUCCEEDED);
  EXPECT_NE(seen.back().snapshot_id, "");
  int64_t step = 0;
  for (const JobEvent& event : seen) {
    if (event.kind != JobEvent::Kind::kProgress) continue;
    EXPECT_GT(event.step, step);
    EXPECT_EQ(event.total_steps, 9000 / kLongJobDivisor);
    step = event.step;
  }
  EXPECT_EQ(step, 9000 / kLongJobDivisor);  // the last step is always reported
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
  // The randomized eigensolver's workspaces are D x (L + 2) blocks, so
  // every part of this estimate but the dataset grows with the net; the
  // exact one (which eig_solver=auto picks for both nets) adds an
  // (L + M S)^2 matrix independent of the width.
  store::JobRecord narrow = Job(1);
  (*narrow.mutable_params())["eig_solver"] = "randomized";
  const absl::StatusOr<MemoryEstimate> small = estimate(narrow);
  ASSERT_TRUE(small.ok()) << small.status();
  store::JobRecord wide = narrow;
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
