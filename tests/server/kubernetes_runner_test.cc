// bnn-server --job-runner=kubernetes against real processes: a PostgreSQL
// server (tests/test_util/postgres_server.h, one database per test), the
// fake Kubernetes API server (tests/test_util/fake_k8s_api.py, one
// namespace per test) and bnn-train run as the Job's pod would run it. A
// StartTraining creates one schema-valid Job running `bnn-train
// --job-id=ID`; bnn-train trains the job to a snapshot the server predicts
// with; a Job the API server marks failed fails its job with the reason; a
// cancel deletes the Job and ends the job CANCELLED; a restart launches a
// QUEUED job that has no Job, and launches again idempotently; a job a
// serving replica queued is launched at the next poll, once.
#include <cmath>
#include <memory>
#include <signal.h>
#include <string>
#include <vector>

#include <absl/strings/ascii.h>
#include <absl/strings/match.h>
#include <absl/strings/str_cat.h>
#include <absl/strings/str_replace.h>
#include <absl/time/clock.h>
#include <gmock/gmock.h>
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "bnn/v1/bnn_service.grpc.pb.h"

#include "tests/server/server_binary.h"
#include "tests/server/server_test_util.h"
#include "tests/test_util/fake_k8s_api.h"
#include "tests/test_util/http_client.h"
#include "tests/test_util/postgres_server.h"

namespace bnn::server {
namespace {

using ::bnn::server::testutil::NewClientChannel;
using ::bnn::server::testutil::TempDir;
using ::bnn::testing::ChildProcess;
using ::bnn::testing::CommandResult;
using ::bnn::testing::FakeK8sApi;
using ::bnn::testing::PostgresEnvironment;
using ::bnn::testing::PostgresServer;
using ::bnn::testing::ReadFileOrEmpty;
using ::bnn::testing::RunCommand;
using ::bnn::testing::ServerProcess;
using ::testing::Contains;
using ::testing::HasSubstr;
using Json = nlohmann::json;
using S = v1::BnnService::Stub;

bool IsFinal(v1::JobState state) {
  return state == v1::JOB_STATE_SUCCEEDED || state == v1::JOB_STATE_FAILED ||
         state == v1::JOB_STATE_CANCELLED;
}

class KubernetesRunnerTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    fake_dir_ = new TempDir("fake_k8s");
    absl::StatusOr<std::unique_ptr<FakeK8sApi>> fake =
        FakeK8sApi::Start(fake_dir_->path());
    ASSERT_TRUE(fake.ok()) << fake.status();
    fake_ = fake->release();
  }
  static void TearDownTestSuite() {
    delete fake_;
    fake_ = nullptr;
    delete fake_dir_;
  }

  void SetUp() override {
    ASSERT_NE(fake_, nullptr);
    PostgresServer* postgres = PostgresEnvironment::server();
    ASSERT_NE(postgres, nullptr);
    std::string name =
        ::testing::UnitTest::GetInstance()->current_test_info()->name();
    absl::AsciiStrToLower(&name);
    namespace_ = name.substr(0, 63);
    ASSERT_TRUE(postgres->CreateDatabase(namespace_).ok());
    uri_ = postgres->Uri(namespace_);
  }
  void TearDown() override {
    if (HasFailure()) std::cerr << ReadFileOrEmpty(Log()) << fake_->Log();
    if (server_ != nullptr) {
      EXPECT_EQ(server_->Stop(SIGTERM).value_or(-1), 0);
    }
  }

  std::string BlobDir() const { return dir_.path() + "/blobs"; }
  std::string Log() const { return dir_.path() + "/server.log"; }

  // bnn-server on the shared store; `kubernetes`: with the fake as its
  // API server, otherwise a --role=serve server that queues jobs only.
  void Start(bool kubernetes = true) {
    if (server_ != nullptr) {
      ASSERT_EQ(server_->Stop(SIGTERM).value_or(-1), 0);
      server_.reset();
    }
    std::vector<std::string> flags = {
        "--threads=1", "--job-poll-seconds=0.1", "--metrics-listen=127.0.0.1:0",
        "--metadata=" + uri_, "--blob-dir=" + BlobDir()};
    if (kubernetes) {
      for (const std::string& flag : std::vector<std::string>{
               "--job-runner=kubernetes",
               "--kubernetes-option=api_server=" + fake_->api_url(),
               "--kubernetes-option=ca_file=" + fake_->ca_file(),
               "--kubernetes-option=token_file=" + fake_->token_file(),
               "--kubernetes-option=job_namespace=" + namespace_,
               std::string("--kubernetes-option=image=bnn-serve:test"),
               std::string("--kubernetes-option=status_poll_interval=1")}) {
        flags.push_back(flag);
      }
    } else {
      flags.push_back("--role=serve");
    }
    absl::StatusOr<std::unique_ptr<ServerProcess>> process =
        ServerProcess::Start(BNN_SERVER_PATH, dir_.path() + "/data", Log(),
                             flags);
    ASSERT_TRUE(process.ok()) << process.status();
    server_ = *std::move(process);
    stub_ = v1::BnnService::NewStub(NewClientChannel(server_->address()));
  }

