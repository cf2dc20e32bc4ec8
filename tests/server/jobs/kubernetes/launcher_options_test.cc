#include "server/jobs/kubernetes/launcher_options.h"

#include <fstream>
#include <stdlib.h>
#include <string>

#include <absl/strings/match.h>
#include <absl/strings/str_split.h>
#include <absl/strings/strip.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "tests/server/server_test_util.h"

namespace bnn::server::kubernetes {
namespace {

using ::testing::DoubleEq;
using ::testing::ElementsAre;
using ::testing::Pair;
using testutil::StatusIs;
using testutil::TempDir;

LauncherOptions Valid() {
  LauncherOptions options;
  options.image = "registry.example/bnn-serve:0.1.0";
  return options;
}

// Validate() of Valid() with one change.
template <typename Change>
absl::Status ValidateWith(Change change) {
  LauncherOptions options = Valid();
  change(options);
  return options.Validate();
}

TEST(LauncherOptionsTest, DefaultsNeedOnlyTheImage) {
  EXPECT_THAT(LauncherOptions().Validate(),
              StatusIs(absl::StatusCode::kInvalidArgument, "image"));
  EXPECT_TRUE(Valid().Validate().ok()) << Valid().Validate();
}

TEST(LauncherOptionsTest, ValidateNamesTheFieldAndTheBound) {
  const absl::StatusCode kInvalid = absl::StatusCode::kInvalidArgument;
  EXPECT_THAT(ValidateWith([](auto& o) { o.backoff_limit = 101; }),
              StatusIs(kInvalid, "backoff_limit: 101 is outside [0, 100]"));
  EXPECT_THAT(ValidateWith([](auto& o) { o.api_server = "http://k8s:80"; }),
              StatusIs(kInvalid,
                       "api_server: \"http://k8s:80\" must be "
                       "https://"));
  EXPECT_THAT(
      ValidateWith([](auto& o) { o.request_timeout = absl::Seconds(1); }),
      StatusIs(kInvalid, "request_timeout: 1s is outside [connect_timeout"));
  EXPECT_THAT(
      ValidateWith([](auto& o) { o.connect_timeout = absl::ZeroDuration(); }),
      StatusIs(kInvalid, "connect_timeout: 0 is outside (0, 60s]"));
  EXPECT_THAT(ValidateWith([](auto& o) { o.max_response_bytes = 100; }),
              StatusIs(kInvalid, "max_response_bytes: 100 is outside [4096"));
  EXPECT_THAT(ValidateWith([](auto& o) {
                o.status_poll_interval = absl::Milliseconds(10);
              }),
              StatusIs(kInvalid, "status_poll_interval: 10ms is outside"));
  EXPECT_THAT(ValidateWith([](auto& o) { o.image_pull_policy = "Sometimes"; }),
              StatusIs(kInvalid, "image_pull_policy: \"Sometimes\""));
  EXPECT_THAT(ValidateWith([](auto& o) { o.args = {"--threads=2"}; }),
              StatusIs(kInvalid, "args: no argument has {job_id}"));
  EXPECT_THAT(
      ValidateWith([](auto& o) {
        o.args = {"--job-id={job_id}", "{jobid}"};
      }),
      StatusIs(kInvalid, "args: \"{jobid}\" has {jobid}; the placeholders"));
  EXPECT_THAT(ValidateWith([](auto& o) { o.command = {}; }),
              StatusIs(kInvalid, "command:"));
  EXPECT_THAT(ValidateWith([](auto& o) { o.cpu_request = "4"; }),
              StatusIs(kInvalid, "cpu_request: \"4\" exceeds cpu_limit \"2\""));
  EXPECT_THAT(ValidateWith([](auto& o) { o.memory_limit = "8 GB"; }),
              StatusIs(kInvalid,
                       "memory_limit: \"8 GB\" is not a Kubernetes "
                       "quantity"));
  EXPECT_THAT(
      ValidateWith([](auto& o) {
        o.node_selector = {{"-bad", "x"}};
      }),
      StatusIs(kInvalid, "node_selector: \"-bad=x\" is not a label key"));
  EXPECT_THAT(ValidateWith([](auto& o) { o.job_namespace = "Bnn_Serve"; }),
              StatusIs(kInvalid,
                       "job_namespace: \"Bnn_Serve\" is not a "
                       "DNS-1123 label"));
  EXPECT_THAT(ValidateWith([](auto& o) { o.service_account = "Runner"; }),
              StatusIs(kInvalid, "service_account"));
  EXPECT_THAT(ValidateWith([](auto& o) { o.job_name_prefix = "Train-"; }),
              StatusIs(kInvalid, "job_name_prefix"));
  EXPECT_THAT(ValidateWith([](auto& o) { o.run_as_user = 0; }),
              StatusIs(kInvalid, "run_as_user: 0 must be >= 1"));
  EXPECT_THAT(ValidateWith([](auto& o) { o.blob_mount_path = "blobs"; }),
              StatusIs(kInvalid, "blob_mount_path"));
  EXPECT_THAT(ValidateWith([](auto& o) {
                o.env = {{"BNN_METADATA", "x"}};
              }),
              StatusIs(kInvalid, "env: \"BNN_METADATA\""));
  EXPECT_THAT(ValidateWith([](auto& o) { o.metadata_secret_key = "a/b"; }),
              StatusIs(kInvalid, "metadata_secret_key"));
  EXPECT_THAT(ValidateWith([](auto& o) { o.active_deadline_seconds = -1; }),
              StatusIs(kInvalid, "active_deadline_seconds: -1 must be >= 0"));
  EXPECT_THAT(ValidateWith([](auto& o) { o.ttl_seconds_after_finished = -2; }),
              StatusIs(kInvalid, "ttl_seconds_after_finished: -2"));
  // Empty quantities are not set at all, and allowed.
  EXPECT_TRUE(
      ValidateWith([](auto& o) { o.cpu_request = o.cpu_limit = ""; }).ok());
}

TEST(LauncherOptionsTest, ParsesEveryKindOfFieldFromJson) {
  absl::StatusOr<LauncherOptions> options = ParseLauncherOptionsJson(R"({
    "api_server": "https://10.96.0.1:443",
    "job_namespace": "bnn-training",
    "image": "registry.example/bnn-serve:0.1.0",
    "image_pull_policy": "Always",
    "args": ["--job-id={job_id}", "--blob-dir={blob_dir}"],
    "cpu_request": "500m", "cpu_limit": "4",
    "node_selector": {"kubernetes.io/arch": "amd64"},
    "env": {"OMP_NUM_THREADS": "4"},
    "connect_timeout": 2.5,
    "status_poll_interval": 10,
    "backoff_limit": 0,
    "ttl_seconds_after_finished": -1
  })");
  ASSERT_TRUE(options.ok()) << options.status();
  EXPECT_EQ(options->api_server, "https://10.96.0.1:443");
  EXPECT_EQ(options->job_namespace, "bnn-training");
  EXPECT_EQ(options->image_pull_policy, "Always");
  EXPECT_THAT(options->args,
              ElementsAre("--job-id={job_id}", "--blob-dir={blob_dir}"));
  EXPECT_EQ(options->cpu_request, "500m");
  EXPECT_THAT(options->node_selector,
              ElementsAre(Pair("kubernetes.io/arch", "amd64")));
  EXPECT_THAT(options->env, ElementsAre(Pair("OMP_NUM_THREADS", "4")));
  EXPECT_EQ(options->connect_timeout, absl::Milliseconds(2500));
  EXPECT_EQ(options->status_poll_interval, absl::Seconds(10));
  EXPECT_EQ(options->backoff_limit, 0);
  EXPECT_EQ(options->ttl_seconds_after_finished, -1);
  // Untouched fields keep their defaults.
  EXPECT_EQ(options->memory_limit, "8Gi");
  EXPECT_EQ(options->token_file,
            "/var/run/secrets/kubernetes.io/serviceaccount/token");
}

TEST(LauncherOptionsTest, JsonErrorsNameTheKey) {
  const absl::StatusCode kInvalid = absl::StatusCode::kInvalidArgument;
  EXPECT_THAT(
      ParseLauncherOptionsJson("{\"image\": \"x\", \"imagee\": 1}").status(),
      StatusIs(kInvalid,
               "imagee: unknown key; the known keys are "
               "api_server, token_file"));
  EXPECT_THAT(
      ParseLauncherOptionsJson("{\"image\": \"x\", \"backoff_limit\": \"3\"}")
          .status(),
      StatusIs(kInvalid, "backoff_limit: must be an integer"));
  EXPECT_THAT(
      ParseLauncherOptionsJson("{\"image\": \"x\", \"args\": \"a\"}").status(),
      StatusIs(kInvalid, "args: must be a list of strings"));
  EXPECT_THAT(ParseLauncherOptionsJson(
                  "{\"image\": \"x\", \"node_selector\": {\"a\": 1}}")
                  .status(),
              StatusIs(kInvalid, "node_selector.a: must be a string"));
  EXPECT_THAT(ParseLauncherOptionsJson(
                  "{\"image\": \"x\", \"request_timeout\": \"30s\"}")
                  .status(),
              StatusIs(kInvalid,
                       "request_timeout: must be a number of "
                       "seconds"));
  EXPECT_THAT(ParseLauncherOptionsJson("{\"image\": 3}").status(),
              StatusIs(kInvalid, "image: must be a string"));
  EXPECT_THAT(ParseLauncherOptionsJson("{\"image\": \"x\",").status(),
              StatusIs(kInvalid, "not valid JSON"));
  EXPECT_THAT(ParseLauncherOptionsJson("[]").status(),
              StatusIs(kInvalid, "must be a JSON object"));
  // Validate() runs on the result.
  EXPECT_THAT(ParseLauncherOptionsJson("{\"backoff_limit\": 1}").status(),
              StatusIs(kInvalid, "image: must name the bnn-serve image"));
}

TEST(LauncherOptionsTest, LoadsAFileAndNamesItInErrors) {
  TempDir dir;
  const std::string path = dir.File("launcher.json");
  std::ofstream(path) << "{\"image\": \"bnn-serve:1\", \"backoff_limit\": -1}";
  EXPECT_THAT(LoadLauncherOptionsFile(path).status(),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       path + ": kubernetes launcher option backoff_limit: "
                              "-1 is outside [0, 100]"));
  std::ofstream(path) << "{\"image\": \"bnn-serve:1\"}";
  absl::StatusOr<LauncherOptions> options = LoadLauncherOptionsFile(path);
  ASSERT_TRUE(options.ok()) << options.status();
  EXPECT_EQ(options->image, "bnn-serve:1");
  EXPECT_THAT(LoadLauncherOptionsFile(dir.File("missing.json")).status(),
              StatusIs(absl::StatusCode::kNotFound, "missing.json"));
}

