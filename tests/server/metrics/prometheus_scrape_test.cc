// A real Prometheus scrapes a real bnn-server: the exposition, the HTTP
// endpoint and the flags work together as deployed.
#include <fstream>
#include <memory>
#include <string>

#include <absl/strings/str_cat.h>
#include <absl/time/clock.h>
#include <gmock/gmock.h>
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>

#include "bnn/v1/bnn_service.grpc.pb.h"

#include "tests/server/server_test_util.h"
#include "tests/test_util/http_client.h"

namespace bnn::server {
namespace {

using ::bnn::server::testutil::ReadFileOrEmpty;
using ::bnn::server::testutil::TempDir;
using ::bnn::testing::ChildProcess;
using ::bnn::testing::PickFreePort;
using ::bnn::testing::ServerProcess;
using ::testing::HasSubstr;

// Queries Prometheus' HTTP API until the result contains every one of
// `expected`; returns the last response body.
std::string QueryUntil(int port, const std::string& query,
                       const std::vector<std::string>& expected,
                       absl::Time deadline) {
  const std::string address = absl::StrCat("127.0.0.1:", port);
  const std::string path =
      bnn::testing::PathWithQuery("/api/v1/query", {{"query", query}});
  std::string body;
  while (absl::Now() < deadline) {
    const absl::StatusOr<bnn::testing::HttpResponse> result =
        bnn::testing::HttpGet(address, path, absl::Seconds(5));
    if (result.ok() && result->status == 200) {
      body = result->body;
      bool all = true;
      for (const std::string& s : expected) {
        all &= body.find(s) != std::string::npos;
      }
      if (all) return body;
    }
    absl::SleepFor(absl::Milliseconds(250));
  }
  return body;
}

TEST(PrometheusScrapeTest, PrometheusScrapesBnnServer) {
  TempDir dir;
  const int metrics_port = PickFreePort();
  absl::StatusOr<std::unique_ptr<ServerProcess>> server = ServerProcess::Start(
      BNN_SERVER_PATH, dir.path() + "/data", dir.path() + "/server.log",
      {"--metrics-listen", absl::StrCat("127.0.0.1:", metrics_port)});
  ASSERT_TRUE(server.ok()) << server.status();
  const std::string address = (*server)->address();
  {
    // One RPC, so that a labelled series exists to be scraped.
    auto stub = v1::BnnService::NewStub(
        grpc::CreateChannel(address, grpc::InsecureChannelCredentials()));
    grpc::ClientContext context;
    v1::ListMethodsResponse response;
    ASSERT_TRUE(stub->ListMethods(&context, {}, &response).ok());
  }

  const std::string config = dir.path() + "/prometheus.yml";
  std::ofstream(config) << "global:\n"
                        << "  scrape_interval: 1s\n"
                        << "scrape_configs:\n"
                        << "  - job_name: bnn\n"
                        << "    static_configs:\n"
                        << "      - targets: ['127.0.0.1:" << metrics_port
                        << "']\n";
  const int prometheus_port = PickFreePort();
  const std::string prometheus_log = dir.path() + "/prometheus.log";
  absl::StatusOr<std::unique_ptr<ChildProcess>> prometheus =
      ChildProcess::Start(
          {BNN_PROMETHEUS_PATH, "--config.file=" + config,
           "--storage.tsdb.path=" + dir.path() + "/tsdb",
           absl::StrCat("--web.listen-address=127.0.0.1:", prometheus_port)},
          prometheus_log);
  ASSERT_TRUE(prometheus.ok()) << prometheus.status();

  const absl::Time deadline = absl::Now() + absl::Seconds(30);
  const std::string up =
      QueryUntil(prometheus_port, "up{job=\"bnn\"}", {"\"1\"]"}, deadline);
  EXPECT_THAT(up, HasSubstr("\"value\":[")) << ReadFileOrEmpty(prometheus_log);
  EXPECT_THAT(up, HasSubstr(",\"1\"]"));
  const std::string requests =
      QueryUntil(prometheus_port, "bnn_rpc_requests_total{rpc=\"ListMethods\"}",
                 {"\"code\":\"OK\""}, deadline);
  EXPECT_THAT(requests, HasSubstr("\"code\":\"OK\""));
  EXPECT_THAT(requests, HasSubstr(",\"1\"]"));
  const std::string build =
      QueryUntil(prometheus_port, "bnn_build_info", {"\"version\":"}, deadline);
  EXPECT_THAT(build, HasSubstr("\"version\":\"0.1.0\""));
  // The process collector's metrics and the store sizes are scraped too.
  const std::string rss =
      QueryUntil(prometheus_port, "process_resident_memory_bytes",
                 {"\"value\":["}, deadline);
  EXPECT_THAT(rss, HasSubstr("\"job\":\"bnn\""));
  const std::string store =
      QueryUntil(prometheus_port, "bnn_store_bytes{store=\"blobs\"}",
                 {"\"value\":["}, deadline);
  EXPECT_THAT(store, HasSubstr("\"store\":\"blobs\""));
}

}  // namespace
}  // namespace bnn::server
