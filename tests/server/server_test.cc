// The Server class: options validation, start on free ports (gRPC and
// metrics), a port that is taken, shutdown, and reopening the same data
// directory. The RPCs themselves are tested through ServiceTest.
#include "server/server.h"

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include <gmock/gmock.h>
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>

#include "bnn/v1/bnn_service.grpc.pb.h"

#include "server/common/address.h"
#include "tests/server/server_test_util.h"
#include "tests/test_util/http_client.h"

namespace bnn::server {
namespace {

using ::bnn::server::testutil::CubicDataset;
using ::bnn::server::testutil::StatusIs;
using ::bnn::server::testutil::TempDir;
using ::testing::HasSubstr;
using ::testing::MatchesRegex;

class ServerTest : public ::testing::Test {
 protected:
  Server::Options Options() const {
    Server::Options options;
    options.data_dir = dir_.path() + "/data";
    options.listen = "127.0.0.1:0";
    options.metrics_listen = "127.0.0.1:0";
    return options;
  }

  std::unique_ptr<Server> StartOrDie(const Server::Options& options) {
    absl::StatusOr<std::unique_ptr<Server>> server = Server::Create(options);
    EXPECT_TRUE(server.ok()) << server.status();
    if (!server.ok()) return nullptr;
    const absl::Status started = (*server)->Start();
    EXPECT_TRUE(started.ok()) << started;
    return *std::move(server);
  }

