// The HTTP endpoint of the metrics port: GET /metrics (a MetricsRegistry in
// the Prometheus text format), /healthz (liveness) and /readyz (readiness):
// three routes of an HttpServer (server/common/http_server.h, which says
// why it is plain HTTP over IPv4 only).
#ifndef BNN_SERVER_METRICS_HTTP_ENDPOINT_H_
#define BNN_SERVER_METRICS_HTTP_ENDPOINT_H_

#include <functional>
#include <memory>
#include <string>

#include <absl/status/status.h>
#include <absl/status/statusor.h>
#include <absl/strings/string_view.h>

#include "server/common/http_server.h"
#include "server/metrics/registry.h"

namespace bnn::server {

class HttpEndpoint {
 public:
  // What a health probe answers: 200 "ok", or 503 with `reason`.
  struct Health {
    bool ok = true;
    std::string reason;
  };
  using HealthCheck = std::function<Health()>;

  struct Options {
    // "host:port" with an IPv4 address or a host name (port 0 picks a free
    // port); see CheckListen.
    std::string listen;
    // Called for each GET /healthz and /readyz, on the endpoint's threads;
    // null answers ok.
    HealthCheck live;
    HealthCheck ready;
  };

  // Connections served at once, one per thread. A connection that sends no
  // request holds its thread for kRequestTimeoutMs (a half-open one), an
  // idle keep-alive one for kKeepAliveTimeoutMs; a scrape queued behind
  // connections that hold every thread waits about (such connections /
  // threads) x those timeouts, so they are short. Scrapes are cheap.
  static constexpr int kThreads = 8;
  static constexpr int kRequestTimeoutMs = 500;
  static constexpr int kKeepAliveTimeoutMs = 1000;

  // InvalidArgument unless `listen` is a "host:port" the endpoint can bind
  // (not an IPv6 address).
  static absl::Status CheckListen(absl::string_view listen) {
    return HttpServer::CheckListen(listen);
  }

  // Binds options.listen and starts serving; Unavailable naming the address
  // if it cannot be bound. `registry` is borrowed and must outlive the
  // endpoint, as must what the health checks use.
  static absl::StatusOr<std::unique_ptr<HttpEndpoint>> Start(
      Options options, const MetricsRegistry* registry);
  // Stops serving and joins the threads (waiting for requests in progress,
  // which the request timeouts bound).
  ~HttpEndpoint() = default;

  HttpEndpoint(const HttpEndpoint&) = delete;
  HttpEndpoint& operator=(const HttpEndpoint&) = delete;

  // host:port actually bound.
  const std::string& address() const { return server_->address(); }

 private:
  explicit HttpEndpoint(std::unique_ptr<HttpServer> server)
      : server_(std::move(server)) {}

  std::unique_ptr<HttpServer> server_;
};

}  // namespace bnn::server

#endif  // BNN_SERVER_METRICS_HTTP_ENDPOINT_H_
