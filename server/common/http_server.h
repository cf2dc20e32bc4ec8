// A small HTTP/1.1 server for the server's plain-HTTP ports (the metrics
// endpoint, and the Open Inference Protocol's REST form on --http-listen):
// routes of exact paths or path subtrees to handlers, served by civetweb on
// threads of its own. Request bodies are read whole, up to a bound, before
// the handler runs; a handler returns the complete response.
//
// Plain HTTP over IPv4 only: Debian 12's civetweb (1.15) is built without
// IPv6, and its TLS support loads OpenSSL at run time by names that OpenSSL 3
// no longer has all of (SSL_get_peer_certificate), so the first TLS
// connection would crash the process. Server::Options::Validate keeps these
// ports on loopback addresses when the gRPC port uses TLS.
#ifndef BNN_SERVER_COMMON_HTTP_SERVER_H_
#define BNN_SERVER_COMMON_HTTP_SERVER_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <netinet/in.h>
#include <optional>
#include <string>
#include <vector>

#include <absl/status/status.h>
#include <absl/status/statusor.h>
#include <absl/strings/string_view.h>

struct mg_context;
struct mg_connection;

namespace bnn::server {

class HttpServer {
 public:
  struct Request {
    // "GET", "HEAD", "POST", ...
    std::string method;
    // The path, percent-decoded, without the query string.
    std::string path;
    // The values of every "Authorization" header, in order.
    std::vector<std::string> authorization;
    // The whole body (at most Options::max_body_bytes).
    std::string body;
    // "ipv4:ADDRESS:PORT" of the client, as gRPC writes peers.
    std::string peer;
  };
  struct Response {
    int status = 200;
    std::string content_type = "text/plain; charset=utf-8";
    // Not sent for HEAD requests (Content-Length still is).
    std::string body;
  };
  // Called on the server's threads, concurrently; must be thread-safe.
  using Handler = std::function<Response(const Request&)>;

  struct Route {
    // The path served: exactly `path`, and with `subtree` every path below
    // it ("/v2" serves "/v2/models/m" then, never "/v2x"). Other paths are
    // answered 404.
    std::string path;
    bool subtree = false;
    // The methods accepted; others are answered 405, naming them.
    std::vector<std::string> methods = {"GET", "HEAD"};
    Handler handler;
  };

  struct Options {
    // What the server is, in messages ("metrics" gives "cannot bind the
    // metrics listener to ...").
    std::string name = "HTTP";
    // "host:port" with an IPv4 address or a host name (port 0 picks a free
    // port); see CheckListen.
    std::string listen;
    // Connections served at once, one per thread.
    int threads = 8;
    // A connection that sends nothing (or stalls mid-request) for this long
    // is dropped; it bounds how long a half-open connection holds a thread.
    int request_timeout_ms = 500;
    // An idle keep-alive connection is closed after this long.
    int keep_alive_timeout_ms = 1000;
    // Largest request body; a longer one is answered 413 (naming the
    // bound) before the handler runs. 0 accepts none.
    int64_t max_body_bytes = 0;
    // What the flag of max_body_bytes is, for the 413 message.
    std::string max_body_flag;
    std::vector<Route> routes;
    // The response to a request the server refuses itself (404, 405, 413),
    // from its status and a one-line message; null sends the message as
    // plain text.
    std::function<Response(int status, const std::string& message)> refusal;
  };

  // InvalidArgument unless `listen` is a "host:port" the server can bind
  // (not an IPv6 address).
  static absl::Status CheckListen(absl::string_view listen);

  // Binds options.listen and starts serving; Unavailable naming the address
  // if it cannot be bound. What the handlers use must outlive the server.
  static absl::StatusOr<std::unique_ptr<HttpServer>> Start(Options options);
  // Stops serving and joins the threads (waiting for requests in progress,
  // which the request timeouts and the handlers bound).
  ~HttpServer();

  HttpServer(const HttpServer&) = delete;
  HttpServer& operator=(const HttpServer&) = delete;

  // host:port actually bound.
  const std::string& address() const { return address_; }

 private:
  explicit HttpServer(Options options) : options_(std::move(options)) {}

  // The civetweb handler of every request; `data` is the server.
  static int Dispatch(mg_connection* connection, void* data);
  // Options::refusal of `status` and `message`.
  Response Refuse(int status, const std::string& message) const;

  const Options options_;
  std::string address_;
  // Where the destructor connects to wake civetweb's accept loop.
  std::optional<sockaddr_in> wake_address_;
  mg_context* context_ = nullptr;
};

}  // namespace bnn::server

#endif  // BNN_SERVER_COMMON_HTTP_SERVER_H_
