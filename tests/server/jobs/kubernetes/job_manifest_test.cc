#include "server/jobs/kubernetes/job_manifest.h"

#include <set>
#include <string>

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "tests/server/server_test_util.h"

namespace bnn::server::kubernetes {
namespace {

using ::testing::ElementsAre;
using ::testing::StartsWith;
using testutil::StatusIs;
using Json = nlohmann::json;

LauncherOptions Options() {
  LauncherOptions options;
  options.image = "bnn-serve:0.1.0";
  options.job_namespace = "bnn";
  return options;
}

TEST(JobNameForIdTest, IsThePrefixAndTheIdWhenThatIsALabel) {
  EXPECT_EQ(JobNameForId("bnn-train-", "job-0123456789abcdef"),
            "bnn-train-job-0123456789abcdef");
}

TEST(JobNameForIdTest, OtherIdsGetAValidDistinctName) {
  const std::string long_id(80, 'a');
  std::set<std::string> names;
  for (const std::string& id :
       {std::string("Job_A"), std::string("job_a"), std::string("job.a"),
        long_id, long_id + "b", std::string("__")}) {
    const std::string name = JobNameForId("bnn-train-", id);
    EXPECT_TRUE(IsDns1123Label(name)) << id << " -> " << name;
    EXPECT_THAT(name, StartsWith("bnn-train-"));
    names.insert(name);
  }
  EXPECT_EQ(names.size(), 6u);
}

TEST(BuildJobTest, MakesTheJobOfTheOptions) {
  LauncherOptions options = Options();
  options.node_selector = {{"pool", "training"}};
  options.service_account = "bnn-train";
  options.env = {{"OMP_NUM_THREADS", "2"}};
  options.active_deadline_seconds = 3600;
  options.cpu_limit = "3500m";
  absl::StatusOr<Json> job = BuildJob(options, "job-00000000000000a1");
  ASSERT_TRUE(job.ok()) << job.status();
  EXPECT_EQ((*job)["apiVersion"], "batch/v1");
  EXPECT_EQ((*job)["kind"], "Job");
  const Json& meta = (*job)["metadata"];
  EXPECT_EQ(meta["name"], "bnn-train-job-00000000000000a1");
  EXPECT_EQ(meta["namespace"], "bnn");
  EXPECT_EQ(meta["labels"]["app.kubernetes.io/name"], "bnn-train");
  EXPECT_EQ(meta["labels"]["bnn-serve/job-id"], "job-00000000000000a1");
  const Json& spec = (*job)["spec"];
  EXPECT_EQ(spec["backoffLimit"], 2);
  EXPECT_EQ(spec["activeDeadlineSeconds"], 3600);
  EXPECT_EQ(spec["ttlSecondsAfterFinished"], 86400);
  EXPECT_EQ(spec["template"]["metadata"]["labels"], meta["labels"]);
  const Json& pod = spec["template"]["spec"];
  EXPECT_EQ(pod["restartPolicy"], "Never");
  EXPECT_EQ(pod["serviceAccountName"], "bnn-train");
  EXPECT_EQ(pod["nodeSelector"]["pool"], "training");
  EXPECT_EQ(pod["securityContext"]["runAsUser"], 10001);
  ASSERT_EQ(pod["containers"].size(), 1u);
  const Json& container = pod["containers"][0];
  EXPECT_EQ(container["image"], "bnn-serve:0.1.0");
  EXPECT_EQ(container["command"], Json({"bnn-train"}));
  // {threads} is the CPU limit rounded down.
  EXPECT_EQ(container["args"],
            Json({"--metadata=$(BNN_METADATA)", "--blob-dir=/var/lib/bnn/blobs",
                  "--data-dir=/tmp/bnn-train", "--job-id=job-00000000000000a1",
                  "--threads=3"}));
  EXPECT_EQ(container["env"][0]["name"], "BNN_METADATA");
  EXPECT_EQ(container["env"][0]["valueFrom"]["secretKeyRef"],
            Json({{"name", "bnn-metadata"}, {"key", "uri"}}));
  EXPECT_EQ(container["env"][1],
            Json({{"name", "OMP_NUM_THREADS"}, {"value", "2"}}));
  EXPECT_EQ(container["resources"]["limits"]["cpu"], "3500m");
  EXPECT_EQ(container["resources"]["requests"]["memory"], "2Gi");
  EXPECT_EQ(pod["volumes"][0]["persistentVolumeClaim"]["claimName"],
            "bnn-blobs");
}

TEST(BuildJobTest, LeavesUnsetFieldsOut) {
  LauncherOptions options = Options();
  options.cpu_request = options.cpu_limit = "";
  options.ttl_seconds_after_finished = -1;
  absl::StatusOr<Json> job = BuildJob(options, "job-1");
  ASSERT_TRUE(job.ok());
  EXPECT_FALSE((*job)["spec"].contains("ttlSecondsAfterFinished"));
  EXPECT_FALSE((*job)["spec"].contains("activeDeadlineSeconds"));
  const Json& container = (*job)["spec"]["template"]["spec"]["containers"][0];
  EXPECT_FALSE(container["resources"]["requests"].contains("cpu"));
  EXPECT_FALSE(container["resources"].contains("limits") &&
               container["resources"]["limits"].contains("cpu"));
  // Without a CPU quantity, one thread.
  EXPECT_EQ(container["args"][4], "--threads=1");
  EXPECT_FALSE((*job)["spec"]["template"]["spec"].contains("nodeSelector"));
}

TEST(BuildJobTest, RefusesAnIdThatCannotBeALabel) {
  EXPECT_THAT(BuildJob(Options(), "job/1").status(),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       "job id \"job/1\" cannot label a Kubernetes Job"));
  EXPECT_THAT(BuildJob(Options(), "").status(),
              StatusIs(absl::StatusCode::kInvalidArgument, "job id"));
}

JobStatus StatusOf(const char* status_json) {
  return ParseJobStatus(Json{{"status", Json::parse(status_json)}});
}

TEST(ParseJobStatusTest, MapsTheApiServersStatus) {
  EXPECT_EQ(ParseJobStatus(Json::object()).phase, JobPhase::kPending);
  EXPECT_EQ(StatusOf("{}").phase, JobPhase::kPending);
  EXPECT_EQ(StatusOf(R"({"active": 1})").phase, JobPhase::kRunning);
  // With `ready` (Kubernetes >= 1.24), a pod still starting is pending.
  EXPECT_EQ(StatusOf(R"({"active": 1, "ready": 0})").phase, JobPhase::kPending);
  EXPECT_EQ(StatusOf(R"({"active": 1, "ready": 1})").phase, JobPhase::kRunning);
  // Between a failed attempt and its retry.
  const JobStatus retrying = StatusOf(R"({"failed": 1})");
  EXPECT_EQ(retrying.phase, JobPhase::kPending);
  EXPECT_EQ(retrying.failed, 1);
  EXPECT_EQ(StatusOf(R"({"succeeded": 1, "conditions": [{"type": "Complete",
                  "status": "True"}]})")
                .phase,
            JobPhase::kSucceeded);
  EXPECT_EQ(StatusOf(R"({"succeeded": 1})").phase, JobPhase::kSucceeded);
  const JobStatus failed = StatusOf(R"({"failed": 3, "conditions": [
      {"type": "Failed", "status": "True", "reason": "BackoffLimitExceeded",
       "message": "Job has reached the specified backoff limit"}]})");
  EXPECT_EQ(failed.phase, JobPhase::kFailed);
  EXPECT_EQ(failed.reason,
            "BackoffLimitExceeded: Job has reached the specified backoff "
            "limit");
  EXPECT_EQ(failed.failed, 3);
  EXPECT_EQ(StatusOf(R"({"active": 1, "conditions": [{"type": "FailureTarget",
                        "status": "True", "reason": "DeadlineExceeded"}]})")
                .reason,
            "DeadlineExceeded");
  // A condition that is not True does not count.
  EXPECT_EQ(StatusOf(R"({"active": 1, "conditions": [{"type": "Failed",
                        "status": "False"}]})")
                .phase,
            JobPhase::kRunning);
  EXPECT_EQ(JobPhaseToString(JobPhase::kFailed), "failed");
}

TEST(ParseLaunchedJobTest, NeedsANameAndAJobId) {
  absl::StatusOr<LaunchedJob> job = ParseLaunchedJob(Json::parse(R"({
      "metadata": {"name": "bnn-train-job-1", "uid": "u-1",
                   "labels": {"bnn-serve/job-id": "job-1"}},
      "status": {"active": 1}})"));
  ASSERT_TRUE(job.ok()) << job.status();
  EXPECT_EQ(job->job_id, "job-1");
  EXPECT_EQ(job->name, "bnn-train-job-1");
  EXPECT_EQ(job->uid, "u-1");
  EXPECT_EQ(job->status.phase, JobPhase::kRunning);
  EXPECT_THAT(
      ParseLaunchedJob(Json::parse(R"({"metadata": {"name": "x"}})")).status(),
      StatusIs(absl::StatusCode::kInvalidArgument,
               "no bnn-serve/job-id label"));
  EXPECT_THAT(ParseLaunchedJob(Json::parse("{}")).status(),
              StatusIs(absl::StatusCode::kInvalidArgument, "metadata"));
}

}  // namespace
}  // namespace bnn::server::kubernetes
