// JobLauncher, JobMonitor and ApiClient against the fake Kubernetes API
// server (tests/test_util/fake_k8s_api.py): one fake per suite, one
// namespace per test, so the tests see only their own Jobs.
#include "server/jobs/kubernetes/job_launcher.h"

#include <fstream>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <absl/strings/ascii.h>
#include <absl/strings/str_cat.h>
#include <absl/synchronization/mutex.h>
#include <absl/time/clock.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "server/jobs/kubernetes/api_client.h"
#include "tests/server/auth/test_certs.h"
#include "tests/server/server_test_util.h"
#include "tests/test_util/fake_k8s_api.h"

namespace bnn::server::kubernetes {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;
using testutil::StatusIs;
using testutil::TempDir;
using Json = nlohmann::json;

class JobLauncherTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new TempDir("fake_k8s");
    absl::StatusOr<std::unique_ptr<testing::FakeK8sApi>> fake =
        testing::FakeK8sApi::Start(dir_->path());
    ASSERT_TRUE(fake.ok()) << fake.status();
    fake_ = fake->release();
  }
  static void TearDownTestSuite() {
    delete fake_;
    fake_ = nullptr;
    delete dir_;
  }

  void SetUp() override {
    ASSERT_NE(fake_, nullptr);
    ASSERT_TRUE(fake_->SetToken("test-token-1").ok());
  }

  // Options reaching the fake, in a namespace of this test's own.
  LauncherOptions Options() {
    std::string name =
        ::testing::UnitTest::GetInstance()->current_test_info()->name();
    absl::AsciiStrToLower(&name);
    LauncherOptions options;
    options.api_server = fake_->api_url();
    options.ca_file = fake_->ca_file();
    options.token_file = fake_->token_file();
    options.job_namespace = name.substr(0, 63);
    options.image = "bnn-serve:test";
    options.connect_timeout = absl::Seconds(5);
    options.request_timeout = absl::Seconds(10);
    options.status_poll_interval = absl::Seconds(1);
    return options;
  }

  std::unique_ptr<JobLauncher> Launcher(const LauncherOptions& options) {
    absl::StatusOr<std::unique_ptr<JobLauncher>> launcher =
        JobLauncher::Create(options);
    EXPECT_TRUE(launcher.ok()) << launcher.status();
    return launcher.ok() ? *std::move(launcher) : nullptr;
  }

  // The API requests the fake recorded (of every test) whose path starts
  // with `path_prefix`.
  std::vector<Json> Requests(const std::string& path_prefix) {
    absl::StatusOr<std::string> text = fake_->Requests();
    EXPECT_TRUE(text.ok()) << text.status();
    std::vector<Json> found;
    if (!text.ok()) return found;
    for (const Json& request : Json::parse(*text)) {
      if (request["path"].get<std::string>().rfind(path_prefix, 0) == 0) {
        found.push_back(request);
      }
    }
    return found;
  }

  static TempDir* dir_;
  static testing::FakeK8sApi* fake_;
};

TempDir* JobLauncherTest::dir_ = nullptr;
testing::FakeK8sApi* JobLauncherTest::fake_ = nullptr;

constexpr char kJobId[] = "job-00000000000000a1";