  std::string Upload() {
    absl::StatusOr<std::string> id = testutil::UploadCubic(*stub_, 30, "cubic");
    EXPECT_TRUE(id.ok()) << id.status();
    return id.value_or("");
  }
  // A SLANG job of 4 hidden units on 30 rows (3 steps an epoch).
  std::string StartTraining(const std::string& dataset_id, int epochs) {
    v1::StartTrainingRequest train;
    train.set_dataset_id(dataset_id);
    train.set_method("slang");
    train.set_epochs(epochs);
    train.set_seed(1);
    train.mutable_model()->add_hidden_sizes(4);
    (*train.mutable_params())["batch_size"] = "10";
    absl::StatusOr<std::string> id = testutil::StartTraining(*stub_, train);
    EXPECT_TRUE(id.ok()) << id.status();
    return id.value_or("");
  }
  v1::Job Get(const std::string& job_id) {
    absl::StatusOr<v1::Job> job = testutil::GetJob(*stub_, job_id);
    EXPECT_TRUE(job.ok()) << job.status();
    return job.value_or(v1::Job());
  }
  v1::Job WaitForEnd(const std::string& job_id) {
    absl::StatusOr<v1::Job> job = testutil::WaitForJob(
        *stub_, job_id, [](const v1::Job& j) { return IsFinal(j.state()); });
    EXPECT_TRUE(job.ok()) << job.status();
    return job.value_or(v1::Job());
  }

  // The API requests of this test's namespace with `method`.
  std::vector<Json> Requests(const std::string& method) {
    absl::StatusOr<std::string> text = fake_->Requests();
    EXPECT_TRUE(text.ok()) << text.status();
    std::vector<Json> found;
    if (!text.ok()) return found;
    const std::string prefix =
        absl::StrCat("/apis/batch/v1/namespaces/", namespace_, "/jobs");
    for (const Json& request : Json::parse(*text)) {
      if (request["method"] == method &&
          request["path"].get<std::string>().rfind(prefix, 0) == 0) {
        found.push_back(request);
      }
    }
    return found;
  }
  // The Jobs the fake holds in this test's namespace.
  std::vector<Json> Jobs() {
    absl::StatusOr<std::string> text = fake_->Jobs();
    EXPECT_TRUE(text.ok()) << text.status();
    std::vector<Json> found;
    if (!text.ok()) return found;
    for (const Json& job : Json::parse(*text)) {
      if (job["metadata"]["namespace"] == namespace_) found.push_back(job);
    }
    return found;
  }
  // The value of bnn_kubernetes_job_launches_total{result="RESULT"} on
  // /metrics (0 when absent).
  double Launches(const std::string& result) {
    const std::string& url = server_->metrics_url();
    const std::string host_port = url.substr(7, url.find("/metrics") - 7);
    absl::StatusOr<bnn::testing::HttpResponse> response =
        bnn::testing::HttpGet(host_port, "/metrics");
    EXPECT_TRUE(response.ok()) << response.status();
    if (!response.ok()) return -1;
    const std::string line = absl::StrCat(
        "bnn_kubernetes_job_launches_total{result=\"", result, "\"} ");
    const size_t at = response->body.find(line);
    if (at == std::string::npos) return 0;
    return std::stod(response->body.substr(at + line.size()));
  }
  static std::string JobName(const std::string& job_id) {
    return "bnn-train-" + job_id;
  }

  // bnn-train's command line for `job_id`, as the pod runs it.
  std::vector<std::string> TrainArgv(const std::string& job_id) const {
    return {BNN_TRAIN_PATH,
            "--job-id=" + job_id,
            "--data-dir=" + dir_.path() + "/pod",
            "--metadata=" + uri_,
            "--blob-dir=" + BlobDir(),
            "--threads=1",
            "--job-heartbeat-seconds=0.2",
            "--job-takeover-seconds=1.5"};
  }

