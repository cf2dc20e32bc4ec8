#include "server/common/http_server.h"

#include <memory>
#include <string>
#include <utility>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "tests/test_util/http_client.h"

namespace bnn::server {
namespace {

using ::bnn::testing::HttpRequest;
using ::bnn::testing::HttpResponse;
using ::testing::HasSubstr;

// A server with an exact route /a (GET) and a subtree /t (GET, POST) that
// echoes the method, path, Authorization headers and body.
std::unique_ptr<HttpServer> Start(HttpServer::Options options) {
  options.listen = "127.0.0.1:0";
  options.max_body_bytes = 10;
  options.max_body_flag = "--limit";
  HttpServer::Route exact;
  exact.path = "/a";
  exact.handler = [](const HttpServer::Request&) {
    HttpServer::Response response;
    response.body = "a";
    return response;
  };
  HttpServer::Route subtree;
  subtree.path = "/t";
  subtree.subtree = true;
  subtree.methods = {"GET", "POST"};
  subtree.handler = [](const HttpServer::Request& request) {
    HttpServer::Response response;
    response.status = 201;
    response.content_type = "application/x-test";
    response.body =
        request.method + " " + request.path + " [" +
        (request.authorization.empty() ? "" : request.authorization[0]) + "] " +
        request.body;
    return response;
  };
  options.routes = {std::move(exact), std::move(subtree)};
  absl::StatusOr<std::unique_ptr<HttpServer>> server =
      HttpServer::Start(std::move(options));
  EXPECT_TRUE(server.ok()) << server.status();
  return server.ok() ? *std::move(server) : nullptr;
}

HttpResponse Call(const HttpServer& server, const std::string& method,
                  const std::string& path, const std::string& body = "") {
  absl::StatusOr<HttpResponse> response = HttpRequest(
      server.address(), method, path, body, {{"Authorization", "Bearer x"}});
  EXPECT_TRUE(response.ok()) << response.status();
  return response.value_or(HttpResponse());
}

TEST(HttpServerTest, RoutesExactPathsAndSubtrees) {
  std::unique_ptr<HttpServer> server = Start({});
  ASSERT_NE(server, nullptr);
  EXPECT_EQ(Call(*server, "GET", "/a").body, "a");
  EXPECT_EQ(Call(*server, "GET", "/a/b").status, 404);
  HttpResponse r = Call(*server, "POST", "/t/x/y", "body");
  EXPECT_EQ(r.status, 201);
  EXPECT_EQ(r.headers["content-type"], "application/x-test");
  EXPECT_EQ(r.body, "POST /t/x/y [Bearer x] body");
  EXPECT_EQ(Call(*server, "GET", "/t").body, "GET /t [Bearer x] ");
  EXPECT_EQ(Call(*server, "GET", "/tx").status, 404);
  r = Call(*server, "DELETE", "/t/x");
  EXPECT_EQ(r.status, 405);
  EXPECT_EQ(r.body, "only GET and POST\n");
  // Bodies over the bound are refused before the handler runs.
  r = Call(*server, "POST", "/t/x", std::string(11, 'b'));
  EXPECT_EQ(r.status, 413);
  EXPECT_THAT(r.body, HasSubstr("larger than 10 bytes, the server's limit "
                                "(--limit)"));
}

TEST(HttpServerTest, RefusalsTakeTheFormGiven) {
  HttpServer::Options options;
  options.refusal = [](int status, const std::string& message) {
    HttpServer::Response response;
    response.status = status;
    response.body = "<" + message + ">";
    return response;
  };
  std::unique_ptr<HttpServer> server = Start(std::move(options));
  ASSERT_NE(server, nullptr);
  EXPECT_EQ(Call(*server, "GET", "/a/b").body, "<not found>");
  EXPECT_EQ(Call(*server, "POST", "/a").body, "<only GET and HEAD>");
}

}  // namespace
}  // namespace bnn::server
