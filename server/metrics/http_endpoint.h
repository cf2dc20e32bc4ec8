// The HTTP endpoint of the metrics port: GET /metrics (a MetricsRegistry in
// the Prometheus text format), /healthz (liveness) and /readyz (readiness),
// served by civetweb on threads of its own.
//
// Plain HTTP over IPv4 only: Debian 12's civetweb (1.15) is built without
// IPv6, and its TLS support loads OpenSSL at run time by names that OpenSSL 3
// no longer has all of (SSL_get_peer_certificate), so the first TLS
// connection would crash the process. Server::Options::Validate keeps the
// endpoint on a loopback address when the gRPC port uses TLS.
#ifndef BNN_SERVER_METRICS_HTTP_ENDPOINT_H_
#define BNN_SERVER_METRICS_HTTP_ENDPOINT_H_

#include <functional>
#include <memory>
#include <netinet/in.h>
#include <optional>
#include <string>

#include <absl/status/status.h>
#include <absl/status/statusor.h>
#include <absl/strings/string_view.h>

#include "server/metrics/registry.h"

struct mg_context;
struct mg_connection;

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
  static absl::Status CheckListen(absl::string_view listen);

  // Binds options.listen and starts serving; Unavailable naming the address
  // if it cannot be bound. `registry` is borrowed and must outlive the
  // endpoint, as must what the health checks use.
  static absl::StatusOr<std::unique_ptr<HttpEndpoint>> Start(
      Options options, const MetricsRegistry* registry);
  // Stops serving and joins the threads (waiting for requests in progress,
  // which the request timeouts bound).
  ~HttpEndpoint();

  HttpEndpoint(const HttpEndpoint&) = delete;
  HttpEndpoint& operator=(const HttpEndpoint&) = delete;

  // host:port actually bound.
  const std::string& address() const { return address_; }

 private:
  HttpEndpoint(Options options, const MetricsRegistry* registry)
      : options_(std::move(options)), registry_(registry) {}

  // civetweb request handlers; `data` is the endpoint.
  static int ServeMetrics(mg_connection* connection, void* data);
  static int ServeLive(mg_connection* connection, void* data);
  static int ServeReady(mg_connection* connection, void* data);

  const Options options_;
  const MetricsRegistry* const registry_;
  std::string address_;
  // Where the destructor connects to wake civetweb's accept loop.
  std::optional<sockaddr_in> wake_address_;
  mg_context* context_ = nullptr;
};

}  // namespace bnn::server

#endif  // BNN_SERVER_METRICS_HTTP_ENDPOINT_H_