  static TempDir* fake_dir_;
  static FakeK8sApi* fake_;
  TempDir dir_;
  std::string namespace_;
  std::string uri_;
  std::unique_ptr<ServerProcess> server_;
  std::unique_ptr<S> stub_;
};

TempDir* KubernetesRunnerTest::fake_dir_ = nullptr;
FakeK8sApi* KubernetesRunnerTest::fake_ = nullptr;

TEST_F(KubernetesRunnerTest, AJobRunsAsAKubernetesJobOfBnnTrain) {
  Start();
  const std::string job = StartTraining(Upload(), 20);
  // Created at once, schema-checked by the fake (201), strictly.
  const std::vector<Json> posts = Requests("POST");
  ASSERT_EQ(posts.size(), 1u) << fake_->Log();
  EXPECT_EQ(posts[0]["code"], 201) << posts[0].dump();
  EXPECT_EQ(posts[0]["query"]["fieldValidation"], "Strict") << posts[0].dump();
  const Json body = Json::parse(posts[0]["body"].get<std::string>());
  EXPECT_EQ(body["metadata"]["name"], JobName(job));
  const Json& container = body["spec"]["template"]["spec"]["containers"][0];
  EXPECT_EQ(container["command"], Json::array({"bnn-train"}));
  EXPECT_THAT(container["args"].get<std::vector<std::string>>(),
              Contains("--job-id=" + job));
  EXPECT_EQ(Get(job).state(), v1::JOB_STATE_QUEUED);
  EXPECT_THAT(ReadFileOrEmpty(Log()),
              HasSubstr("kubernetes job launched job_id=" + job));

  // The pod: bnn-train claims and trains the job against the shared store,
  // run with the Job's own arguments (what Kubernetes would expand, and
  // the pod's mounts, mapped to this test's).
  std::vector<std::string> argv = {BNN_TRAIN_PATH};
  for (std::string arg : container["args"].get<std::vector<std::string>>()) {
    absl::StrReplaceAll({{"$(BNN_METADATA)", uri_},
                         {"/var/lib/bnn/blobs", BlobDir()},
                         {"/tmp/", dir_.path() + "/pod-tmp/"}},
                        &arg);
    argv.push_back(arg);
  }
  absl::StatusOr<CommandResult> ran =
      RunCommand(argv, dir_.path(), absl::Seconds(60));
  ASSERT_TRUE(ran.ok()) << ran.status();
  EXPECT_EQ(ran->exit_code, 0) << ran->err;
  ASSERT_TRUE(fake_
                  ->SetJobStatus(namespace_, JobName(job),
                                 R"({"succeeded": 1, "conditions": [)"
                                 R"({"type": "Complete", "status": "True"}]})")
                  .ok());
  const v1::Job trained = WaitForEnd(job);
  ASSERT_EQ(trained.state(), v1::JOB_STATE_SUCCEEDED) << trained.error();
  // The monitor saw the Job complete and left the job as bnn-train ended it.
  const absl::Time deadline = absl::Now() + absl::Seconds(5);
  while (!absl::StrContains(ReadFileOrEmpty(Log()),
                            "kubernetes job succeeded job_id=" + job) &&
         absl::Now() < deadline) {
    absl::SleepFor(absl::Milliseconds(50));
  }
  EXPECT_THAT(ReadFileOrEmpty(Log()),
              HasSubstr("kubernetes job succeeded job_id=" + job));
  EXPECT_EQ(Get(job).state(), v1::JOB_STATE_SUCCEEDED);

  v1::PredictRequest request;
  request.set_snapshot_id(trained.snapshot_id());
  request.add_rows()->add_x(1.0);
  v1::PredictResponse response;
  grpc::ClientContext context;
  const grpc::Status status = stub_->Predict(&context, request, &response);
  ASSERT_TRUE(status.ok()) << status.error_message();
  EXPECT_TRUE(std::isfinite(response.predictions(0).mean()));
  // The server itself trained nothing.
  EXPECT_THAT(ReadFileOrEmpty(Log()),
              ::testing::Not(HasSubstr("job running job_id=" + job)));
}

