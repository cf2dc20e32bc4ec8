#include "server/common/address.h"

#include <string>

#include <gtest/gtest.h>

namespace bnn::server {
namespace {

TEST(SplitHostPortTest, Ipv4AndHostnames) {
  std::string host;
  int port = -1;
  ASSERT_TRUE(SplitHostPort("127.0.0.1:50051", &host, &port).ok());
  EXPECT_EQ(host, "127.0.0.1");
  EXPECT_EQ(port, 50051);
  ASSERT_TRUE(SplitHostPort("localhost:0", &host, &port).ok());
  EXPECT_EQ(host, "localhost");
  EXPECT_EQ(port, 0);
}

TEST(SplitHostPortTest, BracketedIpv6) {
  std::string host;
  int port = -1;
  ASSERT_TRUE(SplitHostPort("[::1]:9464", &host, &port).ok());
  EXPECT_EQ(host, "::1");
  EXPECT_EQ(port, 9464);
  EXPECT_EQ(JoinHostPort(host, port), "[::1]:9464");
  EXPECT_EQ(JoinHostPort("127.0.0.1", 1), "127.0.0.1:1");
}

TEST(SplitHostPortTest, RejectsMalformedAddresses) {
  std::string host;
  int port = 0;
  for (const char* bad :
       {"", "50051", ":50051", "host:", "host:x", "host:65536", "host:-1"}) {
    EXPECT_EQ(SplitHostPort(bad, &host, &port).code(),
              absl::StatusCode::kInvalidArgument)
        << bad;
  }
}

TEST(IsLoopbackHostTest, LoopbackAddressesOnly) {
  for (const char* host : {"localhost", "LocalHost", "127.0.0.1", "127.1.2.3",
                           "::1", "::ffff:127.0.0.1"}) {
    EXPECT_TRUE(IsLoopbackHost(host)) << host;
  }
  for (const char* host :
       {"", "0.0.0.0", "::", "10.0.0.1", "128.0.0.1", "::ffff:10.0.0.1",
        "example.com", "localhost.", "127.0.0.1.example.com"}) {
    EXPECT_FALSE(IsLoopbackHost(host)) << host;
  }
}

}  // namespace
}  // namespace bnn::server
