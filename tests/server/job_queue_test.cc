// The job queue in the metadata store, against real processes: bnn-server
// replicas on one PostgreSQL (a real server, tests/test_util/
// postgres_server.h, one database per test) and one blob directory, and
// bnn-train. Each job is claimed and run by exactly one replica, whichever
// accepted it; a --role=serve replica runs none; the job of a replica killed
// mid-run is taken over by another once its heartbeat is stale and ends
// with the snapshot an uninterrupted run makes, bit for bit; a cancel
// through one replica stops the job where it runs; bnn-train runs a stored
// job (PostgreSQL and SQLite) to the snapshot the in-process runner makes,
// and waits for a live claimant's heartbeat to go stale before it takes a
// job over.
#include <filesystem>
#include <fstream>
#include <functional>
#include <memory>
#include <signal.h>
#include <string>
#include <vector>

#include <absl/strings/match.h>
#include <absl/strings/str_cat.h>
#include <absl/strings/str_split.h>
#include <absl/time/clock.h>
#include <gmock/gmock.h>
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>

#include "bnn/io/snapshot.h"
#include "bnn/v1/bnn_service.grpc.pb.h"

#include "server/store/job_store.h"
#include "server/store/postgres_metadata_store.h"
#include "tests/server/server_binary.h"
#include "tests/server/server_test_util.h"
#include "tests/test_util/postgres_server.h"
#include "tests/test_util/test_util.h"

namespace bnn::server {
namespace {

using ::bnn::server::testutil::NewClientChannel;
using ::bnn::server::testutil::TempDir;
using ::bnn::server::testutil::UploadCubic;
using ::bnn::testing::CommandResult;
using ::bnn::testing::PostgresEnvironment;
using ::bnn::testing::PostgresServer;
using ::bnn::testing::ReadFileOrEmpty;
using ::bnn::testing::RunCommand;
using ::bnn::testing::ServerProcess;
using ::testing::HasSubstr;
using ::testing::Not;
using S = v1::BnnService::Stub;

bool IsFinal(v1::JobState state) {
  return state == v1::JOB_STATE_SUCCEEDED || state == v1::JOB_STATE_FAILED ||
         state == v1::JOB_STATE_CANCELLED;
}

// The log line of a run starting (JobExecution::Run).
std::string RunLine(const std::string& job_id) {
  return "job running job_id=" + job_id + " ";
}

int Count(const std::string& text, const std::string& part) {
  int n = 0;
  for (size_t at = text.find(part); at != std::string::npos;
       at = text.find(part, at + 1)) {
    ++n;
  }
  return n;
}

struct Replica {
  std::string data_dir;
  std::string log;
  std::unique_ptr<ServerProcess> process;
  std::unique_ptr<S> stub;
};

class JobQueueTest : public ::testing::Test {
 protected:
  void SetUp() override {
    PostgresServer* server = PostgresEnvironment::server();
    ASSERT_NE(server, nullptr);
    static int databases = 0;
    const std::string database = absl::StrCat("queue_", databases++);
    ASSERT_TRUE(server->CreateDatabase(database).ok());
    uri_ = server->Uri(database);
    for (const char* name : {"a", "b", "c"}) {
      Replica& replica = replicas_.emplace_back();
      replica.data_dir = absl::StrCat(dir_.path(), "/", name);
      replica.log = absl::StrCat(dir_.path(), "/", name, ".log");
    }
  }

  void TearDown() override {
    for (Replica& replica : replicas_) {
      if (HasFailure()) {
        std::cerr << replica.data_dir << ":\n" << ReadFileOrEmpty(replica.log);
      }
      if (replica.process != nullptr) {
        EXPECT_EQ(replica.process->Stop(SIGTERM).value_or(-1), 0);
      }
    }
  }

  std::string BlobDir() const { return dir_.path() + "/blobs"; }