TEST_F(KubernetesRunnerTest, AFailedKubernetesJobFailsTheJobWithItsReason) {
  Start();
  const std::string job = StartTraining(Upload(), 20);
  ASSERT_TRUE(fake_
                  ->SetJobStatus(namespace_, JobName(job),
                                 R"({"failed": 3, "conditions": [)"
                                 R"({"type": "Failed", "status": "True", )"
                                 R"("reason": "BackoffLimitExceeded", )"
                                 R"("message": "Job has reached the )"
                                 R"(specified backoff limit"}]})")
                  .ok());
  const v1::Job failed = WaitForEnd(job);
  EXPECT_EQ(failed.state(), v1::JOB_STATE_FAILED);
  EXPECT_THAT(failed.error(),
              HasSubstr("the Kubernetes Job failed: BackoffLimitExceeded: "
                        "Job has reached the specified backoff limit"));
}

TEST_F(KubernetesRunnerTest, CancelDeletesTheKubernetesJob) {
  Start();
  const std::string dataset = Upload();
  // Queued (no pod yet): CANCELLED at once, its Job deleted.
  const std::string queued = StartTraining(dataset, 20);
  {
    grpc::ClientContext context;
    v1::CancelJobRequest request;
    request.set_job_id(queued);
    v1::Job response;
    ASSERT_TRUE(stub_->CancelJob(&context, request, &response).ok());
    EXPECT_EQ(response.state(), v1::JOB_STATE_CANCELLED);
  }
  // Running in its pod: CANCELLING, the Job deleted, then CANCELLED.
  const std::string running = StartTraining(dataset, 100000);
  absl::StatusOr<std::unique_ptr<ChildProcess>> pod =
      ChildProcess::Start(TrainArgv(running), dir_.path() + "/pod.log");
  ASSERT_TRUE(pod.ok()) << pod.status();
  ASSERT_TRUE(testutil::WaitForJob(*stub_, running, [](const v1::Job& j) {
                return j.state() == v1::JOB_STATE_RUNNING;
              }).ok());
  {
    grpc::ClientContext context;
    v1::CancelJobRequest request;
    request.set_job_id(running);
    v1::Job response;
    ASSERT_TRUE(stub_->CancelJob(&context, request, &response).ok());
    EXPECT_NE(response.state(), v1::JOB_STATE_RUNNING);
  }
  const v1::Job cancelled = WaitForEnd(running);
  EXPECT_EQ(cancelled.state(), v1::JOB_STATE_CANCELLED) << cancelled.error();
  EXPECT_EQ(Get(queued).state(), v1::JOB_STATE_CANCELLED);
  // The pod's bnn-train stops on its own (Kubernetes would stop it too),
  // committing nothing once the job is CANCELLED.
  EXPECT_TRUE((*pod)->Wait(absl::Seconds(15)).ok())
      << ReadFileOrEmpty(dir_.path() + "/pod.log");
  EXPECT_EQ(Get(running).state(), v1::JOB_STATE_CANCELLED);
  EXPECT_THAT(ReadFileOrEmpty(dir_.path() + "/pod.log"),
              HasSubstr("stops without committing job_id=" + running));
  std::vector<std::string> deleted;
  for (const Json& request : Requests("DELETE")) {
    deleted.push_back(request["path"].get<std::string>());
  }
  const std::string prefix =
      absl::StrCat("/apis/batch/v1/namespaces/", namespace_, "/jobs/");
  EXPECT_THAT(deleted, Contains(prefix + JobName(queued)));
  EXPECT_THAT(deleted, Contains(prefix + JobName(running)));
  EXPECT_TRUE(Jobs().empty());
}

TEST_F(KubernetesRunnerTest, ARestartLaunchesAQueuedJobWithoutAJob) {
  // Queued by a server that launches nothing (as one that died between
  // storing and launching would leave it).
  Start(/*kubernetes=*/false);
  const std::string job = StartTraining(Upload(), 20);
  EXPECT_TRUE(Jobs().empty());
  Start();
  std::vector<Json> jobs = Jobs();
  ASSERT_EQ(jobs.size(), 1u);
  EXPECT_EQ(jobs[0]["metadata"]["name"], JobName(job));
  const std::string uid = jobs[0]["metadata"]["uid"];
  EXPECT_EQ(Get(job).state(), v1::JOB_STATE_QUEUED);
  // Again: the Job is there (409 AlreadyExists), the same one is kept.
  Start();
  const std::vector<Json> posts = Requests("POST");
  ASSERT_EQ(posts.size(), 2u);
  EXPECT_EQ(posts[1]["code"], 409);
  jobs = Jobs();
  ASSERT_EQ(jobs.size(), 1u);
  EXPECT_EQ(jobs[0]["metadata"]["uid"], uid);
  EXPECT_EQ(Get(job).state(), v1::JOB_STATE_QUEUED);
}

