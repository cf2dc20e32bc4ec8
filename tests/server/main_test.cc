// The bnn-server binary: flags, the printed address, health and reflection
// services, and clean shutdown on signals.
#include <cmath>
#include <functional>
#include <memory>
#include <signal.h>
#include <stdlib.h>
#include <string>

#include <absl/time/clock.h>
#include <gmock/gmock.h>
#include <grpcpp/generic/generic_stub.h>
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>

#include "bnn/v1/bnn_service.grpc.pb.h"

#include "tests/server/server_binary.h"
#include "tests/server/server_test_util.h"

namespace bnn::server {
namespace {

using ::bnn::server::testutil::NewClientChannel;
using ::bnn::server::testutil::RawUnaryCall;
using ::bnn::server::testutil::ReadFileOrEmpty;
using ::bnn::server::testutil::TempDir;
using ::bnn::testing::ChildProcess;
using ::bnn::testing::ServerProcess;
using ::testing::HasSubstr;
using ::testing::MatchesRegex;

class BnnServerMainTest : public ::testing::Test {
 protected:
  // Starts bnn-server on a free port and returns its address.
  std::string Start(std::vector<std::string> extra_flags = {}) {
    absl::StatusOr<std::unique_ptr<ServerProcess>> server =
        ServerProcess::Start(BNN_SERVER_PATH, dir_.path() + "/data", log_path(),
                             extra_flags);
    EXPECT_TRUE(server.ok()) << server.status();
    if (!server.ok()) return "";
    server_ = *std::move(server);
    channel_ = NewClientChannel(server_->address());
    stub_ = v1::BnnService::NewStub(channel_);
    return server_->address();
  }
  // Sends `signal_number` and returns the exit code.
  int Stop(int signal_number) {
    const absl::StatusOr<int> code = server_->Stop(signal_number);
    EXPECT_TRUE(code.ok()) << code.status() << "\n" << Log();
    return code.value_or(-1);
  }
  // Uploads 20 rows of the cubic data set; returns the dataset id.
  std::string UploadCubic() {
    absl::StatusOr<std::string> id = testutil::UploadCubic(*stub_, 20);
    EXPECT_TRUE(id.ok()) << id.status();
    return id.value_or("");
  }
  // Starts a SLANG job; returns its id.
  std::string StartTraining(const std::string& dataset_id, int epochs) {
    v1::StartTrainingRequest train;
    train.set_dataset_id(dataset_id);
    train.set_method("slang");
    train.set_epochs(epochs);
    absl::StatusOr<std::string> id = testutil::StartTraining(*stub_, train);
    EXPECT_TRUE(id.ok()) << id.status();
    return id.value_or("");
  }
  // Polls the job until `done` holds (at most 10 s) and returns it.
  v1::Job WaitForJob(const std::string& job_id,
                     const std::function<bool(const v1::Job&)>& done) {
    absl::StatusOr<v1::Job> job =
        testutil::WaitForJob(*stub_, job_id, done, absl::Seconds(10));
    EXPECT_TRUE(job.ok()) << job.status();
    return job.value_or(v1::Job());
  }
  std::string log_path() const { return dir_.path() + "/server.log"; }
  std::string Log() const { return ReadFileOrEmpty(log_path()); }