TEST_F(JobLauncherTest, CreateGetFollowStatusDelete) {
  const LauncherOptions options = Options();
  std::unique_ptr<JobLauncher> launcher = Launcher(options);
  ASSERT_NE(launcher, nullptr);
  const std::string ns = options.job_namespace;

  absl::StatusOr<LaunchedJob> launched = launcher->Launch(kJobId);
  ASSERT_TRUE(launched.ok()) << launched.status() << fake_->Log();
  EXPECT_EQ(launched->job_id, kJobId);
  EXPECT_EQ(launched->name, "bnn-train-job-00000000000000a1");
  EXPECT_FALSE(launched->uid.empty());
  EXPECT_EQ(launched->status.phase, JobPhase::kPending);

  // What the fake received: the schema-checked body, strict field
  // validation, the token and the media types.
  const std::vector<Json> posts =
      Requests(absl::StrCat("/apis/batch/v1/namespaces/", ns, "/jobs"));
  ASSERT_EQ(posts.size(), 1u);
  const Json& post = posts[0];
  EXPECT_EQ(post["method"], "POST");
  EXPECT_EQ(post["code"], 201);
  EXPECT_EQ(post["query"]["fieldValidation"], "Strict");
  EXPECT_EQ(post["headers"]["Authorization"], "Bearer <ok>");
  EXPECT_EQ(post["headers"]["Content-Type"], "application/json");
  EXPECT_EQ(post["headers"]["Accept"], "application/json");
  const Json body = Json::parse(post["body"].get<std::string>());
  EXPECT_EQ(body["spec"]["template"]["spec"]["containers"][0]["args"][3],
            "--job-id=job-00000000000000a1");

  const struct {
    const char* status;
    JobPhase phase;
  } kCases[] = {
      {R"({"active": 1, "ready": 0})", JobPhase::kPending},
      {R"({"active": 1, "ready": 1})", JobPhase::kRunning},
      {R"({"active": 1})", JobPhase::kRunning},
      {R"({"failed": 1})", JobPhase::kPending},
      {R"({"succeeded": 1, "conditions": [{"type": "Complete",
           "status": "True"}]})",
       JobPhase::kSucceeded},
      {R"({"failed": 3, "conditions": [{"type": "Failed", "status": "True",
           "reason": "BackoffLimitExceeded",
           "message": "Job has reached the specified backoff limit"}]})",
       JobPhase::kFailed},
  };
  for (const auto& c : kCases) {
    ASSERT_TRUE(fake_->SetJobStatus(ns, launched->name, c.status).ok());
    absl::StatusOr<LaunchedJob> got = launcher->Get(kJobId);
    ASSERT_TRUE(got.ok()) << got.status();
    EXPECT_EQ(got->status.phase, c.phase) << c.status;
    EXPECT_EQ(got->uid, launched->uid);
  }
  absl::StatusOr<LaunchedJob> failed = launcher->Get(kJobId);
  ASSERT_TRUE(failed.ok());
  EXPECT_EQ(failed->status.reason,
            "BackoffLimitExceeded: Job has reached the specified backoff "
            "limit");

  absl::StatusOr<bool> deleted = launcher->Delete(kJobId);
  ASSERT_TRUE(deleted.ok()) << deleted.status();
  EXPECT_TRUE(*deleted);
  const Json delete_request =
      Requests(absl::StrCat("/apis/batch/v1/namespaces/", ns, "/jobs/",
                            launched->name))
          .back();
  EXPECT_EQ(delete_request["method"], "DELETE");
  EXPECT_EQ(delete_request["query"]["propagationPolicy"], "Background");
  EXPECT_THAT(launcher->Get(kJobId).status(),
              StatusIs(absl::StatusCode::kNotFound,
                       "HTTP 404 NotFound: jobs.batch "
                       "\"bnn-train-job-00000000000000a1\" not found"));
  // Deleting again is not an error.
  deleted = launcher->Delete(kJobId);
  ASSERT_TRUE(deleted.ok()) << deleted.status();
  EXPECT_FALSE(*deleted);
}

TEST_F(JobLauncherTest, LaunchIsIdempotentForTheSameJobOnly) {
  const LauncherOptions options = Options();
  std::unique_ptr<JobLauncher> launcher = Launcher(options);
  ASSERT_NE(launcher, nullptr);
  absl::StatusOr<LaunchedJob> first = launcher->Launch(kJobId);
  ASSERT_TRUE(first.ok()) << first.status();
  ASSERT_TRUE(
      fake_->SetJobStatus(options.job_namespace, first->name, R"({"active":1})")
          .ok());
  // A second launch (after a restart, say) finds the Job as it is.
  absl::StatusOr<LaunchedJob> again = launcher->Launch(kJobId);
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_EQ(again->uid, first->uid);
  EXPECT_EQ(again->status.phase, JobPhase::kRunning);
  const std::vector<Json> posts = Requests(
      absl::StrCat("/apis/batch/v1/namespaces/", options.job_namespace));
  ASSERT_GE(posts.size(), 3u);
  EXPECT_EQ(posts[posts.size() - 2]["code"], 409);

  // A Job under the name that is not ours (another id's label) is not
  // taken for ours.
  absl::StatusOr<std::unique_ptr<ApiClient>> client =
      ApiClient::Create(launcher->options());
  ASSERT_TRUE(client.ok());
  absl::StatusOr<Json> foreign = BuildJob(launcher->options(), "job-other");
  ASSERT_TRUE(foreign.ok());
  (*foreign)["metadata"]["name"] =
      JobNameForId(options.job_name_prefix, "job-b2");
  ASSERT_TRUE(
      (*client)->Call("POST", launcher->jobs_path(), foreign->dump()).ok());
  EXPECT_THAT(launcher->Launch("job-b2").status(),
              StatusIs(absl::StatusCode::kAlreadyExists,
                       "is not the Job of job-b2 (its bnn-serve/job-id label "
                       "differs)"));
}

