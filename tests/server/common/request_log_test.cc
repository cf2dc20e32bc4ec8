#include "server/common/request_log.h"

#include <memory>
#include <set>
#include <sstream>
#include <string>

#include <absl/strings/str_cat.h>
#include <gmock/gmock.h>
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>
#include <spdlog/sinks/ostream_sink.h>
#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>

#include "server/common/log.h"
#include "tests/server/service_fixture.h"

namespace bnn::server {
namespace {

using ::testing::HasSubstr;
using ::testing::MatchesRegex;
using ::testing::Not;

TEST(RequestIdTest, UsableIds) {
  EXPECT_TRUE(IsUsableRequestId("3f2c1a9e-7b4d-4c2a-9f1e-0a1b2c3d4e5f"));
  EXPECT_TRUE(IsUsableRequestId("a"));
  EXPECT_TRUE(IsUsableRequestId(std::string(kMaxRequestIdBytes, 'x')));
  EXPECT_FALSE(IsUsableRequestId(""));
  EXPECT_FALSE(IsUsableRequestId(std::string(kMaxRequestIdBytes + 1, 'x')));
  EXPECT_FALSE(IsUsableRequestId("two words"));
  EXPECT_FALSE(IsUsableRequestId("line\nbreak"));
  EXPECT_FALSE(IsUsableRequestId("caf\xc3\xa9"));
}

TEST(RequestIdTest, NewIdsAreRandomHex) {
  std::set<std::string> ids;
  for (int i = 0; i < 100; ++i) {
    const std::string id = NewRequestId();
    EXPECT_THAT(id, MatchesRegex("[0-9a-f]{32}"));
    ids.insert(id);
  }
  EXPECT_EQ(ids.size(), 100u);
}

// The interceptor as the Server installs it: a real server on loopback.
class RequestLogTest : public testutil::ServiceTest {
 protected:
  void SetUp() override {
    testutil::ServiceTest::SetUp();
    auto sink = std::make_shared<spdlog::sinks::ostream_sink_mt>(log_);
    spdlog::set_default_logger(NewLogger("test", LogFormat::kText, sink));
  }
  void TearDown() override {
    testutil::ServiceTest::TearDown();
    spdlog::set_default_logger(std::make_shared<spdlog::logger>(
        "test", std::make_shared<spdlog::sinks::stderr_color_sink_mt>()));
  }
  // The x-request-id values of the response's initial and trailing metadata.
  static std::pair<std::string, std::string> ReturnedIds(
      const grpc::ClientContext& context) {
    std::pair<std::string, std::string> ids;
    const auto initial = context.GetServerInitialMetadata().find(kRequestIdKey);
    if (initial != context.GetServerInitialMetadata().end()) {
      ids.first = std::string(initial->second.data(), initial->second.size());
    }
    const auto trailing =
        context.GetServerTrailingMetadata().find(kRequestIdKey);
    if (trailing != context.GetServerTrailingMetadata().end()) {
      ids.second =
          std::string(trailing->second.data(), trailing->second.size());
    }
    return ids;
  }

  std::ostringstream log_;
};

TEST_F(RequestLogTest, ReturnsTheClientsIdAndLogsTheCall) {
  grpc::ClientContext context;
  context.AddMetadata(kRequestIdKey, "client-id-1");
  v1::ListMethodsResponse methods;
  ASSERT_TRUE(stub_->ListMethods(&context, {}, &methods).ok());
  EXPECT_EQ(ReturnedIds(context), std::make_pair(std::string("client-id-1"),
                                                 std::string("client-id-1")));
  EXPECT_THAT(log_.str(),
              MatchesRegex(".*rpc rpc=/bnn.v1.BnnService/ListMethods "
                           "peer=ipv4:127.0.0.1:[0-9]+ code=OK "
                           "latency_ms=[0-9.e-]+ request_id=client-id-1\n.*"));
}

TEST_F(RequestLogTest, GeneratesAnIdForCallsWithoutAUsableOne) {
  grpc::ClientContext without;
  v1::DatasetInfo dataset;
  v1::GetDatasetRequest request;
  request.set_dataset_id("ds-missing");
  // An error: the id is in the trailing metadata too.
  EXPECT_EQ(stub_->GetDataset(&without, request, &dataset).error_code(),
            grpc::StatusCode::NOT_FOUND);
  const auto [initial, trailing] = ReturnedIds(without);
  EXPECT_THAT(trailing, MatchesRegex("[0-9a-f]{32}"));
  if (!initial.empty()) {
    EXPECT_EQ(initial, trailing);
  }
  EXPECT_THAT(log_.str(),
              HasSubstr(absl::StrCat("code=NOT_FOUND latency_ms=")));
  EXPECT_THAT(log_.str(), HasSubstr(absl::StrCat("request_id=", trailing)));

  grpc::ClientContext unusable;
  unusable.AddMetadata(kRequestIdKey, "has spaces");
  v1::ListMethodsResponse methods;
  ASSERT_TRUE(stub_->ListMethods(&unusable, {}, &methods).ok());
  EXPECT_THAT(ReturnedIds(unusable).first, MatchesRegex("[0-9a-f]{32}"));
  EXPECT_THAT(log_.str(), Not(HasSubstr("has spaces")));
}

}  // namespace
}  // namespace bnn::server
