#include "server/metrics/http_endpoint.h"

#include <utility>

#include <absl/strings/str_cat.h>

#include "bnn/status.h"

#include "server/common/user_text.h"

namespace bnn::server {
namespace {

constexpr char kMetricsType[] = "text/plain; version=0.0.4; charset=utf-8";

HttpServer::Response ReplyHealth(const HttpEndpoint::HealthCheck& check) {
  const HttpEndpoint::Health health = check ? check() : HttpEndpoint::Health{};
  HttpServer::Response response;
  if (health.ok) {
    response.body = "ok\n";
  } else {
    response.status = 503;
    response.body = absl::StrCat(SafeText(health.reason, 512), "\n");
  }
  return response;
}

}  // namespace

absl::StatusOr<std::unique_ptr<HttpEndpoint>> HttpEndpoint::Start(
    Options options, const MetricsRegistry* registry) {
  HttpServer::Options server;
  server.name = "metrics";
  server.listen = options.listen;
  server.threads = kThreads;
  server.request_timeout_ms = kRequestTimeoutMs;
  server.keep_alive_timeout_ms = kKeepAliveTimeoutMs;
  HttpServer::Route metrics;
  metrics.path = "/metrics";
  metrics.handler = [registry](const HttpServer::Request&) {
    HttpServer::Response response;
    response.content_type = kMetricsType;
    response.body = registry->Serialize();
    return response;
  };
  HttpServer::Route live;
  live.path = "/healthz";
  live.handler = [check = std::move(options.live)](const HttpServer::Request&) {
    return ReplyHealth(check);
  };
  HttpServer::Route ready;
  ready.path = "/readyz";
  ready.handler = [check =
                       std::move(options.ready)](const HttpServer::Request&) {
    return ReplyHealth(check);
  };
  server.routes = {std::move(metrics), std::move(live), std::move(ready)};
  BNN_ASSIGN_OR_RETURN(std::unique_ptr<HttpServer> started,
                       HttpServer::Start(std::move(server)));
  return std::unique_ptr<HttpEndpoint>(new HttpEndpoint(std::move(started)));
}

}  // namespace bnn::server