TEST_F(JobLauncherTest, ListsOnlyOurJobs) {
  const LauncherOptions options = Options();
  std::unique_ptr<JobLauncher> launcher = Launcher(options);
  ASSERT_NE(launcher, nullptr);
  for (const char* id : {"job-1", "job-2", "job-3"}) {
    ASSERT_TRUE(launcher->Launch(id).ok());
  }
  // Someone else's Job in the same namespace.
  absl::StatusOr<std::unique_ptr<ApiClient>> client =
      ApiClient::Create(launcher->options());
  ASSERT_TRUE(client.ok());
  absl::StatusOr<Json> other = BuildJob(launcher->options(), "job-4");
  ASSERT_TRUE(other.ok());
  (*other)["metadata"]["labels"] = {{"app", "other"}};
  (*other)["spec"]["template"]["metadata"]["labels"] = {{"app", "other"}};
  ASSERT_TRUE(
      (*client)->Call("POST", launcher->jobs_path(), other->dump()).ok());

  absl::StatusOr<std::map<std::string, LaunchedJob>> jobs = launcher->List();
  ASSERT_TRUE(jobs.ok()) << jobs.status();
  std::vector<std::string> ids;
  for (const auto& [id, job] : *jobs) ids.push_back(id);
  EXPECT_THAT(ids, ::testing::ElementsAre("job-1", "job-2", "job-3"));
  EXPECT_EQ(Requests(launcher->jobs_path()).back()["query"]["labelSelector"],
            "app.kubernetes.io/name=bnn-train,"
            "app.kubernetes.io/managed-by=bnn-server");
}

TEST_F(JobLauncherTest, ReadsTheTokenForEveryRequest) {
  TempDir dir;
  LauncherOptions options = Options();
  // The launcher's own token file; the fake checks against its file.
  options.token_file = dir.File("token");
  std::ofstream(options.token_file) << "test-token-1\n";
  std::unique_ptr<JobLauncher> launcher = Launcher(options);
  ASSERT_NE(launcher, nullptr);
  ASSERT_TRUE(launcher->Launch(kJobId).ok());

  // The API server now wants a rotated token the launcher does not have.
  ASSERT_TRUE(fake_->SetToken("test-token-2-rotated").ok());
  absl::StatusOr<LaunchedJob> refused = launcher->Get(kJobId);
  EXPECT_THAT(refused.status(), StatusIs(absl::StatusCode::kUnauthenticated,
                                         "HTTP 401 Unauthorized"));
  EXPECT_THAT(std::string(refused.status().message()),
              Not(HasSubstr("test-token")));
  // The kubelet writes the rotated token: the same launcher uses it.
  std::ofstream(options.token_file) << "test-token-2-rotated\n";
  EXPECT_TRUE(launcher->Get(kJobId).ok());

  // An unreadable token file is a clear error, before any request.
  std::remove(options.token_file.c_str());
  EXPECT_THAT(launcher->Get(kJobId).status(),
              StatusIs(absl::StatusCode::kFailedPrecondition,
                       "token_file " + options.token_file));
}