TEST(LauncherOptionsTest, AppliesKeyEqualsValueOverrides) {
  LauncherOptions options = Valid();
  ASSERT_TRUE(ApplyLauncherOption("image=bnn-serve:2", &options).ok());
  EXPECT_EQ(options.image, "bnn-serve:2");
  // A string field takes the text as it is, '=' included.
  ASSERT_TRUE(ApplyLauncherOption("job_namespace=a=b", &options).ok());
  EXPECT_EQ(options.job_namespace, "a=b");
  ASSERT_TRUE(ApplyLauncherOption("backoff_limit=5", &options).ok());
  EXPECT_EQ(options.backoff_limit, 5);
  ASSERT_TRUE(
      ApplyLauncherOption("node_selector={\"pool\":\"gpu\"}", &options).ok());
  EXPECT_THAT(options.node_selector, ElementsAre(Pair("pool", "gpu")));
  ASSERT_TRUE(ApplyLauncherOption("request_timeout=45", &options).ok());
  EXPECT_EQ(options.request_timeout, absl::Seconds(45));
  EXPECT_THAT(ApplyLauncherOption("backoff_limit=three", &options),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       "backoff_limit: \"three\" is not a JSON value"));
  EXPECT_THAT(ApplyLauncherOption("no_such=1", &options),
              StatusIs(absl::StatusCode::kInvalidArgument, "no_such: unknown"));
  EXPECT_THAT(ApplyLauncherOption("image", &options),
              StatusIs(absl::StatusCode::kInvalidArgument, "not key=value"));
  // Overrides are validated together afterwards.
  EXPECT_THAT(options.Validate(),
              StatusIs(absl::StatusCode::kInvalidArgument, "job_namespace"));
}

