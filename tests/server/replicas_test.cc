// Two real bnn-server processes sharing one PostgreSQL metadata store (a
// real server, tests/test_util/postgres_server.h, one database per test)
// and one blob directory, each with a data directory of its own, as
// replicas behind a load balancer: what one is given, the other serves; a
// publish or alias move on one is what the other's next request resolves;
// a job runs on the one replica that claimed it, untouched by the other's
// restart, and a cancel through the other stops it (the queue itself:
// job_queue_test.cc).
#include <functional>
#include <memory>
#include <signal.h>
#include <string>
#include <vector>

#include <absl/strings/match.h>
#include <absl/strings/str_cat.h>
#include <absl/time/clock.h>
#include <gmock/gmock.h>
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>

#include "bnn/v1/bnn_service.grpc.pb.h"

#include "tests/server/server_binary.h"
#include "tests/server/server_test_util.h"
#include "tests/test_util/postgres_server.h"

namespace bnn::server {
namespace {

using ::bnn::server::testutil::NewClientChannel;
using ::bnn::server::testutil::TempDir;
using ::bnn::server::testutil::UploadCubic;
using ::bnn::testing::CommandResult;
using ::bnn::testing::PostgresEnvironment;
using ::bnn::testing::PostgresServer;
using ::bnn::testing::RunCommand;
using ::bnn::testing::ServerProcess;
using ::testing::HasSubstr;
using ::testing::Not;
using S = v1::BnnService::Stub;

// One replica: its process, its data directory and a client.
struct Replica {
  std::string data_dir;
  std::string log;
  std::unique_ptr<ServerProcess> process;
  std::unique_ptr<S> stub;
};

class ReplicasTest : public ::testing::Test {
 protected:
  void SetUp() override {
    PostgresServer* server = PostgresEnvironment::server();
    ASSERT_NE(server, nullptr);
    static int databases = 0;
    const std::string database = absl::StrCat("replicas_", databases++);
    ASSERT_TRUE(server->CreateDatabase(database).ok());
    uri_ = server->Uri(database);
    for (const char* name : {"a", "b"}) {
      Replica& replica = replicas_.emplace_back();
      replica.data_dir = absl::StrCat(dir_.path(), "/", name);
      replica.log = absl::StrCat(dir_.path(), "/", name, ".log");
    }
  }

  void TearDown() override {
    for (Replica& replica : replicas_) {
      if (HasFailure() && replica.process != nullptr) {
        std::cerr << replica.data_dir << ":\n" << replica.process->Log();
      }
      if (replica.process != nullptr) {
        EXPECT_EQ(replica.process->Stop(SIGTERM).value_or(-1), 0);
      }
    }
  }

  std::vector<std::string> Flags() const {
    return {"--threads=1", "--checkpoint-seconds=0.2",
            absl::StrCat("--metadata=", uri_),
            absl::StrCat("--blob-dir=", dir_.path(), "/blobs")};
  }

  void Start(int i) {
    Replica& replica = replicas_[i];
    absl::StatusOr<std::unique_ptr<ServerProcess>> process =
        ServerProcess::Start(BNN_SERVER_PATH, replica.data_dir, replica.log,
                             Flags());
    ASSERT_TRUE(process.ok()) << process.status();
    replica.process = *std::move(process);
    replica.stub =
        v1::BnnService::NewStub(NewClientChannel(replica.process->address()));
  }

  S& A() { return *replicas_[0].stub; }
  S& B() { return *replicas_[1].stub; }

  template <typename Request, typename Response>
  static grpc::Status Call(S& stub,
                           grpc::Status (S::*rpc)(grpc::ClientContext*,
                                                  const Request&, Response*),
                           const Request& request, Response* response) {
    grpc::ClientContext context;
    context.set_deadline(absl::ToChronoTime(absl::Now() + absl::Seconds(30)));
    return (stub.*rpc)(&context, request, response);
  }

  // A SLANG job of 4 hidden units on `dataset_id`, started on `stub`,
  // published under `model` when it succeeds.
  static std::string StartTraining(S& stub, const std::string& dataset_id,
                                   uint64_t seed, const std::string& model,
                                   int epochs = 2) {
    v1::StartTrainingRequest train;
    train.set_dataset_id(dataset_id);
    train.set_method("slang");
    train.set_epochs(epochs);
    train.set_seed(seed);
    train.mutable_model()->add_hidden_sizes(4);
    (*train.mutable_params())["batch_size"] = "10";
    if (!model.empty()) {
      train.set_model_name(model);
      train.set_publish(true);
    }
    absl::StatusOr<std::string> job_id = testutil::StartTraining(stub, train);
    EXPECT_TRUE(job_id.ok()) << job_id.status();
    return job_id.value_or("");
  }