TEST_F(JobLauncherTest, AnUntrustedCertificateIsAClearError) {
  TempDir dir;
  absl::StatusOr<testutil::TestCerts> certs =
      testutil::MakeTestCerts(dir.path());
  ASSERT_TRUE(certs.ok()) << certs.status();
  LauncherOptions options = Options();
  // A valid CA, but not the one that signed the fake's certificate.
  options.ca_file = certs->ca;
  std::unique_ptr<JobLauncher> launcher = Launcher(options);
  ASSERT_NE(launcher, nullptr);
  absl::StatusOr<LaunchedJob> launched = launcher->Launch(kJobId);
  EXPECT_THAT(launched.status(),
              StatusIs(absl::StatusCode::kFailedPrecondition,
                       "the API server's TLS certificate does not verify "
                       "against ca_file " +
                           certs->ca));
  // No request reached the API with the token.
  EXPECT_TRUE(Requests(launcher->jobs_path()).empty());

  options.ca_file = dir.File("no-such-ca.crt");
  launcher = Launcher(options);
  ASSERT_NE(launcher, nullptr);
  EXPECT_THAT(launcher->Launch(kJobId).status(),
              StatusIs(absl::StatusCode::kFailedPrecondition,
                       "ca_file " + options.ca_file));
}

TEST_F(JobLauncherTest, ApiErrorsCarryTheCodeAndTheServersMessage) {
  std::unique_ptr<JobLauncher> launcher = Launcher(Options());
  ASSERT_NE(launcher, nullptr);
  ASSERT_TRUE(fake_
                  ->Inject(R"({"code": 403, "reason": "Forbidden",
      "message": "jobs.batch is forbidden: User \"system:serviceaccount:bnn:default\" cannot create resource \"jobs\" in API group \"batch\""})")
                  .ok());
  EXPECT_THAT(
      launcher->Launch(kJobId).status(),
      StatusIs(absl::StatusCode::kPermissionDenied,
               "kubernetes API POST " + launcher->jobs_path() +
                   ": HTTP 403 Forbidden: jobs.batch is forbidden: User "
                   "\"system:serviceaccount:bnn:default\" cannot create"));
  ASSERT_TRUE(fake_
                  ->Inject(R"({"code": 500, "reason": "InternalError",
      "message": "etcdserver: request timed out"})")
                  .ok());
  EXPECT_THAT(launcher->List().status(),
              StatusIs(absl::StatusCode::kUnavailable,
                       "HTTP 500 InternalError: etcdserver: request timed "
                       "out"));
  ASSERT_TRUE(fake_
                  ->Inject(R"({"code": 429, "reason": "TooManyRequests",
      "message": "too many requests"})")
                  .ok());
  EXPECT_THAT(launcher->Get(kJobId).status(),
              StatusIs(absl::StatusCode::kResourceExhausted, "HTTP 429"));
}

TEST_F(JobLauncherTest, RequestsTimeOut) {
  LauncherOptions options = Options();
  options.connect_timeout = absl::Seconds(1);
  options.request_timeout = absl::Seconds(1);
  std::unique_ptr<JobLauncher> launcher = Launcher(options);
  ASSERT_NE(launcher, nullptr);
  ASSERT_TRUE(fake_->Inject(R"({"code": 0, "delay_seconds": 3})").ok());
  const absl::Time start = absl::Now();
  EXPECT_THAT(launcher->List().status(),
              StatusIs(absl::StatusCode::kDeadlineExceeded,
                       "timed out (connect_timeout 1s, request_timeout 1s)"));
  EXPECT_LT(absl::Now() - start, absl::Seconds(2.5));

  // Nothing listens on a port that was just free: Unavailable.
  options.api_server =
      absl::StrCat("https://127.0.0.1:", testing::PickFreePort());
  launcher = Launcher(options);
  ASSERT_NE(launcher, nullptr);
  EXPECT_THAT(
      launcher->List().status(),
      StatusIs(absl::StatusCode::kUnavailable, "kubernetes API GET https://"));
}

TEST_F(JobLauncherTest, ResponsesAreBounded) {
  LauncherOptions options = Options();
  options.max_response_bytes = 4096;
  std::unique_ptr<JobLauncher> launcher = Launcher(options);
  ASSERT_NE(launcher, nullptr);
  // Each stored Job is about 1.5 KB of JSON.
  for (int i = 0; i < 4; ++i) {
    ASSERT_TRUE(launcher->Launch(absl::StrCat("job-", i)).ok());
  }
  EXPECT_THAT(launcher->List().status(),
              StatusIs(absl::StatusCode::kResourceExhausted,
                       "the response exceeds max_response_bytes (4096)"));
}

