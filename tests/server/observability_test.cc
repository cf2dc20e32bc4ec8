// The bnn-server binary's observability (issue 12): the metrics port's
// /metrics, /healthz and /readyz after start, --log-format=json lines with
// their fields, request ids sent back and logged, --help and --version.
// (Readiness while draining and under the watchdog: lifecycle_test.cc.)
#include <memory>
#include <signal.h>
#include <string>
#include <vector>

#include <absl/strings/match.h>
#include <absl/strings/str_cat.h>
#include <absl/strings/str_split.h>
#include <gmock/gmock.h>
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "bnn/v1/bnn_service.grpc.pb.h"

#include "tests/server/server_binary.h"
#include "tests/server/server_test_util.h"
#include "tests/test_util/http_client.h"

namespace bnn::server {
namespace {

using ::bnn::server::testutil::HealthCheck;
using ::bnn::server::testutil::NewClientChannel;
using ::bnn::server::testutil::ReadFileOrEmpty;
using ::bnn::server::testutil::TempDir;
using ::bnn::testing::CommandResult;
using ::bnn::testing::HttpGet;
using ::bnn::testing::HttpResponse;
using ::bnn::testing::RunCommand;
using ::bnn::testing::ServerProcess;
using ::testing::HasSubstr;
using ::testing::MatchesRegex;

class ObservabilityTest : public ::testing::Test {
 protected:
  void Start(std::vector<std::string> extra_flags) {
    absl::StatusOr<std::unique_ptr<ServerProcess>> server =
        ServerProcess::Start(BNN_SERVER_PATH, dir_.path() + "/data", log_path(),
                             extra_flags);
    ASSERT_TRUE(server.ok()) << server.status() << "\n" << Log();
    server_ = *std::move(server);
    channel_ = NewClientChannel(server_->address());
    stub_ = v1::BnnService::NewStub(channel_);
  }
  int Stop() {
    const absl::StatusOr<int> code = server_->Stop(SIGTERM);
    EXPECT_TRUE(code.ok()) << code.status() << "\n" << Log();
    return code.value_or(-1);
  }
  // host:port of the metrics port.
  std::string MetricsAddress() const {
    const std::string& url = server_->metrics_url();
    EXPECT_TRUE(absl::StartsWith(url, "http://")) << url;
    return url.substr(7, url.find("/metrics") - 7);
  }
  HttpResponse Get(const std::string& path) {
    absl::StatusOr<HttpResponse> response = HttpGet(MetricsAddress(), path);
    EXPECT_TRUE(response.ok()) << response.status();
    return response.value_or(HttpResponse());
  }
  std::string log_path() const { return dir_.path() + "/server.log"; }
  std::string Log() const { return ReadFileOrEmpty(log_path()); }