TEST(LauncherOptionsTest, ResolvesTheInClusterServerAndNamespace) {
  TempDir dir;
  LauncherOptions options = Valid();
  options.namespace_file = dir.File("namespace");
  std::ofstream(options.namespace_file) << "bnn-serve\n";
  setenv("KUBERNETES_SERVICE_HOST", "10.96.0.1", 1);
  setenv("KUBERNETES_SERVICE_PORT", "443", 1);
  absl::StatusOr<LauncherOptions> resolved = ResolveInCluster(options);
  ASSERT_TRUE(resolved.ok()) << resolved.status();
  EXPECT_EQ(resolved->api_server, "https://10.96.0.1:443");
  EXPECT_EQ(resolved->job_namespace, "bnn-serve");

  setenv("KUBERNETES_SERVICE_HOST", "fd00::1", 1);
  resolved = ResolveInCluster(options);
  ASSERT_TRUE(resolved.ok());
  EXPECT_EQ(resolved->api_server, "https://[fd00::1]:443");

  unsetenv("KUBERNETES_SERVICE_HOST");
  unsetenv("KUBERNETES_SERVICE_PORT");
  resolved = ResolveInCluster(options);
  ASSERT_TRUE(resolved.ok());
  EXPECT_EQ(resolved->api_server, "https://kubernetes.default.svc");

  // Set values are kept.
  options.api_server = "https://api.example:6443";
  options.job_namespace = "jobs";
  resolved = ResolveInCluster(options);
  ASSERT_TRUE(resolved.ok());
  EXPECT_EQ(resolved->api_server, "https://api.example:6443");
  EXPECT_EQ(resolved->job_namespace, "jobs");

  options.job_namespace = "";
  options.namespace_file = dir.File("absent");
  EXPECT_THAT(ResolveInCluster(options).status(),
              StatusIs(absl::StatusCode::kFailedPrecondition,
                       "namespace_file " + dir.File("absent")));
}