// The layout of deploy/k8s/scale-out: a serving replica (--role=serve,
// in-process runner) stores the job QUEUED and launches nothing; the
// running Kubernetes-mode server launches it at its next poll, once.
TEST_F(KubernetesRunnerTest, AJobQueuedByAServingReplicaIsLaunchedOnce) {
  Start();
  const std::string dataset = Upload();
  absl::StatusOr<std::unique_ptr<ServerProcess>> serving = ServerProcess::Start(
      BNN_SERVER_PATH, dir_.path() + "/serve", dir_.path() + "/serve.log",
      {"--threads=1", "--role=serve", "--metadata=" + uri_,
       "--blob-dir=" + BlobDir()});
  ASSERT_TRUE(serving.ok()) << serving.status();
  std::unique_ptr<S> serving_stub =
      v1::BnnService::NewStub(NewClientChannel((*serving)->address()));
  v1::StartTrainingRequest train;
  train.set_dataset_id(dataset);
  train.set_method("slang");
  train.set_epochs(20);
  train.mutable_model()->add_hidden_sizes(4);
  absl::StatusOr<std::string> job =
      testutil::StartTraining(*serving_stub, train);
  ASSERT_TRUE(job.ok()) << job.status();
  const absl::Time deadline = absl::Now() + absl::Seconds(10);
  while (Jobs().empty() && absl::Now() < deadline) {
    absl::SleepFor(absl::Milliseconds(50));
  }
  std::vector<Json> jobs = Jobs();
  ASSERT_EQ(jobs.size(), 1u) << ReadFileOrEmpty(Log());
  EXPECT_EQ(jobs[0]["metadata"]["name"], JobName(*job));
  EXPECT_THAT(ReadFileOrEmpty(Log()),
              HasSubstr("launching a job another server queued"));
  // Still QUEUED (no pod claimed it): later polls do not launch it again.
  absl::SleepFor(absl::Seconds(1));
  EXPECT_EQ(Get(*job).state(), v1::JOB_STATE_QUEUED);
  EXPECT_EQ(Requests("POST").size(), 1u);
  EXPECT_EQ(Launches("launched"), 1);
  EXPECT_EQ((*serving)->Stop(SIGTERM).value_or(-1), 0);
}

TEST_F(KubernetesRunnerTest,
       ARefusedLaunchFailsTheJobAnUnavailableOneIsRetried) {
  Start();
  const std::string dataset = Upload();
  ASSERT_TRUE(
      fake_
          ->Inject(R"({"code": 403, "reason": "Forbidden", )"
                   R"("message": "jobs.batch is forbidden", "count": 1, )"
                   R"("method": "POST"})")
          .ok());
  const std::string refused = StartTraining(dataset, 20);
  const v1::Job failed = Get(refused);
  EXPECT_EQ(failed.state(), v1::JOB_STATE_FAILED);
  EXPECT_THAT(failed.error(), HasSubstr("cannot launch the Kubernetes Job: "));
  EXPECT_THAT(failed.error(), HasSubstr("jobs.batch is forbidden"));

  ASSERT_TRUE(
      fake_
          ->Inject(R"({"code": 503, "reason": "ServiceUnavailable", )"
                   R"("message": "try later", "count": 1, "method": "POST"})")
          .ok());
  const std::string retried = StartTraining(dataset, 20);
  EXPECT_EQ(Get(retried).state(), v1::JOB_STATE_QUEUED);
  // Retried every --job-poll-seconds.
  const absl::Time deadline = absl::Now() + absl::Seconds(10);
  while (Jobs().empty() && absl::Now() < deadline) {
    absl::SleepFor(absl::Milliseconds(50));
  }
  const std::vector<Json> jobs = Jobs();
  ASSERT_EQ(jobs.size(), 1u);
  EXPECT_EQ(jobs[0]["metadata"]["name"], JobName(retried));
  EXPECT_EQ(Get(retried).state(), v1::JOB_STATE_QUEUED);
  EXPECT_EQ(Launches("failed"), 1);
  EXPECT_EQ(Launches("retry"), 1);
  EXPECT_EQ(Launches("launched"), 1);
}

const ::testing::Environment* const kPostgres =
    ::testing::AddGlobalTestEnvironment(new PostgresEnvironment);

}  // namespace
}  // namespace bnn::server