// The fake must refuse what the real API server refuses, or the launcher
// tests above could pass against a server that accepts anything.
TEST_F(JobLauncherTest, TheFakeRejectsBadBodiesAsTheApiServerDoes) {
  std::unique_ptr<JobLauncher> launcher = Launcher(Options());
  ASSERT_NE(launcher, nullptr);
  absl::StatusOr<std::unique_ptr<ApiClient>> client =
      ApiClient::Create(launcher->options());
  ASSERT_TRUE(client.ok());
  const std::string strict =
      absl::StrCat(launcher->jobs_path(), "?fieldValidation=Strict");
  const auto post = [&](auto change, const std::string& path) {
    absl::StatusOr<Json> job = BuildJob(launcher->options(), "job-bad");
    EXPECT_TRUE(job.ok());
    change(*job);
    return (*client)->Call("POST", path, job->dump()).status();
  };
  const absl::StatusCode kInvalid = absl::StatusCode::kInvalidArgument;
  EXPECT_THAT(post([](Json& j) { j["spec"]["backofLimit"] = 1; }, strict),
              StatusIs(kInvalid,
                       "HTTP 400 BadRequest: Job in version \"v1\" "
                       "cannot be handled as a Job: strict decoding "
                       "error: unknown field \"spec.backofLimit\""));
  EXPECT_THAT(post([](Json& j) { j["spec"]["backoffLimit"] = "2"; }, strict),
              StatusIs(kInvalid,
                       "HTTP 400 BadRequest: Job in version \"v1\" "
                       "cannot be handled as a Job: json: cannot "
                       "unmarshal: spec.backoffLimit"));
  EXPECT_THAT(
      post(
          [](Json& j) {
            j["spec"]["template"]["spec"]["containers"][0].erase("name");
          },
          strict),
      StatusIs(kInvalid,
               "HTTP 422 Invalid: Job.batch \"bnn-train-"
               "job-bad\" is invalid: spec.template.spec."
               "containers[0].name: Required value"));
  EXPECT_THAT(
      post([](Json& j) { j["metadata"]["name"] = "Bnn_Train"; }, strict),
      StatusIs(kInvalid,
               "HTTP 422 Invalid: Job.batch \"Bnn_Train\" "
               "is invalid: metadata.name"));
  EXPECT_THAT(post(
                  [](Json& j) {
                    j["spec"]["template"]["spec"]["restartPolicy"] = "Always";
                  },
                  strict),
              StatusIs(kInvalid,
                       "spec.template.spec.restartPolicy: "
                       "Unsupported value"));
  EXPECT_THAT(post(
                  [](Json& j) {
                    j["spec"]["template"]["spec"]["containers"][0]["resources"]
                     ["limits"]["memory"] = "8 GB";
                  },
                  strict),
              StatusIs(kInvalid,
                       "quantities must match the regular "
                       "expression"));
  EXPECT_THAT(
      post([](Json& j) { j["metadata"]["namespace"] = "elsewhere"; }, strict),
      StatusIs(kInvalid,
               "the namespace of the provided object does "
               "not match"));
  EXPECT_THAT(post([](Json& j) { j["kind"] = "CronJob"; }, strict),
              StatusIs(kInvalid, "the kind in the data (CronJob)"));
  // Without strict validation an unknown field is dropped, as the API
  // server's default does: the Job is created without it.
  EXPECT_TRUE(
      post([](Json& j) { j["spec"]["backofLimit"] = 1; }, launcher->jobs_path())
          .ok());
  // None of the refused bodies was stored.
  absl::StatusOr<std::map<std::string, LaunchedJob>> jobs = launcher->List();
  ASSERT_TRUE(jobs.ok());
  EXPECT_EQ(jobs->size(), 1u);
  // Unknown paths and methods are refused too.
  EXPECT_THAT((*client)->Call("GET", "/apis/batch/v1/jobs").status(),
              StatusIs(absl::StatusCode::kNotFound, "HTTP 404"));
  EXPECT_THAT((*client)->Call("DELETE", launcher->jobs_path()).status(),
              StatusIs(absl::StatusCode::kFailedPrecondition,
                       "HTTP 405 MethodNotAllowed"));
}