// docs/deploy.md, "Training as Kubernetes Jobs": its example parses, and
// its table documents exactly the keys there are.
TEST(LauncherOptionsTest, TheDocumentedConfigurationIsTrue) {
  const std::string docs =
      testutil::ReadFileOrEmpty(BNN_SOURCE_DIR "/docs/deploy.md");
  const size_t section = docs.find("### Training as Kubernetes Jobs");
  ASSERT_NE(section, std::string::npos);
  const size_t start = docs.find("```json\n", section);
  const size_t end = docs.find("```\n", start + 8);
  ASSERT_NE(start, std::string::npos);
  ASSERT_NE(end, std::string::npos);
  absl::StatusOr<LauncherOptions> example =
      ParseLauncherOptionsJson(docs.substr(start + 8, end - start - 8));
  ASSERT_TRUE(example.ok()) << example.status();
  EXPECT_EQ(example->service_account, "bnn-train");

  // The known keys, as the unknown-key error lists them.
  const absl::Status unknown = ParseLauncherOptionsJson("{\"?\": 0}").status();
  const std::string known_text(absl::StripPrefix(
      unknown.message().substr(unknown.message().find("the known keys are ")),
      "the known keys are "));
  std::set<std::string> known = absl::StrSplit(known_text, ", ");
  ASSERT_GT(known.size(), 20u);
  // The table's first column: `key`, `key` | ...
  std::set<std::string> documented;
  const size_t table = docs.find("| Key | Default | Meaning |", section);
  ASSERT_NE(table, std::string::npos);
  for (absl::string_view line : absl::StrSplit(
           docs.substr(table, docs.find("\n\n", table) - table), '\n')) {
    const std::vector<absl::string_view> cells = absl::StrSplit(line, '|');
    if (cells.size() < 3 || !absl::StrContains(cells[1], "`")) continue;
    for (absl::string_view key : absl::StrSplit(cells[1], ',')) {
      documented.insert(
          std::string(absl::StripAsciiWhitespace(absl::StripSuffix(
              absl::StripPrefix(absl::StripAsciiWhitespace(key), "`"), "`"))));
    }
  }
  EXPECT_EQ(documented, known);
}

TEST(LauncherOptionsTest, ParsesQuantities) {
  EXPECT_THAT(*ParseQuantity("250m"), DoubleEq(0.25));
  EXPECT_THAT(*ParseQuantity("2"), DoubleEq(2));
  EXPECT_THAT(*ParseQuantity("1.5"), DoubleEq(1.5));
  EXPECT_THAT(*ParseQuantity("2Gi"), DoubleEq(2.0 * (1 << 30)));
  EXPECT_THAT(*ParseQuantity("512Mi"), DoubleEq(512.0 * (1 << 20)));
  EXPECT_THAT(*ParseQuantity("1G"), DoubleEq(1e9));
  EXPECT_THAT(*ParseQuantity("1e3"), DoubleEq(1000));
  EXPECT_THAT(*ParseQuantity(".5"), DoubleEq(0.5));
  for (const char* bad :
       {"", "Gi", "1.2.3", "abc", "1 Gi", "1gi", "1e", "--1"}) {
    EXPECT_THAT(ParseQuantity(bad).status(),
                StatusIs(absl::StatusCode::kInvalidArgument,
                         "is not a Kubernetes quantity"))
        << bad;
  }
}

TEST(LauncherOptionsTest, ChecksNamesAndLabels) {
  EXPECT_TRUE(IsDns1123Label("bnn-train-job-0123456789abcdef"));
  EXPECT_FALSE(IsDns1123Label("Bnn"));
  EXPECT_FALSE(IsDns1123Label("-bnn"));
  EXPECT_FALSE(IsDns1123Label(std::string(64, 'a')));
  EXPECT_TRUE(IsDns1123Subdomain("bnn.example.com"));
  EXPECT_FALSE(IsDns1123Subdomain("bnn..example"));
  EXPECT_TRUE(IsLabelValue(""));
  EXPECT_TRUE(IsLabelValue("job-0123_4.5"));
  EXPECT_FALSE(IsLabelValue("job-"));
  EXPECT_TRUE(IsLabelKey("app.kubernetes.io/name"));
  EXPECT_TRUE(IsLabelKey("pool"));
  EXPECT_FALSE(IsLabelKey("Example.com/pool"));
  EXPECT_FALSE(IsLabelKey("example.com/"));
}

}  // namespace
}  // namespace bnn::server::kubernetes
