#include "server/metrics/http_endpoint.h"

#include <arpa/inet.h>
#include <civetweb.h>
#include <cstring>
#include <netdb.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <thread>
#include <unistd.h>
#include <utility>
#include <vector>

#include <absl/strings/match.h>
#include <absl/strings/numbers.h>
#include <absl/strings/str_cat.h>
#include <absl/synchronization/notification.h>
#include <absl/time/time.h>
#include <spdlog/spdlog.h>

#include "bnn/status.h"

#include "server/common/address.h"
#include "server/common/user_text.h"

namespace bnn::server {
namespace {

constexpr char kMetricsType[] = "text/plain; version=0.0.4; charset=utf-8";
constexpr char kTextType[] = "text/plain; charset=utf-8";

// civetweb's own diagnostics (a client that timed out, a failed bind) go to
// the server's log; 1: civetweb does not print them itself.
int LogCivetweb(const mg_connection* /*connection*/, const char* message) {
  spdlog::debug("metrics endpoint: {}", SafeText(message, 512));
  return 1;
}

// A complete response with a body (omitted for HEAD). Returns the status,
// which tells civetweb the request was handled.
int Reply(mg_connection* connection, int status, const char* content_type,
          absl::string_view body) {
  const mg_request_info* request = mg_get_request_info(connection);
  mg_response_header_start(connection, status);
  mg_response_header_add(connection, "Content-Type", content_type, -1);
  const std::string length = absl::StrCat(body.size());
  mg_response_header_add(connection, "Content-Length", length.c_str(), -1);
  mg_response_header_add(connection, "Cache-Control", "no-store", -1);
  mg_response_header_send(connection);
  if (std::strcmp(request->request_method, "HEAD") != 0) {
    mg_write(connection, body.data(), body.size());
  }
  return status;
}

// The request is GET or HEAD of exactly `path` (civetweb also hands a
// handler the paths below it); answers 404 or 405 otherwise and returns
// false.
bool Accept(mg_connection* connection, const char* path, int* status) {
  const mg_request_info* request = mg_get_request_info(connection);
  if (std::strcmp(request->local_uri, path) != 0) {
    *status = Reply(connection, 404, kTextType, "not found\n");
    return false;
  }
  if (std::strcmp(request->request_method, "GET") != 0 &&
      std::strcmp(request->request_method, "HEAD") != 0) {
    *status = Reply(connection, 405, kTextType, "only GET and HEAD\n");
    return false;
  }
  return true;
}

int ReplyHealth(mg_connection* connection, const char* path,
                const HttpEndpoint::HealthCheck& check) {
  int status = 0;
  if (!Accept(connection, path, &status)) return status;
  const HttpEndpoint::Health health = check ? check() : HttpEndpoint::Health{};
  if (health.ok) return Reply(connection, 200, kTextType, "ok\n");
  return Reply(connection, 503, kTextType,
               absl::StrCat(SafeText(health.reason, 512), "\n"));
}

// An IPv4 address that reaches a listener bound to `host`:`port` (loopback
// for the wildcard address); nullopt if `host` does not resolve.
std::optional<sockaddr_in> WakeAddress(const std::string& host, int port) {
  addrinfo hints{};
  hints.ai_family = AF_INET;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* found = nullptr;
  if (getaddrinfo(host.c_str(), nullptr, &hints, &found) != 0) {
    return std::nullopt;
  }
  sockaddr_in address = *reinterpret_cast<const sockaddr_in*>(found->ai_addr);
  freeaddrinfo(found);
  if (address.sin_addr.s_addr == htonl(INADDR_ANY)) {
    address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  }
  address.sin_port = htons(static_cast<uint16_t>(port));
  return address;
}

// Connects to `address` and hangs up at once.
void Poke(const sockaddr_in& address) {
  const int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return;
  connect(fd, reinterpret_cast<const sockaddr*>(&address), sizeof(address));
  close(fd);
}

}  // namespace

absl::Status HttpEndpoint::CheckListen(absl::string_view listen) {
  std::string host;
  int port = 0;
  BNN_RETURN_IF_ERROR(SplitHostPort(listen, &host, &port));
  if (absl::StrContains(host, ':')) {
    return absl::InvalidArgumentError(absl::StrCat(
        listen,
        ": the metrics endpoint takes an IPv4 address or a host name "
        "(Debian's civetweb is built without IPv6)"));
  }
  if (host.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat(listen, ": the metrics endpoint needs a host"));
  }
  return absl::OkStatus();
}