  TempDir dir_;
};

TEST_F(ServerTest, ValidateNamesTheFlagAndItsBound) {
  std::vector<std::pair<void (*)(Server::Options*), std::string>> cases = {
      {[](Server::Options* o) { o->data_dir.clear(); },
       "--data-dir is required"},
      {[](Server::Options* o) { o->listen = "nonsense"; },
       "'nonsense' is not host:port"},
      {[](Server::Options* o) { o->max_concurrent_jobs = 0; },
       "--max-concurrent-jobs = 0 must be >= 1"},
      {[](Server::Options* o) { o->job_process.threads = -1; },
       "--threads = -1 must be >= 0"},
      {[](Server::Options* o) { o->job_process.checkpoint_seconds = -1; },
       "--checkpoint-seconds = -1 must be >= 0"},
      {[](Server::Options* o) { o->job_process.job_heartbeat_seconds = 0; },
       "--job-heartbeat-seconds = 0 must be in (0, "},
      {[](Server::Options* o) { o->job_process.job_takeover_seconds = 5; },
       "--job-takeover-seconds = 5 must be > --job-heartbeat-seconds = 5"},
      {[](Server::Options* o) { o->compute_workers = 0; },
       "--compute-workers = 0 must be >= 1"},
      {[](Server::Options* o) { o->predict_cache_bytes = -1; },
       "--predict-cache-bytes = -1 must be >= 0"},
      {[](Server::Options* o) { o->predict_precision = "float16"; },
       "--predict-precision = 'float16' must be one of: float64, float32"},
      {[](Server::Options* o) { o->predict_chunk_rows = 16385; },
       "--predict-chunk-rows = 16385 must be in [1, 16384]"},
      {[](Server::Options* o) { o->limits.max_upload_rows = 0; },
       "--max-upload-rows = 0 must be >= 1"},
      {[](Server::Options* o) { o->limits.max_predict_rows = 0; },
       "--max-predict-rows = 0 must be >= 1"},
      {[](Server::Options* o) { o->limits.max_predict_samples = 0; },
       "--max-predict-samples = 0 must be >= 1"},
      {[](Server::Options* o) { o->limits.max_message_bytes = 0; },
       "--max-message-bytes = 0 must be in [1, 2147483647]"},
      {[](Server::Options* o) {
         o->limits.max_snapshot_bytes = int64_t{4} << 30;
       },
       "--max-snapshot-bytes = 4294967296 must be in [1, 2147483648]"},
      {[](Server::Options* o) { o->memory_budget_bytes = -1; },
       "--memory-budget-bytes = -1 must be >= 0"},
      {[](Server::Options* o) { o->max_request_seconds = 0; },
       "--max-request-seconds = 0 must be in (0, 31536000] seconds"},
      {[](Server::Options* o) { o->shutdown_grace_seconds = -1; },
       "--shutdown-grace = -1 must be in (0, 31536000] seconds"},
      {[](Server::Options* o) { o->log_format = "xml"; },
       "--log-format = 'xml' must be one of: text, json"},
      {[](Server::Options* o) { o->log_level = "loud"; },
       "--log-level = 'loud' must be one of: trace, debug, info, warn, "
       "error, critical"},
      {[](Server::Options* o) { o->metrics_listen = "[::1]:0"; },
       "--metrics-listen [::1]:0: the HTTP endpoints take an IPv4 "
       "address or a host name"},
      {[](Server::Options* o) { o->metrics_listen = "9464"; },
       "--metrics-listen '9464' is not host:port"},
      {[](Server::Options* o) { o->http_listen = "[::1]:0"; },
       "--http-listen [::1]:0: the HTTP endpoints take an IPv4 "
       "address or a host name"},
      {[](Server::Options* o) {
         o->http_listen = "0.0.0.0:0";
         o->tls.cert_file = "cert.pem";
         o->tls.key_file = "key.pem";
       },
       "--http-listen 0.0.0.0:0 is not a loopback address, and --tls-cert "
       "is given"},
  };
  EXPECT_TRUE(Options().Validate().ok());
  for (const auto& [change, message] : cases) {
    Server::Options options = Options();
    change(&options);
    EXPECT_THAT(options.Validate(),
                StatusIs(absl::StatusCode::kInvalidArgument, message));
    EXPECT_THAT(Server::Create(options).status(),
                StatusIs(absl::StatusCode::kInvalidArgument, message));
  }
}

TEST_F(ServerTest, ServesGrpcAndMetricsOnTheBoundPorts) {
  std::unique_ptr<Server> server = StartOrDie(Options());
  ASSERT_NE(server, nullptr);
  EXPECT_GT(server->port(), 0);
  EXPECT_EQ(server->address(), JoinHostPort("127.0.0.1", server->port()));

  auto stub = v1::BnnService::NewStub(grpc::CreateChannel(
      server->address(), grpc::InsecureChannelCredentials()));
  grpc::ClientContext context;
  v1::ListMethodsResponse methods;
  ASSERT_TRUE(stub->ListMethods(&context, {}, &methods).ok());
  EXPECT_GE(methods.methods_size(), 1);

  std::string host;
  int metrics_port = 0;
  ASSERT_TRUE(
      SplitHostPort(server->metrics_address(), &host, &metrics_port).ok());
  EXPECT_GT(metrics_port, 0);
  const absl::StatusOr<bnn::testing::HttpResponse> scraped =
      bnn::testing::HttpGet(server->metrics_address(), "/metrics");
  ASSERT_TRUE(scraped.ok()) << scraped.status();
  EXPECT_THAT(scraped->body, HasSubstr("bnn_rpc_requests_total{code=\"OK\",rpc="
                                       "\"ListMethods\"} 1"));
  // Readiness agrees with health.
  const absl::StatusOr<bnn::testing::HttpResponse> ready =
      bnn::testing::HttpGet(server->metrics_address(), "/readyz");
  ASSERT_TRUE(ready.ok()) << ready.status();
  EXPECT_EQ(ready->status, 200);
  EXPECT_EQ(ready->body, "ok\n");
  EXPECT_TRUE(server->Readiness().ok);
  EXPECT_TRUE(server->serving());
  EXPECT_TRUE(server->Shutdown().ok());
  EXPECT_FALSE(server->serving());
  EXPECT_FALSE(server->Readiness().ok);
  EXPECT_THAT(server->Readiness().reason, HasSubstr("draining"));
  EXPECT_TRUE(server->Shutdown().ok());  // idempotent
}

TEST_F(ServerTest, EmptyMetricsListenDisablesTheEndpoint) {
  Server::Options options = Options();
  options.metrics_listen.clear();
  std::unique_ptr<Server> server = StartOrDie(options);
  ASSERT_NE(server, nullptr);
  EXPECT_EQ(server->metrics_address(), "");
}

TEST_F(ServerTest, TakenMetricsPortFailsStart) {
  std::unique_ptr<Server> first = StartOrDie(Options());
  ASSERT_NE(first, nullptr);
  // (gRPC binds with SO_REUSEPORT, so a taken gRPC port is not an error.)
  Server::Options options = Options();
  options.data_dir = dir_.path() + "/other";
  options.metrics_listen = first->metrics_address();
  std::unique_ptr<Server> second = *Server::Create(options);
  EXPECT_FALSE(second->Start().ok());
  EXPECT_TRUE(second->Shutdown().ok());
}

TEST_F(ServerTest, ReopensTheDataDirectory) {
  std::string dataset_id;
  {
    std::unique_ptr<Server> server = StartOrDie(Options());
    ASSERT_NE(server, nullptr);
    dataset_id =
        server->datasets().Create(CubicDataset(10), "cubic")->dataset_id();
  }
  std::unique_ptr<Server> server = StartOrDie(Options());
  ASSERT_NE(server, nullptr);
  EXPECT_EQ(server->datasets().size(), 1);
  EXPECT_TRUE(server->datasets().Get(dataset_id).ok());
}

}  // namespace
}  // namespace bnn::server
