#include "server/metrics/http_endpoint.h"

#include <atomic>
#include <memory>
#include <netinet/in.h>
#include <string>
#include <sys/socket.h>
#include <unistd.h>
#include <vector>

#include <absl/strings/str_cat.h>
#include <absl/time/clock.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "server/common/address.h"
#include "server/metrics/registry.h"
#include "tests/server/server_test_util.h"
#include "tests/test_util/http_client.h"

namespace bnn::server {
namespace {

using ::bnn::server::testutil::StatusIs;
using ::bnn::testing::HttpGet;
using ::bnn::testing::HttpResponse;
using ::testing::HasSubstr;
using ::testing::StartsWith;

std::unique_ptr<HttpEndpoint> StartOrDie(HttpEndpoint::Options options,
                                         const MetricsRegistry* registry) {
  absl::StatusOr<std::unique_ptr<HttpEndpoint>> endpoint =
      HttpEndpoint::Start(std::move(options), registry);
  EXPECT_TRUE(endpoint.ok()) << endpoint.status();
  return endpoint.ok() ? *std::move(endpoint) : nullptr;
}

HttpResponse GetOrDie(const std::string& address, const std::string& path,
                      const std::string& method = "GET") {
  absl::StatusOr<HttpResponse> response =
      HttpGet(address, path, absl::Seconds(10), method);
  EXPECT_TRUE(response.ok()) << response.status();
  return response.value_or(HttpResponse());
}

TEST(HttpEndpointTest, ServesTheRegistry) {
  MetricsRegistry registry;
  prometheus::Counter& hits = prometheus::BuildCounter()
                                  .Name("test_hits_total")
                                  .Help("Hits.")
                                  .Register(registry.families())
                                  .Add({});
  std::unique_ptr<HttpEndpoint> endpoint =
      StartOrDie({"127.0.0.1:0", nullptr, nullptr}, &registry);
  ASSERT_NE(endpoint, nullptr);
  std::string host;
  int port = 0;
  ASSERT_TRUE(SplitHostPort(endpoint->address(), &host, &port).ok());
  EXPECT_EQ(host, "127.0.0.1");
  EXPECT_GT(port, 0);

  hits.Increment(2);
  HttpResponse response = GetOrDie(endpoint->address(), "/metrics");
  EXPECT_EQ(response.status, 200);
  EXPECT_THAT(response.headers["content-type"],
              StartsWith("text/plain; version=0.0.4"));
  EXPECT_THAT(response.body, HasSubstr("test_hits_total 2\n"));
  // Every scrape serialises afresh.
  hits.Increment();
  EXPECT_THAT(GetOrDie(endpoint->address(), "/metrics").body,
              HasSubstr("test_hits_total 3\n"));
  // HEAD: the headers only.
  response = GetOrDie(endpoint->address(), "/metrics", "HEAD");
  EXPECT_EQ(response.status, 200);
  EXPECT_EQ(response.body, "");
  EXPECT_EQ(GetOrDie(endpoint->address(), "/other").status, 404);
  EXPECT_EQ(GetOrDie(endpoint->address(), "/").status, 404);
  EXPECT_EQ(GetOrDie(endpoint->address(), "/metrics/x").status, 404);
  EXPECT_EQ(GetOrDie(endpoint->address(), "/metrics", "POST").status, 405);
}

TEST(HttpEndpointTest, HealthProbesAnswer200Or503WithTheReason) {
  MetricsRegistry registry;
  std::atomic<bool> ready{false};
  HttpEndpoint::Options options;
  options.listen = "localhost:0";
  options.ready = [&ready]() -> HttpEndpoint::Health {
    if (ready) return {};
    return {false, "not ready: draining\nsecond line"};
  };
  std::unique_ptr<HttpEndpoint> endpoint = StartOrDie(options, &registry);
  ASSERT_NE(endpoint, nullptr);
  EXPECT_THAT(endpoint->address(), StartsWith("localhost:"));

  HttpResponse live = GetOrDie(endpoint->address(), "/healthz");
  EXPECT_EQ(live.status, 200);
  EXPECT_EQ(live.body, "ok\n");
  HttpResponse not_ready = GetOrDie(endpoint->address(), "/readyz");
  EXPECT_EQ(not_ready.status, 503);
  // One line: the reason's newline is escaped.
  EXPECT_EQ(not_ready.body, "not ready: draining\\nsecond line\n");
  EXPECT_THAT(not_ready.headers["content-type"], StartsWith("text/plain"));
  ready = true;
  EXPECT_EQ(GetOrDie(endpoint->address(), "/readyz").status, 200);
  EXPECT_EQ(GetOrDie(endpoint->address(), "/readyz", "HEAD").status, 200);
}

TEST(HttpEndpointTest, StopsOnDestruction) {
  MetricsRegistry registry;
  std::unique_ptr<HttpEndpoint> endpoint =
      StartOrDie({"127.0.0.1:0", nullptr, nullptr}, &registry);
  ASSERT_NE(endpoint, nullptr);
  const std::string address = endpoint->address();
  endpoint.reset();
  EXPECT_THAT(HttpGet(address, "/metrics").status(),
              StatusIs(absl::StatusCode::kUnavailable, "cannot connect"));
}

TEST(HttpEndpointTest, ReportsBadAddressesAndBindFailures) {
  MetricsRegistry registry;
  std::unique_ptr<HttpEndpoint> first =
      StartOrDie({"127.0.0.1:0", nullptr, nullptr}, &registry);
  ASSERT_NE(first, nullptr);
  // No SO_REUSEPORT: a second endpoint on the port fails.
  EXPECT_THAT(
      HttpEndpoint::Start({first->address(), nullptr, nullptr}, &registry)
          .status(),
      StatusIs(absl::StatusCode::kUnavailable,
               "cannot bind the metrics listener to " + first->address()));
  EXPECT_THAT(
      HttpEndpoint::Start({"no-port", nullptr, nullptr}, &registry).status(),
      StatusIs(absl::StatusCode::kInvalidArgument, "not host:port"));
  EXPECT_THAT(
      HttpEndpoint::Start({"[::1]:0", nullptr, nullptr}, &registry).status(),
      StatusIs(absl::StatusCode::kInvalidArgument, "without IPv6"));
  EXPECT_THAT(HttpEndpoint::CheckListen("[]:9464"),
              StatusIs(absl::StatusCode::kInvalidArgument, "needs a host"));
  EXPECT_TRUE(HttpEndpoint::CheckListen("0.0.0.0:9464").ok());
}

// A connection that sends nothing holds a thread for kRequestTimeoutMs only:
// with every thread held by one, a scrape still answers promptly.
TEST(HttpEndpointTest, HalfOpenConnectionsDoNotStallScrapes) {
  MetricsRegistry registry;
  std::unique_ptr<HttpEndpoint> endpoint =
      StartOrDie({"127.0.0.1:0", nullptr, nullptr}, &registry);
  ASSERT_NE(endpoint, nullptr);
  std::string host;
  int port = 0;
  ASSERT_TRUE(SplitHostPort(endpoint->address(), &host, &port).ok());
  std::vector<int> idle;
  for (int i = 0; i < HttpEndpoint::kThreads; ++i) {
    const int fd = socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in address{};
    address.sin_family = AF_INET;
    address.sin_port = htons(port);
    address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    ASSERT_EQ(
        connect(fd, reinterpret_cast<sockaddr*>(&address), sizeof(address)), 0);
    idle.push_back(fd);
  }
  const absl::Time start = absl::Now();
  const HttpResponse response = GetOrDie(endpoint->address(), "/metrics");
  const absl::Duration took = absl::Now() - start;
  for (const int fd : idle) close(fd);
  EXPECT_EQ(response.status, 200);
  // One round of request timeouts, with a margin for a busy machine.
  EXPECT_LT(took, absl::Milliseconds(3 * HttpEndpoint::kRequestTimeoutMs));
}

}  // namespace
}  // namespace bnn::server
