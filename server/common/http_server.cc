#include "server/common/http_server.h"

#include <arpa/inet.h>
#include <civetweb.h>
#include <cstring>
#include <netdb.h>
#include <netinet/in.h>
#include <strings.h>
#include <sys/socket.h>
#include <thread>
#include <unistd.h>
#include <utility>

#include <absl/strings/match.h>
#include <absl/strings/str_cat.h>
#include <absl/strings/str_join.h>
#include <absl/synchronization/notification.h>
#include <absl/time/time.h>
#include <spdlog/spdlog.h>

#include "bnn/status.h"

#include "server/common/address.h"
#include "server/common/user_text.h"

namespace bnn::server {
namespace {

// civetweb's own diagnostics (a client that timed out, a failed bind) go to
// the server's log; 1: civetweb does not print them itself.
int LogCivetweb(const mg_connection* /*connection*/, const char* message) {
  spdlog::debug("http: {}", SafeText(message, 512));
  return 1;
}

// Sends `response` (without its body for HEAD) and returns its status,
// which tells civetweb the request was handled.
int Send(mg_connection* connection, const HttpServer::Response& response) {
  const mg_request_info* request = mg_get_request_info(connection);
  mg_response_header_start(connection, response.status);
  mg_response_header_add(connection, "Content-Type",
                         response.content_type.c_str(), -1);
  const std::string length = absl::StrCat(response.body.size());
  mg_response_header_add(connection, "Content-Length", length.c_str(), -1);
  mg_response_header_add(connection, "Cache-Control", "no-store", -1);
  mg_response_header_send(connection);
  if (std::strcmp(request->request_method, "HEAD") != 0) {
    mg_write(connection, response.body.data(), response.body.size());
  }
  return response.status;
}

// The request's body, up to `max_bytes`; nullopt if it is longer (or its
// declared length is).
std::optional<std::string> ReadBody(mg_connection* connection,
                                    int64_t max_bytes) {
  const mg_request_info* request = mg_get_request_info(connection);
  if (request->content_length > max_bytes) return std::nullopt;
  std::string body;
  if (request->content_length > 0) {
    body.reserve(static_cast<size_t>(request->content_length));
  }
  char buffer[65536];
  while (true) {
    const int n = mg_read(connection, buffer, sizeof(buffer));
    if (n <= 0) break;
    if (static_cast<int64_t>(body.size()) + n > max_bytes) return std::nullopt;
    body.append(buffer, static_cast<size_t>(n));
  }
  return body;
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

absl::Status HttpServer::CheckListen(absl::string_view listen) {
  std::string host;
  int port = 0;
  BNN_RETURN_IF_ERROR(SplitHostPort(listen, &host, &port));
  if (absl::StrContains(host, ':')) {
    return absl::InvalidArgumentError(
        absl::StrCat(listen,
                     ": the HTTP endpoints take an IPv4 address or a host name "
                     "(Debian's civetweb is built without IPv6)"));
  }
  if (host.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat(listen, ": an HTTP endpoint needs a host"));
  }
  return absl::OkStatus();
}

absl::StatusOr<std::unique_ptr<HttpServer>> HttpServer::Start(Options options) {
  BNN_RETURN_IF_ERROR(CheckListen(options.listen));
  std::string host;
  int port = 0;
  BNN_RETURN_IF_ERROR(SplitHostPort(options.listen, &host, &port));
  // Once per process; civetweb's global state is never torn down.
  static const unsigned kInitialized = mg_init_library(0);
  (void)kInitialized;

  std::unique_ptr<HttpServer> server(new HttpServer(std::move(options)));
  const Options& o = server->options_;
  const std::string threads = absl::StrCat(o.threads);
  const std::string request_timeout = absl::StrCat(o.request_timeout_ms);
  const std::string keep_alive_timeout = absl::StrCat(o.keep_alive_timeout_ms);
  const std::string listening = JoinHostPort(host, port);
  // No document_root: nothing but the routes is served.
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
  init.user_data = server.get();
  init.configuration_options = configuration;
  char error_text[256] = "";
  unsigned error_code = 0;
  mg_error_data error{};
  error.code = &error_code;
  error.text = error_text;
  error.text_buffer_size = sizeof(error_text);
  server->context_ = mg_start2(&init, &error);
  if (server->context_ == nullptr) {
    return absl::UnavailableError(absl::StrCat("cannot bind the ", o.name,
                                               " listener to ", o.listen, ": ",
                                               error_text));
  }
  mg_server_port bound{};
  if (mg_get_server_ports(server->context_, 1, &bound) != 1) {
    return absl::InternalError(
        absl::StrCat("the ", o.name, " listener reports no port"));
  }
  server->address_ = JoinHostPort(host, bound.port);
  server->wake_address_ = WakeAddress(host, bound.port);
  // civetweb hands a handler its path and the paths below it; Dispatch
  // tells them apart.
  for (const Route& route : o.routes) {
    mg_set_request_handler(server->context_, route.path.c_str(), Dispatch,
                           server.get());
  }
  return server;
}

HttpServer::~HttpServer() {
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

HttpServer::Response HttpServer::Refuse(int status,
                                        const std::string& message) const {
  if (options_.refusal) return options_.refusal(status, message);
  Response response;
  response.status = status;
  response.body = absl::StrCat(message, "\n");
  return response;
}

int HttpServer::Dispatch(mg_connection* connection, void* data) {
  const auto* server = static_cast<const HttpServer*>(data);
  const mg_request_info* info = mg_get_request_info(connection);
  const absl::string_view path = info->local_uri;
  const Route* route = nullptr;
  for (const Route& candidate : server->options_.routes) {
    if (path == candidate.path ||
        (candidate.subtree &&
         absl::StartsWith(path, absl::StrCat(candidate.path, "/")))) {
      route = &candidate;
      break;
    }
  }
  if (route == nullptr) {
    return Send(connection, server->Refuse(404, "not found"));
  }
  bool allowed = false;
  for (const std::string& method : route->methods) {
    allowed = allowed || method == info->request_method;
  }
  if (!allowed) {
    return Send(
        connection,
        server->Refuse(405, absl::StrCat("only ", absl::StrJoin(route->methods,
                                                                " and "))));
  }
  Request request;
  request.method = info->request_method;
  request.path = std::string(path);
  for (int i = 0; i < info->num_headers; ++i) {
    if (strcasecmp(info->http_headers[i].name, "Authorization") == 0) {
      request.authorization.emplace_back(info->http_headers[i].value);
    }
  }
  request.peer =
      absl::StrCat("ipv4:", info->remote_addr, ":", info->remote_port);
  std::optional<std::string> body =
      ReadBody(connection, server->options_.max_body_bytes);
  if (!body.has_value()) {
    const Options& o = server->options_;
    return Send(
        connection,
        server->Refuse(413,
                       absl::StrCat("the request body is larger than ",
                                    o.max_body_bytes, " bytes",
                                    o.max_body_flag.empty()
                                        ? ""
                                        : absl::StrCat(", the server's limit (",
                                                       o.max_body_flag, ")"))));
  }
  request.body = *std::move(body);
  return Send(connection, route->handler(request));
}

}  // namespace bnn::server