TEST_F(JobLauncherTest, MonitorReportsChanges) {
  const LauncherOptions options = Options();
  std::unique_ptr<JobLauncher> launcher = Launcher(options);
  ASSERT_NE(launcher, nullptr);
  absl::StatusOr<LaunchedJob> a = launcher->Launch("job-a");
  ASSERT_TRUE(a.ok());
  ASSERT_TRUE(launcher->Launch("job-b").ok());

  absl::Mutex mu;
  std::vector<std::string> changes;  // "job-a pending", "job-b gone", ...
  std::vector<absl::Status> errors;
  JobMonitor monitor(
      launcher.get(),
      [&](const std::string& id, const std::optional<LaunchedJob>& job) {
        absl::MutexLock lock(&mu);
        changes.push_back(absl::StrCat(
            id, " ", job ? JobPhaseToString(job->status.phase) : "gone"));
      },
      [&](const absl::Status& status) {
        absl::MutexLock lock(&mu);
        errors.push_back(status);
      });
  // Waits (bounded) until `count` changes were reported.
  const auto await = [&](size_t count) {
    absl::MutexLock lock(&mu);
    const auto enough = [&] { return changes.size() >= count; };
    mu.AwaitWithTimeout(absl::Condition(&enough), absl::Seconds(10));
    return changes;
  };
  EXPECT_THAT(await(2),
              ::testing::ElementsAre("job-a pending", "job-b pending"));
  ASSERT_TRUE(
      fake_->SetJobStatus(options.job_namespace, a->name, R"({"active": 1})")
          .ok());
  monitor.PollNow();
  EXPECT_THAT(await(3), ::testing::ElementsAre("job-a pending", "job-b pending",
                                               "job-a running"));
  ASSERT_TRUE(launcher->Delete("job-b").ok());
  monitor.PollNow();
  EXPECT_THAT(await(4), ::testing::ElementsAre("job-a pending", "job-b pending",
                                               "job-a running", "job-b gone"));
  // A failing List is reported, and the next poll goes on.
  ASSERT_TRUE(fake_
                  ->Inject(R"({"code": 503, "reason": "ServiceUnavailable",
      "message": "the server is currently unable to handle the request"})")
                  .ok());
  monitor.PollNow();
  {
    absl::MutexLock lock(&mu);
    const auto failed = [&] { return !errors.empty(); };
    mu.AwaitWithTimeout(absl::Condition(&failed), absl::Seconds(10));
    ASSERT_EQ(errors.size(), 1u);
    EXPECT_THAT(errors[0], StatusIs(absl::StatusCode::kUnavailable,
                                    "HTTP 503 ServiceUnavailable"));
  }
  ASSERT_TRUE(fake_
                  ->SetJobStatus(options.job_namespace, a->name,
                                 R"({"succeeded": 1, "conditions": [
      {"type": "Complete", "status": "True"}]})")
                  .ok());
  monitor.PollNow();
  EXPECT_EQ(await(5).back(), "job-a succeeded");
}

TEST_F(JobLauncherTest, MonitorPollsAtItsIntervalWithoutSpinning) {
  std::unique_ptr<JobLauncher> launcher = Launcher(Options());
  ASSERT_NE(launcher, nullptr);
  const size_t before = Requests(launcher->jobs_path()).size();
  {
    JobMonitor monitor(
        launcher.get(), [](const std::string&, const auto&) {},
        [](const absl::Status&) {});
    absl::SleepFor(absl::Milliseconds(2500));
  }
  // status_poll_interval 1s: polls at 0, 1 and 2 s.
  const size_t lists = Requests(launcher->jobs_path()).size() - before;
  EXPECT_GE(lists, 2u);
  EXPECT_LE(lists, 4u);
}

}  // namespace
}  // namespace bnn::server::kubernetes