  static v1::Job WaitFor(S& stub, const std::string& job_id,
                         const std::function<bool(const v1::Job&)>& done) {
    absl::StatusOr<v1::Job> job = testutil::WaitForJob(stub, job_id, done);
    EXPECT_TRUE(job.ok()) << job.status();
    return job.value_or(v1::Job());
  }

  // Seeded Predict of three rows of `model` (a reference) or snapshot.
  static std::vector<double> Predict(S& stub, const std::string& model,
                                     const std::string& snapshot_id = "") {
    v1::PredictRequest request;
    request.set_num_samples(8);
    request.set_seed(7);
    for (double x : {-1.0, 0.25, 2.0}) request.add_rows()->add_x(x);
    if (snapshot_id.empty()) {
      request.set_model(model);
    } else {
      request.set_snapshot_id(snapshot_id);
    }
    v1::PredictResponse response;
    const grpc::Status status = Call(stub, &S::Predict, request, &response);
    EXPECT_TRUE(status.ok())
        << model << snapshot_id << ": " << status.error_message();
    std::vector<double> out;
    for (const v1::RowPrediction& row : response.predictions()) {
      out.push_back(row.mean());
      out.push_back(row.variance());
    }
    return out;
  }

  static grpc::Status SetAlias(S& stub, const std::string& alias,
                               int64_t version) {
    v1::SetAliasRequest request;
    request.set_name("m");
    request.set_alias(alias);
    request.set_version(version);
    v1::ModelInfo response;
    return Call(stub, &S::SetAlias, request, &response);
  }