absl::StatusOr<std::unique_ptr<HttpEndpoint>> HttpEndpoint::Start(
    Options options, const MetricsRegistry* registry) {
  BNN_RETURN_IF_ERROR(CheckListen(options.listen));
  std::string host;
  int port = 0;
  BNN_RETURN_IF_ERROR(SplitHostPort(options.listen, &host, &port));
  // Once per process; civetweb's global state is never torn down.
  static const unsigned kInitialized = mg_init_library(0);
  (void)kInitialized;

  std::unique_ptr<HttpEndpoint> endpoint(
      new HttpEndpoint(std::move(options), registry));
  const std::string threads = absl::StrCat(kThreads);
  const std::string request_timeout = absl::StrCat(kRequestTimeoutMs);
  const std::string keep_alive_timeout = absl::StrCat(kKeepAliveTimeoutMs);
  const std::string listening = JoinHostPort(host, port);
  // No document_root: nothing but the handlers below is served.
  const char* configuration[] = {"listening_ports",
                                 listening.c_str(),
                                 "num_threads",
                                 threads.c_str(),
                                 "request_timeout_ms",
                                 request_timeout.c_str(),
                                 "enable_keep_alive",
                                 "yes",
                                 "keep_alive_timeout_ms",
                                 keep_alive_timeout.c_str(),
                                 nullptr};
  mg_callbacks callbacks{};
  callbacks.log_message = LogCivetweb;
  mg_init_data init{};
  init.callbacks = &callbacks;
  init.user_data = endpoint.get();
  init.configuration_options = configuration;
  char error_text[256] = "";
  unsigned error_code = 0;
  mg_error_data error{};
  error.code = &error_code;
  error.text = error_text;
  error.text_buffer_size = sizeof(error_text);
  endpoint->context_ = mg_start2(&init, &error);
  if (endpoint->context_ == nullptr) {
    return absl::UnavailableError(
        absl::StrCat("cannot bind the metrics listener to ",
                     endpoint->options_.listen, ": ", error_text));
  }
  mg_server_port bound{};
  if (mg_get_server_ports(endpoint->context_, 1, &bound) != 1) {
    return absl::InternalError("the metrics listener reports no port");
  }
  endpoint->address_ = JoinHostPort(host, bound.port);
  endpoint->wake_address_ = WakeAddress(host, bound.port);
  mg_set_request_handler(endpoint->context_, "/metrics", ServeMetrics,
                         endpoint.get());
  mg_set_request_handler(endpoint->context_, "/healthz", ServeLive,
                         endpoint.get());
  mg_set_request_handler(endpoint->context_, "/readyz", ServeReady,
                         endpoint.get());
  return endpoint;
}

HttpEndpoint::~HttpEndpoint() {
  if (context_ == nullptr) return;
  // civetweb's accept loop sees the stop request only when its poll() of
  // the listening socket returns, which without a connection takes up to
  // 2 s (its SOCKET_TIMEOUT_QUANTUM); connections wake it at once.
  absl::Notification stopped;
  std::thread stopper([this, &stopped] {
    mg_stop(context_);
    stopped.Notify();
  });
  if (wake_address_.has_value()) {
    while (!stopped.WaitForNotificationWithTimeout(absl::Milliseconds(20))) {
      Poke(*wake_address_);
    }
  }
  stopper.join();
}

int HttpEndpoint::ServeMetrics(mg_connection* connection, void* data) {
  const auto* endpoint = static_cast<const HttpEndpoint*>(data);
  int status = 0;
  if (!Accept(connection, "/metrics", &status)) return status;
  return Reply(connection, 200, kMetricsType, endpoint->registry_->Serialize());
}

int HttpEndpoint::ServeLive(mg_connection* connection, void* data) {
  return ReplyHealth(connection, "/healthz",
                     static_cast<const HttpEndpoint*>(data)->options_.live);
}

int HttpEndpoint::ServeReady(mg_connection* connection, void* data) {
  return ReplyHealth(connection, "/readyz",
                     static_cast<const HttpEndpoint*>(data)->options_.ready);
}

}  // namespace bnn::server