  // Small heartbeat and takeover times, so that a takeover takes ~1.5 s.
  std::vector<std::string> Flags(const std::string& role) const {
    return {"--threads=1",
            "--checkpoint-seconds=0.2",
            "--job-poll-seconds=0.1",
            "--job-heartbeat-seconds=0.2",
            "--job-takeover-seconds=1.5",
            absl::StrCat("--role=", role),
            absl::StrCat("--metadata=", uri_),
            absl::StrCat("--blob-dir=", BlobDir())};
  }

  void Start(int i, const std::string& role = "all") {
    Replica& replica = replicas_[i];
    absl::StatusOr<std::unique_ptr<ServerProcess>> process =
        ServerProcess::Start(BNN_SERVER_PATH, replica.data_dir, replica.log,
                             Flags(role));
    ASSERT_TRUE(process.ok()) << process.status();
    replica.process = *std::move(process);
    replica.stub =
        v1::BnnService::NewStub(NewClientChannel(replica.process->address()));
  }

  S& Stub(int i) { return *replicas_[i].stub; }
  std::string Log(int i) const { return ReadFileOrEmpty(replicas_[i].log); }

  // The replicas whose logs show a run of the job.
  std::vector<int> RunsOf(const std::string& job_id) const {
    std::vector<int> runs;
    for (int i = 0; i < static_cast<int>(replicas_.size()); ++i) {
      if (absl::StrContains(Log(i), RunLine(job_id))) runs.push_back(i);
    }
    return runs;
  }
  // RunsOf once some replica has logged the job's run line: a replica
  // records RUNNING in the store before it logs the line.
  std::vector<int> WaitForRunsOf(const std::string& job_id) const {
    const absl::Time deadline = absl::Now() + absl::Seconds(10);
    std::vector<int> runs = RunsOf(job_id);
    while (runs.empty() && absl::Now() < deadline) {
      absl::SleepFor(absl::Milliseconds(10));
      runs = RunsOf(job_id);
    }
    return runs;
  }

  // A SLANG job of 4 hidden units on 30 rows (3 steps an epoch).
  v1::StartTrainingRequest Training(int epochs, uint64_t seed = 1) const {
    v1::StartTrainingRequest train;
    train.set_dataset_id(dataset_id_);
    train.set_method("slang");
    train.set_epochs(epochs);
    train.set_seed(seed);
    train.mutable_model()->add_hidden_sizes(4);
    (*train.mutable_params())["batch_size"] = "10";
    return train;
  }

  std::string StartTraining(S& stub, const v1::StartTrainingRequest& r) {
    absl::StatusOr<std::string> id = testutil::StartTraining(stub, r);
    EXPECT_TRUE(id.ok()) << id.status();
    return id.value_or("");
  }

  static v1::Job WaitFor(S& stub, const std::string& job_id,
                         const std::function<bool(const v1::Job&)>& done) {
    absl::StatusOr<v1::Job> job = testutil::WaitForJob(stub, job_id, done);
    EXPECT_TRUE(job.ok()) << job.status();
    return job.value_or(v1::Job());
  }
  static v1::Job WaitForEnd(S& stub, const std::string& job_id) {
    return WaitFor(stub, job_id,
                   [](const v1::Job& j) { return IsFinal(j.state()); });
  }

  void Upload(S& stub) {
    absl::StatusOr<std::string> id = UploadCubic(stub, 30, "cubic");
    ASSERT_TRUE(id.ok()) << id.status();
    dataset_id_ = *id;
  }

  // The snapshot's bytes without its times (training seconds, creation).
  static std::string TimelessSnapshot(S& stub, const std::string& id) {
    grpc::ClientContext context;
    v1::ExportSnapshotRequest request;
    request.set_snapshot_id(id);
    auto reader = stub.ExportSnapshot(&context, request);
    std::string bytes;
    v1::SnapshotChunk chunk;
    while (reader->Read(&chunk)) bytes += chunk.data();
    EXPECT_TRUE(reader->Finish().ok());
    absl::StatusOr<Snapshot> snapshot = DecodeSnapshot(bytes);
    EXPECT_TRUE(snapshot.ok()) << snapshot.status();
    if (!snapshot.ok()) return "";
    snapshot->training.seconds = 0;
    snapshot->created_unix_ms = 0;
    return EncodeSnapshot(*snapshot).value_or("");
  }