  TempDir dir_;
  std::unique_ptr<ServerProcess> server_;
  std::shared_ptr<grpc::Channel> channel_;
  std::unique_ptr<v1::BnnService::Stub> stub_;
};

std::string ToBytes(const grpc::ByteBuffer& buffer) {
  std::vector<grpc::Slice> slices;
  std::string bytes;
  if (!buffer.Dump(&slices).ok()) return bytes;
  for (const grpc::Slice& s : slices) {
    bytes.append(reinterpret_cast<const char*>(s.begin()), s.size());
  }
  return bytes;
}

TEST_F(BnnServerMainTest, ServesAndStopsCleanlyOnSigterm) {
  const std::string address = Start();
  EXPECT_THAT(address, MatchesRegex("127\\.0\\.0\\.1:[1-9][0-9]*"));

  grpc::ClientContext context;
  v1::ListMethodsResponse methods;
  ASSERT_TRUE(stub_->ListMethods(&context, {}, &methods).ok());
  EXPECT_GE(methods.methods_size(), 1);

  // grpc.health.v1.Health/Check for the server as a whole ("" service):
  // HealthCheckResponse{status: SERVING} is the two bytes 08 01.
  EXPECT_EQ(*RawUnaryCall(channel_, "/grpc.health.v1.Health/Check", ""),
            std::string("\x08\x01", 2));

  EXPECT_EQ(Stop(SIGTERM), 0);
  EXPECT_THAT(Log(), HasSubstr("bnn-server stopped"));
}

TEST_F(BnnServerMainTest, RegistersReflection) {
  Start();
  grpc::GenericStub stub(channel_);
  grpc::CompletionQueue cq;
  grpc::ClientContext context;
  auto call = stub.PrepareCall(
      &context,
      "/grpc.reflection.v1alpha.ServerReflection/ServerReflectionInfo", &cq);
  void* tag = nullptr;
  bool ok = false;
  call->StartCall(reinterpret_cast<void*>(1));
  ASSERT_TRUE(cq.Next(&tag, &ok) && ok);
  // ServerReflectionRequest{list_services: ""}: field 7, empty string.
  grpc::Slice request(std::string("\x3a\x00", 2));
  call->Write(grpc::ByteBuffer(&request, 1), reinterpret_cast<void*>(2));
  ASSERT_TRUE(cq.Next(&tag, &ok) && ok);
  grpc::ByteBuffer response;
  call->Read(&response, reinterpret_cast<void*>(3));
  ASSERT_TRUE(cq.Next(&tag, &ok) && ok);
  const std::string bytes = ToBytes(response);
  EXPECT_THAT(bytes, HasSubstr("bnn.v1.BnnService"));
  EXPECT_THAT(bytes, HasSubstr("grpc.health.v1.Health"));
  context.TryCancel();
  grpc::Status status;
  call->Finish(&status, reinterpret_cast<void*>(4));
  ASSERT_TRUE(cq.Next(&tag, &ok));
  cq.Shutdown();
  while (cq.Next(&tag, &ok)) {
  }
}

TEST_F(BnnServerMainTest, SigintDuringTrainingInterruptsTheJobWhichResumes) {
  Start();
  const std::string dataset_id = UploadCubic();
  const std::string job_id = StartTraining(dataset_id, 1000000);
  v1::GetJobRequest get_job;
  get_job.set_job_id(job_id);
  const v1::Job job =
      WaitForJob(job_id, [](const v1::Job& job) { return job.step() > 0; });
  ASSERT_EQ(job.state(), v1::JOB_STATE_RUNNING);

  // The running job checkpoints and stops, so the server exits promptly
  // (well within the 5 s grace period).
  const absl::Time stopping = absl::Now();
  EXPECT_EQ(Stop(SIGINT), 0);
  EXPECT_LT(absl::Now() - stopping, absl::Seconds(4));
  Start();
  grpc::ClientContext context;
  v1::Job restarted;
  ASSERT_TRUE(stub_->GetJob(&context, get_job, &restarted).ok());
  // Interrupted, and resumed from where it stopped (not from step 0).
  EXPECT_TRUE(restarted.state() == v1::JOB_STATE_INTERRUPTED ||
              restarted.state() == v1::JOB_STATE_RUNNING)
      << restarted.ShortDebugString();
  EXPECT_EQ(restarted.error(), "");
  EXPECT_GE(restarted.step(), job.step());
  // The dataset survived the restart.
  grpc::ClientContext dataset_context;
  v1::GetDatasetRequest get_dataset;
  get_dataset.set_dataset_id(dataset_id);
  v1::DatasetInfo info;
  ASSERT_TRUE(stub_->GetDataset(&dataset_context, get_dataset, &info).ok());
  EXPECT_EQ(info.num_rows(), 20);
  EXPECT_EQ(Stop(SIGTERM), 0);
}

TEST_F(BnnServerMainTest, PredictsWithTheComputeFlags) {
  Start({"--predict-precision=float32", "--compute-workers=1",
         "--predict-cache-bytes=0"});
  const std::string job_id = StartTraining(UploadCubic(), 2);
  const v1::Job job = WaitForJob(job_id, [](const v1::Job& job) {
    return job.state() == v1::JOB_STATE_SUCCEEDED;
  });
  ASSERT_EQ(job.state(), v1::JOB_STATE_SUCCEEDED) << job.error();
  v1::PredictRequest request;
  request.set_snapshot_id(job.snapshot_id());
  request.add_rows()->add_x(1.0);
  v1::PredictResponse response;
  grpc::ClientContext context;
  const grpc::Status status = stub_->Predict(&context, request, &response);
  ASSERT_TRUE(status.ok()) << status.error_message();
  EXPECT_TRUE(std::isfinite(response.predictions(0).mean()));
  EXPECT_EQ(Stop(SIGTERM), 0);
}

TEST_F(BnnServerMainTest, BadFlagsExitWithAMessage) {
  for (const auto& [argv, message] :
       std::vector<std::pair<std::vector<std::string>, std::string>>{
           {{BNN_SERVER_PATH}, "--data-dir is required"},
           {{BNN_SERVER_PATH, "--data-dir", dir_.path(),
             "--max_predict_samples=0"},
            "--max-predict-samples = 0 must be >= 1"},
           {{BNN_SERVER_PATH, "--data-dir", dir_.path(), "--listen",
             "nonsense"},
            "'nonsense' is not host:port"},
           {{BNN_SERVER_PATH, "--data-dir", dir_.path(), "--compute-workers=0"},
            "--compute-workers = 0 must be >= 1"},
           {{BNN_SERVER_PATH, "--data-dir", dir_.path(),
             "--predict-precision=float16"},
            "--predict-precision = 'float16' must be one of: float64, "
            "float32"},
           {{BNN_SERVER_PATH, "--data-dir", dir_.path(),
             "--predict-cache-bytes=-1"},
            "--predict-cache-bytes = -1 must be >= 0"},
           {{BNN_SERVER_PATH, "--data-dir", dir_.path(),
             "--max-snapshot-bytes=4294967296"},
            "--max-snapshot-bytes = 4294967296 must be in [1, 2147483648]"},
           {{BNN_SERVER_PATH, "--data-dir", dir_.path(), "--job-runner=pods"},
            "--job-runner = 'pods' must be one of: in-process, kubernetes"},
           {{BNN_SERVER_PATH, "--data-dir", dir_.path(),
             "--job-runner=kubernetes", "--kubernetes-option=image=bnn:1"},
            "--job-runner=kubernetes requires a shared store: a PostgreSQL "
            "--metadata"},
           {{BNN_SERVER_PATH, "--data-dir", dir_.path(),
             "--job-runner=kubernetes",
             "--metadata=postgres://bnn@127.0.0.1:1/bnn",
             "--blob-dir=" + dir_.path() + "/blobs",
             "--kubernetes-option=image=bnn:1", "--kubernetes-option",
             "colour=blue"},
            "--kubernetes-option 'colour=blue': "},
           {{BNN_SERVER_PATH, "--data-dir", dir_.path(),
             "--job-runner=kubernetes",
             "--metadata=postgres://bnn@127.0.0.1:1/bnn",
             "--blob-dir=" + dir_.path() + "/blobs",
             "--kubernetes-config=" + dir_.path() + "/missing.json"},
            "--kubernetes-config: "},
           {{BNN_SERVER_PATH, "--data-dir", dir_.path(),
             "--kubernetes-option=image=bnn:1"},
            "--kubernetes-option applies only with --job-runner=kubernetes"}}) {
    auto child = ChildProcess::Start(argv, log_path());
    ASSERT_TRUE(child.ok()) << child.status();
    const absl::StatusOr<int> code = (*child)->Wait(absl::Seconds(15));
    ASSERT_TRUE(code.ok()) << code.status();
    EXPECT_EQ(*code, 1) << message;
    EXPECT_THAT(Log(), HasSubstr(message));
  }
}

}  // namespace
}  // namespace bnn::server
