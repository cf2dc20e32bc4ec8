#include "server/metrics/http_exporter.h"

#include <httplib.h>
#include <memory>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "server/common/address.h"
#include "server/metrics/registry.h"
#include "tests/server/server_test_util.h"

namespace bnn::server {
namespace {

using ::bnn::server::testutil::StatusIs;
using ::testing::HasSubstr;
using ::testing::StartsWith;

TEST(HttpExporterTest, ServesTheRegistry) {
  Registry registry;
  Counter& hits =
      registry.AddCounter("test_hits_total", "Hits.").WithLabels({});
  absl::StatusOr<std::unique_ptr<HttpExporter>> exporter =
      HttpExporter::Start("127.0.0.1:0", &registry);
  ASSERT_TRUE(exporter.ok()) << exporter.status();
  std::string host;
  int port = 0;
  ASSERT_TRUE(SplitHostPort((*exporter)->address(), &host, &port).ok());
  EXPECT_EQ(host, "127.0.0.1");
  EXPECT_GT(port, 0);

  httplib::Client client(host, port);
  hits.Increment(2);
  httplib::Result response = client.Get("/metrics");
  ASSERT_TRUE(response);
  EXPECT_EQ(response->status, 200);
  EXPECT_THAT(response->get_header_value("Content-Type"),
              StartsWith("text/plain; version=0.0.4"));
  EXPECT_THAT(response->body, HasSubstr("test_hits_total 2\n"));
  // Every scrape serialises afresh.
  hits.Increment();
  EXPECT_THAT(client.Get("/metrics")->body, HasSubstr("test_hits_total 3\n"));
  EXPECT_EQ(client.Get("/other")->status, 404);
}

TEST(HttpExporterTest, StopsOnDestruction) {
  Registry registry;
  auto exporter = HttpExporter::Start("127.0.0.1:0", &registry);
  ASSERT_TRUE(exporter.ok()) << exporter.status();
  std::string host;
  int port = 0;
  ASSERT_TRUE(SplitHostPort((*exporter)->address(), &host, &port).ok());
  exporter->reset();
  httplib::Client client(host, port);
  EXPECT_FALSE(client.Get("/metrics"));
}

TEST(HttpExporterTest, ReportsBindFailures) {
  Registry registry;
  auto first = HttpExporter::Start("127.0.0.1:0", &registry);
  ASSERT_TRUE(first.ok()) << first.status();
  EXPECT_THAT(HttpExporter::Start((*first)->address(), &registry).status(),
              StatusIs(absl::StatusCode::kUnavailable,
                       "cannot bind the metrics listener"));
  EXPECT_THAT(HttpExporter::Start("no-port", &registry).status(),
              StatusIs(absl::StatusCode::kInvalidArgument, "not host:port"));
}

}  // namespace
}  // namespace bnn::server