  // The job's record as the shared store holds it.
  store::JobRecord Stored(const std::string& job_id) const {
    absl::StatusOr<std::unique_ptr<PostgresMetadataStore>> store =
        PostgresMetadataStore::Open(uri_);
    EXPECT_TRUE(store.ok()) << store.status();
    if (!store.ok()) return {};
    absl::StatusOr<store::JobRecord> job =
        (*store)->Read([&](MetadataReader& r) { return r.GetJob(job_id); });
    EXPECT_TRUE(job.ok()) << job.status();
    return job.value_or(store::JobRecord());
  }

  std::string ServerId(int i) const {
    std::string id = ReadFileOrEmpty(replicas_[i].data_dir + "/server-id");
    while (!id.empty() && (id.back() == '\n' || id.back() == ' ')) {
      id.pop_back();
    }
    return id;
  }

  // bnn-train FLAGS..., within 60 s.
  CommandResult Train(const std::vector<std::string>& flags) const {
    std::vector<std::string> argv = {BNN_TRAIN_PATH};
    argv.insert(argv.end(), flags.begin(), flags.end());
    absl::StatusOr<CommandResult> ran =
        RunCommand(argv, dir_.path(), absl::Seconds(60));
    EXPECT_TRUE(ran.ok()) << ran.status();
    return ran.value_or(CommandResult{});
  }