  TempDir dir_;
  std::unique_ptr<ServerProcess> server_;
  std::shared_ptr<grpc::Channel> channel_;
  std::unique_ptr<v1::BnnService::Stub> stub_;
};

TEST_F(ObservabilityTest, MetricsPortServesMetricsAndProbes) {
  Start({"--metrics-listen=127.0.0.1:0"});
  EXPECT_EQ(*HealthCheck(channel_, ""), 1);
  const HttpResponse live = Get("/healthz");
  EXPECT_EQ(live.status, 200);
  EXPECT_EQ(live.body, "ok\n");
  const HttpResponse ready = Get("/readyz");
  EXPECT_EQ(ready.status, 200);
  EXPECT_EQ(ready.body, "ok\n");

  grpc::ClientContext context;
  v1::ListMethodsResponse methods;
  ASSERT_TRUE(stub_->ListMethods(&context, {}, &methods).ok());
  const HttpResponse metrics = Get("/metrics");
  EXPECT_EQ(metrics.status, 200);
  for (const char* series :
       {"bnn_rpc_requests_total{code=\"OK\",rpc=\"ListMethods\"} 1\n",
        "bnn_build_info{version=\"0.1.0\"} 1\n", "bnn_compute_queue_length 0\n",
        "bnn_store_bytes{store=\"blobs\"} ", "bnn_store_quarantined_blobs 0\n",
        "bnn_predictor_cache_bytes 0\n", "process_resident_memory_bytes ",
        "process_cpu_seconds_total ", "process_open_fds ", "process_max_fds ",
        "process_start_time_seconds ", "process_virtual_memory_bytes "}) {
    EXPECT_THAT(metrics.body, HasSubstr(series));
  }
  EXPECT_EQ(Get("/nothing").status, 404);
  EXPECT_EQ(Stop(), 0);
}

// Every line of a --log-format=json log is one JSON object with ts, level
// and msg; RPCs and job state changes carry their fields.
TEST_F(ObservabilityTest, JsonLogLinesParseAndCarryRequestIds) {
  Start({"--log-format=json", "--log-level=debug"});
  // A request id of the client's, sent back in the initial metadata.
  grpc::ClientContext named;
  named.AddMetadata("x-request-id", "trace-0001");
  v1::ListMethodsResponse methods;
  ASSERT_TRUE(stub_->ListMethods(&named, {}, &methods).ok());
  const auto echoed = named.GetServerInitialMetadata().find("x-request-id");
  ASSERT_NE(echoed, named.GetServerInitialMetadata().end());
  EXPECT_EQ(std::string(echoed->second.data(), echoed->second.size()),
            "trace-0001");
  // Without one, the server makes one up and returns it.
  grpc::ClientContext anonymous;
  ASSERT_TRUE(stub_->ListMethods(&anonymous, {}, &methods).ok());
  const auto made = anonymous.GetServerInitialMetadata().find("x-request-id");
  ASSERT_NE(made, anonymous.GetServerInitialMetadata().end());
  const std::string made_id(made->second.data(), made->second.size());
  EXPECT_THAT(made_id, MatchesRegex("[0-9a-f]{32}"));
  EXPECT_EQ(*HealthCheck(channel_, ""), 1);  // logged at debug

  // A short training job: its state changes are logged with fields.
  const absl::StatusOr<std::string> dataset = testutil::UploadCubic(*stub_, 20);
  ASSERT_TRUE(dataset.ok()) << dataset.status();
  v1::StartTrainingRequest train;
  train.set_dataset_id(*dataset);
  train.set_method("slang");
  train.set_epochs(1);
  const absl::StatusOr<std::string> job_id =
      testutil::StartTraining(*stub_, train);
  ASSERT_TRUE(job_id.ok()) << job_id.status();
  const absl::StatusOr<v1::Job> job =
      testutil::WaitForJob(*stub_, *job_id, [](const v1::Job& j) {
        return j.state() == v1::JOB_STATE_SUCCEEDED ||
               j.state() == v1::JOB_STATE_FAILED;
      });
  ASSERT_TRUE(job.ok()) << job.status();
  EXPECT_EQ(Stop(), 0);

  std::vector<nlohmann::json> lines;
  for (absl::string_view line : absl::StrSplit(Log(), '\n')) {
    if (line.empty()) continue;
    nlohmann::json json = nlohmann::json::parse(line, nullptr, false);
    ASSERT_FALSE(json.is_discarded()) << "not JSON: " << line;
    ASSERT_TRUE(json.is_object()) << line;
    EXPECT_TRUE(json["ts"].is_string()) << line;
    EXPECT_TRUE(json["level"].is_string()) << line;
    EXPECT_TRUE(json["msg"].is_string()) << line;
    lines.push_back(std::move(json));
  }
  auto find = [&lines](const std::string& msg, const std::string& key,
                       const std::string& value) -> const nlohmann::json* {
    for (const nlohmann::json& line : lines) {
      if (line["msg"] == msg && line.contains(key) && line[key] == value) {
        return &line;
      }
    }
    return nullptr;
  };
  const nlohmann::json* rpc = find("rpc", "request_id", "trace-0001");
  ASSERT_NE(rpc, nullptr) << Log();
  EXPECT_EQ((*rpc)["level"], "info");
  EXPECT_EQ((*rpc)["rpc"], "/bnn.v1.BnnService/ListMethods");
  EXPECT_EQ((*rpc)["code"], "OK");
  EXPECT_TRUE((*rpc)["latency_ms"].is_number());
  EXPECT_THAT((*rpc)["peer"].get<std::string>(), HasSubstr("127.0.0.1"));
  EXPECT_NE(find("rpc", "request_id", made_id), nullptr);
  const nlohmann::json* health =
      find("rpc", "rpc", "/grpc.health.v1.Health/Check");
  ASSERT_NE(health, nullptr);
  EXPECT_EQ((*health)["level"], "debug");

  for (const char* state : {"queued", "running", "succeeded"}) {
    SCOPED_TRACE(state);
    const nlohmann::json* change = nullptr;
    for (const nlohmann::json& line : lines) {
      if (line.contains("job_id") && line["job_id"] == *job_id &&
          line["state"] == state) {
        change = &line;
      }
    }
    ASSERT_NE(change, nullptr) << Log();
    EXPECT_EQ((*change)["method"], "slang");
  }
}

TEST_F(ObservabilityTest, TextLogsNameTheRequestId) {
  Start({});
  grpc::ClientContext context;
  context.AddMetadata("x-request-id", "text-id-7");
  v1::ListMethodsResponse methods;
  ASSERT_TRUE(stub_->ListMethods(&context, {}, &methods).ok());
  EXPECT_EQ(Stop(), 0);
  EXPECT_THAT(Log(), MatchesRegex(".*\\[info\\] rpc "
                                  "rpc=/bnn.v1.BnnService/ListMethods "
                                  "peer=[^ ]+ code=OK latency_ms=[^ ]+ "
                                  "request_id=text-id-7\n.*"));
}

TEST_F(ObservabilityTest, VersionNamesTheBuildCommit) {
  const absl::StatusOr<CommandResult> version = RunCommand(
      {BNN_SERVER_PATH, "--version"}, dir_.path(), absl::Seconds(10));
  ASSERT_TRUE(version.ok()) << version.status();
  EXPECT_EQ(version->exit_code, 0);
  EXPECT_THAT(version->out,
              MatchesRegex("bnn-server 0\\.1\\.0 \\(commit "
                           "([0-9a-f]{12}(-dirty)?|unknown)\\)\n"));
}

TEST_F(ObservabilityTest, HelpListsEveryFlagWithItsDefault) {
  const absl::StatusOr<CommandResult> help =
      RunCommand({BNN_SERVER_PATH, "--help"}, dir_.path(), absl::Seconds(10));
  ASSERT_TRUE(help.ok()) << help.status();
  const std::string text = help->out + help->err;
  EXPECT_THAT(text, HasSubstr("Flags from server/main.cc:"));
  for (const char* flag :
       {"--listen", "--data_dir", "--metrics_listen", "--log_format",
        "--log_level", "--tls_cert", "--token_file", "--shutdown_grace"}) {
    EXPECT_THAT(text, HasSubstr(absl::StrCat(flag, " ("))) << flag;
  }
  EXPECT_THAT(text, HasSubstr("default: \"text\";"));
  EXPECT_THAT(text, HasSubstr("default: \"127.0.0.1:9464\";"));
  // Stable: the same text on every run and from every build directory.
  const absl::StatusOr<CommandResult> again =
      RunCommand({BNN_SERVER_PATH, "--help"}, dir_.path(), absl::Seconds(10));
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(again->out + again->err, text);
  EXPECT_THAT(text, ::testing::Not(HasSubstr("/work/")));
}

TEST_F(ObservabilityTest, BadLogFlagsStopTheStart) {
  for (const auto& [flag, message] :
       std::vector<std::pair<std::string, std::string>>{
           {"--log-format=xml",
            "--log-format = 'xml' must be one of: text, json"},
           {"--log-level=verbose",
            "--log-level = 'verbose' must be one of: trace, debug, info"}}) {
    const absl::StatusOr<CommandResult> result =
        RunCommand({BNN_SERVER_PATH, "--data-dir", dir_.path() + "/data", flag},
                   dir_.path(), absl::Seconds(15));
    ASSERT_TRUE(result.ok()) << result.status();
    EXPECT_EQ(result->exit_code, 1) << flag;
    EXPECT_THAT(result->err, HasSubstr(message));
  }
}

}  // namespace
}  // namespace bnn::server