  TempDir dir_;
  std::string uri_;
  std::vector<Replica> replicas_;
};

TEST_F(ReplicasTest, WhatOneReplicaIsGivenTheOtherServes) {
  Start(0);
  Start(1);
  // Uploaded on A: B has it, and trains on it.
  absl::StatusOr<std::string> dataset_id = UploadCubic(A(), 40, "cubic");
  ASSERT_TRUE(dataset_id.ok()) << dataset_id.status();
  {
    v1::GetDatasetRequest request;
    request.set_dataset_id("cubic");
    v1::DatasetInfo info;
    const grpc::Status status = Call(B(), &S::GetDataset, request, &info);
    ASSERT_TRUE(status.ok()) << status.error_message();
    EXPECT_EQ(info.dataset_id(), *dataset_id);
    EXPECT_EQ(info.num_rows(), 40);
  }
  const std::string job1 = StartTraining(B(), *dataset_id, 1, "m");
  // B's job, seen finishing through A.
  const v1::Job done1 = WaitFor(A(), job1, [](const v1::Job& j) {
    return j.state() == v1::JOB_STATE_SUCCEEDED ||
           j.state() == v1::JOB_STATE_FAILED;
  });
  ASSERT_EQ(done1.state(), v1::JOB_STATE_SUCCEEDED) << done1.error();
  const std::string job2 = StartTraining(A(), *dataset_id, 2, "m");
  const v1::Job done2 = WaitFor(B(), job2, [](const v1::Job& j) {
    return j.state() == v1::JOB_STATE_SUCCEEDED ||
           j.state() == v1::JOB_STATE_FAILED;
  });
  ASSERT_EQ(done2.state(), v1::JOB_STATE_SUCCEEDED) << done2.error();

  // Both replicas predict both versions alike (the blobs written by one
  // are read by the other).
  const std::vector<double> v1 = Predict(A(), "", done1.snapshot_id());
  const std::vector<double> v2 = Predict(B(), "", done2.snapshot_id());
  ASSERT_EQ(v1.size(), 6u);
  ASSERT_NE(v1, v2);
  EXPECT_EQ(Predict(B(), "", done1.snapshot_id()), v1);
  EXPECT_EQ(Predict(A(), "", done2.snapshot_id()), v2);
  EXPECT_EQ(Predict(A(), "m"), v2);
  EXPECT_EQ(Predict(B(), "m:1"), v1);

  // An alias moved on A is what B's next request resolves, every time
  // (after a Predict through B that could have cached the old target).
  for (int round = 0; round < 4; ++round) {
    const int64_t version = round % 2 + 1;
    ASSERT_TRUE(SetAlias(A(), "stable", version).ok());
    EXPECT_EQ(Predict(B(), "m@stable"), version == 1 ? v1 : v2)
        << "round " << round;
  }
  // And the other way round, with a publish.
  {
    v1::PublishModelRequest request;
    request.set_name("other");
    request.set_snapshot_id(done1.snapshot_id());
    v1::ModelVersion response;
    ASSERT_TRUE(Call(B(), &S::PublishModel, request, &response).ok());
  }
  EXPECT_EQ(Predict(A(), "other"), v1);
  {
    v1::GetModelRequest request;
    request.set_name("other");
    v1::ModelInfo model;
    ASSERT_TRUE(Call(A(), &S::GetModel, request, &model).ok());
    EXPECT_EQ(model.name(), "other");
  }
}

// A job runs on the one replica that claimed it (either: the store is the
// queue): the other replica's restart leaves it RUNNING (it is not that
// replica's to interrupt, and its heartbeat is fresh), and a cancel through
// the other replica stops it.
TEST_F(ReplicasTest, JobsStayWithTheirReplicaAndCancelThroughAnother) {
  Start(0);
  Start(1);
  absl::StatusOr<std::string> dataset_id = UploadCubic(A(), 40, "cubic");
  ASSERT_TRUE(dataset_id.ok()) << dataset_id.status();
  const std::string job = StartTraining(A(), *dataset_id, 3, "", 100000);
  WaitFor(B(), job,
          [](const v1::Job& j) { return j.state() == v1::JOB_STATE_RUNNING; });
  const std::string running = "job running job_id=" + job;
  const bool on_a = absl::StrContains(replicas_[0].process->Log(), running);
  ASSERT_NE(on_a, absl::StrContains(replicas_[1].process->Log(), running))
      << "the job must run on exactly one replica";
  const int runner = on_a ? 0 : 1;
  const int other = 1 - runner;
  // The other restarts: the job is not its to mark INTERRUPTED or run.
  ASSERT_EQ(replicas_[other].process->Stop(SIGTERM).value_or(-1), 0);
  replicas_[other].process.reset();
  Start(other);
  S& runner_stub = *replicas_[runner].stub;
  S& other_stub = *replicas_[other].stub;
  absl::StatusOr<v1::Job> seen = testutil::GetJob(other_stub, job);
  ASSERT_TRUE(seen.ok()) << seen.status();
  EXPECT_EQ(seen->state(), v1::JOB_STATE_RUNNING);
  EXPECT_THAT(replicas_[other].process->Log(), Not(HasSubstr(running)));
  // Cancelled through the other: the runner stops it.
  {
    v1::CancelJobRequest request;
    request.set_job_id(job);
    v1::Job response;
    ASSERT_TRUE(Call(other_stub, &S::CancelJob, request, &response).ok());
    EXPECT_EQ(response.state(), v1::JOB_STATE_CANCELLING);
  }
  const v1::Job cancelled = WaitFor(runner_stub, job, [](const v1::Job& j) {
    return j.state() == v1::JOB_STATE_CANCELLED ||
           j.state() == v1::JOB_STATE_SUCCEEDED ||
           j.state() == v1::JOB_STATE_FAILED;
  });
  EXPECT_EQ(cancelled.state(), v1::JOB_STATE_CANCELLED);
  EXPECT_LT(cancelled.step(), cancelled.total_steps());
  EXPECT_THAT(replicas_[other].process->Log(), Not(HasSubstr(running)));
}

TEST_F(ReplicasTest, PostgresNeedsABlobDirAndAPostgresUri) {
  const std::vector<std::string> base =
      ServerProcess::Command(BNN_SERVER_PATH, dir_.path() + "/c");
  std::vector<std::string> argv = base;
  argv.push_back(absl::StrCat("--metadata=", uri_));
  absl::StatusOr<CommandResult> ran =
      RunCommand(argv, dir_.path(), absl::Seconds(30));
  ASSERT_TRUE(ran.ok()) << ran.status();
  EXPECT_NE(ran->exit_code, 0);
  EXPECT_THAT(ran->err, HasSubstr("--blob-dir is required"));
  argv = base;
  argv.push_back("--metadata=mysql://bnn:hunter2@db/bnn");
  ran = RunCommand(argv, dir_.path(), absl::Seconds(30));
  ASSERT_TRUE(ran.ok()) << ran.status();
  EXPECT_NE(ran->exit_code, 0);
  EXPECT_THAT(ran->err, HasSubstr("--metadata must be empty"));
  EXPECT_THAT(ran->err, Not(HasSubstr("hunter2")));
}

const ::testing::Environment* const kPostgres =
    ::testing::AddGlobalTestEnvironment(new PostgresEnvironment);

}  // namespace
}  // namespace bnn::server