  TempDir dir_;
  std::string uri_;
  std::vector<Replica> replicas_;
  std::string dataset_id_;
};

TEST_F(JobQueueTest, EachJobRunsOnExactlyOneReplicaAndServeRunsNone) {
  Start(0, "all");
  Start(1, "train");
  Start(2, "serve");
  Upload(Stub(0));
  std::vector<std::string> jobs;
  for (int i = 0; i < 6; ++i) {
    jobs.push_back(StartTraining(Stub(i % 3), Training(2, i + 1)));
  }
  for (const std::string& job : jobs) {
    const v1::Job done = WaitForEnd(Stub(2), job);
    EXPECT_EQ(done.state(), v1::JOB_STATE_SUCCEEDED) << done.error();
  }
  for (const std::string& job : jobs) {
    const std::vector<int> runs = RunsOf(job);
    ASSERT_EQ(runs.size(), 1u) << job << " ran on several replicas";
    const int runner = runs[0];
    EXPECT_NE(runner, 2) << "the serve replica ran " << job;
    EXPECT_EQ(Count(Log(runner), RunLine(job)), 1) << job << " ran twice";
    // The claimant recorded is the process of that replica.
    const store::JobRecord record = Stored(job);
    EXPECT_EQ(record.runner(), ServerId(runner));
    EXPECT_TRUE(absl::StartsWith(record.claimant(), ServerId(runner) + "@"))
        << record.claimant();
    EXPECT_THAT(Log(runner), HasSubstr("claimant=" + record.claimant()));
  }
  EXPECT_THAT(Log(2), HasSubstr("role serve"));
}

TEST_F(JobQueueTest, AKilledReplicasJobIsTakenOverAndEndsAsAnUninterruptedRun) {
  Start(0);
  Start(1);
  Upload(Stub(0));
  const v1::StartTrainingRequest request = Training(30000 / kSanitizerSlowdown);
  const std::string job = StartTraining(Stub(0), request);
  const std::string checkpoint =
      absl::StrCat(BlobDir(), "/checkpoints/", job, ".ckpt");
  const absl::Time deadline = absl::Now() + absl::Seconds(30);
  while (!std::filesystem::exists(checkpoint) && absl::Now() < deadline) {
    absl::SleepFor(absl::Milliseconds(10));
  }
  absl::SleepFor(absl::Milliseconds(100));
  const std::vector<int> runs = WaitForRunsOf(job);
  ASSERT_EQ(runs.size(), 1u);
  const int killed = runs[0];
  const int other = 1 - killed;
  const v1::Job before = *testutil::GetJob(Stub(other), job);
  ASSERT_EQ(before.state(), v1::JOB_STATE_RUNNING)
      << "the job was too short to test";
  const absl::Time killed_at = absl::Now();
  replicas_[killed].process->Kill();
  replicas_[killed].process.reset();

  const v1::Job resumed = WaitForEnd(Stub(other), job);
  ASSERT_EQ(resumed.state(), v1::JOB_STATE_SUCCEEDED) << resumed.error();
  EXPECT_THAT(Log(other),
              HasSubstr("job resumes from its checkpoint job_id=" + job));
  EXPECT_EQ(Count(Log(other), RunLine(job)), 1);
  // Not before the heartbeat went stale.
  EXPECT_GE(absl::Now() - killed_at, absl::Seconds(1.2));
  EXPECT_TRUE(absl::StartsWith(Stored(job).claimant(), ServerId(other) + "@"));
  EXPECT_FALSE(std::filesystem::exists(checkpoint));

  const v1::Job whole =
      WaitForEnd(Stub(other), StartTraining(Stub(other), request));
  ASSERT_EQ(whole.state(), v1::JOB_STATE_SUCCEEDED) << whole.error();
  const std::string bytes =
      TimelessSnapshot(Stub(other), resumed.snapshot_id());
  ASSERT_FALSE(bytes.empty());
  EXPECT_TRUE(bytes == TimelessSnapshot(Stub(other), whole.snapshot_id()))
      << "the job taken over ends with another snapshot than a whole run";
}

TEST_F(JobQueueTest, CancelThroughOneReplicaStopsTheJobWhereItRuns) {
  Start(0, "serve");
  Start(1, "all");
  Upload(Stub(0));
  // Accepted by the serving replica, run by the other.
  const std::string job = StartTraining(Stub(0), Training(100000));
  WaitFor(Stub(0), job,
          [](const v1::Job& j) { return j.state() == v1::JOB_STATE_RUNNING; });
  EXPECT_EQ(WaitForRunsOf(job), std::vector<int>{1});
  {
    grpc::ClientContext context;
    v1::CancelJobRequest request;
    request.set_job_id(job);
    v1::Job response;
    ASSERT_TRUE(Stub(0).CancelJob(&context, request, &response).ok());
    EXPECT_EQ(response.state(), v1::JOB_STATE_CANCELLING);
  }
  const v1::Job cancelled = WaitForEnd(Stub(0), job);
  EXPECT_EQ(cancelled.state(), v1::JOB_STATE_CANCELLED);
  EXPECT_LT(cancelled.step(), cancelled.total_steps());
  EXPECT_THAT(Log(1),
              HasSubstr("job finished job_id=" + job + " state=cancelled"));
}

TEST_F(JobQueueTest, BnnTrainRunsAStoredJobLikeTheRunner) {
  // Only a serving replica: the job waits for bnn-train.
  Start(0, "serve");
  Upload(Stub(0));
  const v1::StartTrainingRequest request = Training(20);
  const std::string job = StartTraining(Stub(0), request);
  absl::SleepFor(absl::Milliseconds(300));
  ASSERT_EQ(testutil::GetJob(Stub(0), job)->state(), v1::JOB_STATE_QUEUED);
  const std::vector<std::string> flags = {
      "--job-id=" + job, "--data-dir=" + dir_.path() + "/t",
      "--metadata=" + uri_, "--blob-dir=" + BlobDir(), "--threads=1"};
  const CommandResult ran = Train(flags);
  EXPECT_EQ(ran.exit_code, 0) << ran.err;
  const v1::Job trained = *testutil::GetJob(Stub(0), job);
  ASSERT_EQ(trained.state(), v1::JOB_STATE_SUCCEEDED) << trained.error();
  EXPECT_TRUE(absl::StrContains(Stored(job).claimant(), "@"));
  // Again: the job is not claimable any more, and a final job is not
  // waited for (--claim-wait-seconds).
  const absl::Time again_at = absl::Now();
  const CommandResult again = Train(flags);
  EXPECT_EQ(again.exit_code, 1);
  EXPECT_THAT(again.err, HasSubstr("is SUCCEEDED"));
  EXPECT_LT(absl::Now() - again_at, absl::Seconds(10));

  // The same request through the in-process runner.
  Start(1, "all");
  const v1::Job whole = WaitForEnd(Stub(1), StartTraining(Stub(1), request));
  ASSERT_EQ(whole.state(), v1::JOB_STATE_SUCCEEDED) << whole.error();
  const std::string bytes = TimelessSnapshot(Stub(0), trained.snapshot_id());
  ASSERT_FALSE(bytes.empty());
  EXPECT_TRUE(bytes == TimelessSnapshot(Stub(0), whole.snapshot_id()));

  // Unknown job, missing flag: a one-line reason, non-zero.
  const CommandResult unknown = Train(
      {"--job-id=job-00000000000000ff", "--data-dir=" + dir_.path() + "/t",
       "--metadata=" + uri_, "--blob-dir=" + BlobDir()});
  EXPECT_EQ(unknown.exit_code, 1);
  EXPECT_THAT(unknown.err,
              HasSubstr("job_id 'job-00000000000000ff' not found"));
  const CommandResult no_id = Train({"--data-dir=" + dir_.path() + "/t"});
  EXPECT_EQ(no_id.exit_code, 1);
  EXPECT_THAT(no_id.err, HasSubstr("--job-id is required"));
}

// SIGTERM: bnn-train checkpoints, records the job INTERRUPTED and exits 3;
// a training replica resumes it to the snapshot of an uninterrupted run.
TEST_F(JobQueueTest, BnnTrainInterruptedBySigtermIsResumedByAReplica) {
  Start(0, "serve");
  Upload(Stub(0));
  // The job runs three times over (interrupted, resumed, whole); under a
  // sanitizer on a loaded machine its full length ran past the CTest
  // timeout.
  const v1::StartTrainingRequest request = Training(30000 / kSanitizerSlowdown);
  const std::string job = StartTraining(Stub(0), request);
  const std::string log = dir_.path() + "/train.log";
  absl::StatusOr<std::unique_ptr<bnn::testing::ChildProcess>> train =
      bnn::testing::ChildProcess::Start(
          {BNN_TRAIN_PATH, "--job-id=" + job,
           "--data-dir=" + dir_.path() + "/t", "--metadata=" + uri_,
           "--blob-dir=" + BlobDir(), "--threads=1", "--checkpoint-seconds=0.2",
           "--job-heartbeat-seconds=0.2", "--job-takeover-seconds=1.5"},
          log);
  ASSERT_TRUE(train.ok()) << train.status();
  WaitFor(Stub(0), job, [](const v1::Job& j) { return j.step() > 300; });
  (*train)->Signal(SIGTERM);
  EXPECT_EQ((*train)->Wait(absl::Seconds(30)).value_or(-1), 3)
      << ReadFileOrEmpty(log);
  EXPECT_THAT(ReadFileOrEmpty(log), HasSubstr("was interrupted"));
  const v1::Job interrupted = *testutil::GetJob(Stub(0), job);
  ASSERT_EQ(interrupted.state(), v1::JOB_STATE_INTERRUPTED);
  EXPECT_TRUE(std::filesystem::exists(
      absl::StrCat(BlobDir(), "/checkpoints/", job, ".ckpt")));

  Start(1, "train");
  const v1::Job resumed = WaitForEnd(Stub(1), job);
  ASSERT_EQ(resumed.state(), v1::JOB_STATE_SUCCEEDED) << resumed.error();
  EXPECT_THAT(Log(1),
              HasSubstr("job resumes from its checkpoint job_id=" + job));
  const v1::Job whole = WaitForEnd(Stub(1), StartTraining(Stub(1), request));
  ASSERT_EQ(whole.state(), v1::JOB_STATE_SUCCEEDED) << whole.error();
  const std::string bytes = TimelessSnapshot(Stub(1), resumed.snapshot_id());
  ASSERT_FALSE(bytes.empty());
  EXPECT_TRUE(bytes == TimelessSnapshot(Stub(1), whole.snapshot_id()));
}

// A pod that replaces a hard-killed one: the job is RUNNING under the dead
// claimant, its heartbeat fresh. bnn-train waits (tries again every
// --job-heartbeat-seconds) until the heartbeat is older than
// --job-takeover-seconds, then takes the job over and trains it; the wait
// is bounded by --claim-wait-seconds; SIGTERM stops it at once, exit 3.
TEST_F(JobQueueTest, BnnTrainWaitsForALiveClaimantsHeartbeatToGoStale) {
  Start(0, "serve");
  Upload(Stub(0));
  const std::string job = StartTraining(Stub(0), Training(20));
  absl::StatusOr<std::unique_ptr<PostgresMetadataStore>> store =
      PostgresMetadataStore::Open(uri_);
  ASSERT_TRUE(store.ok()) << store.status();
  absl::StatusOr<std::unique_ptr<JobStore>> jobs =
      JobStore::Open(store->get(), BlobDir() + "/checkpoints", "dead-pod");
  ASSERT_TRUE(jobs.ok()) << jobs.status();
  // Claims the job as the dead pod, with a heartbeat of now.
  auto claim_as_dead_pod = [&] {
    const absl::Time at = absl::Now();
    absl::StatusOr<store::JobRecord> claimed =
        (*jobs)->ClaimJob(job, "dead-pod@1", absl::Now() + absl::Hours(1));
    EXPECT_TRUE(claimed.ok()) << claimed.status();
    return at;
  };
  // The takeover time of the first two phases is long (30 s): bnn-train
  // must find the dead pod's heartbeat fresh, and under a sanitizer on a
  // loaded machine its start alone took more than 1.5 s.
  auto train_argv = [&](const std::string& wait, const std::string& takeover) {
    return std::vector<std::string>{BNN_TRAIN_PATH,
                                    "--job-id=" + job,
                                    "--data-dir=" + dir_.path() + "/pod",
                                    "--metadata=" + uri_,
                                    "--blob-dir=" + BlobDir(),
                                    "--threads=1",
                                    "--job-heartbeat-seconds=0.2",
                                    "--job-takeover-seconds=" + takeover,
                                    "--claim-wait-seconds=" + wait};
  };

  // SIGTERM while waiting: exit 3 at once, the job untouched.
  claim_as_dead_pod();
  const std::string log = dir_.path() + "/wait.log";
  absl::StatusOr<std::unique_ptr<bnn::testing::ChildProcess>> waiting =
      bnn::testing::ChildProcess::Start(train_argv("60", "30"), log);
  ASSERT_TRUE(waiting.ok()) << waiting.status();
  const absl::Time deadline = absl::Now() + absl::Seconds(20);
  while (!absl::StrContains(ReadFileOrEmpty(log), "waiting until") &&
         absl::Now() < deadline) {
    absl::SleepFor(absl::Milliseconds(20));
  }
  ASSERT_THAT(ReadFileOrEmpty(log), HasSubstr("is RUNNING on dead-pod@1"));
  const absl::Time signalled = absl::Now();
  (*waiting)->Signal(SIGTERM);
  EXPECT_EQ((*waiting)->Wait(absl::Seconds(10)).value_or(-1), 3)
      << ReadFileOrEmpty(log);
  EXPECT_LT(absl::Now() - signalled, absl::Seconds(1));
  EXPECT_THAT(ReadFileOrEmpty(log), HasSubstr("was not claimed"));
  EXPECT_EQ(Stored(job).claimant(), "dead-pod@1");
  EXPECT_EQ(Stored(job).state(), store::JobRecord::RUNNING);

  // A wait shorter than the takeover time ends first: exit 1, naming the
  // claimant and the flag, not before the bound.
  const absl::Time short_claim = claim_as_dead_pod();
  const CommandResult gave_up = Train(train_argv("0.5", "30"));
  EXPECT_EQ(gave_up.exit_code, 1) << gave_up.err;
  EXPECT_THAT(gave_up.err, HasSubstr("is RUNNING on dead-pod@1"));
  EXPECT_THAT(gave_up.err, HasSubstr("--claim-wait-seconds"));
  EXPECT_GE(absl::Now() - short_claim, absl::Seconds(0.5));
  EXPECT_EQ(Stored(job).claimant(), "dead-pod@1");

  // Long enough: waits until the heartbeat is stale, then trains the job.
  const absl::Time claimed_at = claim_as_dead_pod();
  const CommandResult ran = Train(train_argv("30", "1.5"));
  EXPECT_EQ(ran.exit_code, 0) << ran.err;
  EXPECT_GE(absl::Now() - claimed_at, absl::Seconds(1.5));
  const v1::Job trained = *testutil::GetJob(Stub(0), job);
  EXPECT_EQ(trained.state(), v1::JOB_STATE_SUCCEEDED) << trained.error();
  EXPECT_NE(Stored(job).claimant(), "dead-pod@1");
}

TEST_F(JobQueueTest, BnnTrainRunsAStoredJobOfTheSqliteStore) {
  const std::string data_dir = dir_.path() + "/sqlite";
  const std::string log = dir_.path() + "/sqlite.log";
  auto start = [&](const std::string& role) {
    absl::StatusOr<std::unique_ptr<ServerProcess>> process =
        ServerProcess::Start(BNN_SERVER_PATH, data_dir, log,
                             {"--threads=1", "--role=" + role});
    EXPECT_TRUE(process.ok()) << process.status();
    return process.ok() ? *std::move(process) : nullptr;
  };
  std::unique_ptr<ServerProcess> server = start("serve");
  ASSERT_NE(server, nullptr);
  auto stub = v1::BnnService::NewStub(NewClientChannel(server->address()));
  Upload(*stub);
  const v1::StartTrainingRequest request = Training(20);
  const std::string job = StartTraining(*stub, request);
  ASSERT_EQ(server->Stop(SIGTERM).value_or(-1), 0);

  // The server's data directory, the server stopped.
  const CommandResult ran =
      Train({"--job-id=" + job, "--data-dir=" + data_dir, "--threads=1"});
  EXPECT_EQ(ran.exit_code, 0) << ran.err;

  server = start("all");
  ASSERT_NE(server, nullptr);
  stub = v1::BnnService::NewStub(NewClientChannel(server->address()));
  const v1::Job trained = *testutil::GetJob(*stub, job);
  ASSERT_EQ(trained.state(), v1::JOB_STATE_SUCCEEDED) << trained.error();
  const v1::Job whole = WaitForEnd(*stub, StartTraining(*stub, request));
  ASSERT_EQ(whole.state(), v1::JOB_STATE_SUCCEEDED) << whole.error();
  const std::string bytes = TimelessSnapshot(*stub, trained.snapshot_id());
  ASSERT_FALSE(bytes.empty());
  EXPECT_TRUE(bytes == TimelessSnapshot(*stub, whole.snapshot_id()));
  EXPECT_THAT(ReadFileOrEmpty(log), Not(HasSubstr(RunLine(job))));
  EXPECT_EQ(server->Stop(SIGTERM).value_or(-1), 0);
}

const ::testing::Environment* const kPostgres =
    ::testing::AddGlobalTestEnvironment(new PostgresEnvironment);

}  // namespace
}  // namespace bnn::server
