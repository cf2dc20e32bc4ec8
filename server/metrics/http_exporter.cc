#include "server/metrics/http_exporter.h"

#include <chrono>
#include <httplib.h>
#include <sys/socket.h>
#include <utility>

#include <absl/strings/str_cat.h>

#include "bnn/status.h"

#include "server/common/address.h"

namespace bnn::server {
namespace {

// httplib serves one connection per pool thread, and a connection that
// sends nothing (half-open, or an idle keep-alive) holds its thread until the
// keep-alive wait and then the read time out. A scrape queued behind such
// connections waits about (idle connections / threads) x those timeouts
// (with httplib's defaults, 2 idle connections per thread stalled scrapes
// for 10 s): short timeouts and a few threads keep it prompt. Scrapes
// themselves are cheap.
constexpr size_t kHttpThreads = 8;
constexpr time_t kKeepAliveSeconds = 1;
constexpr auto kReadTimeout = std::chrono::milliseconds(500);
constexpr auto kWriteTimeout = std::chrono::seconds(2);
constexpr char kContentType[] = "text/plain; version=0.0.4; charset=utf-8";

}  // namespace

absl::StatusOr<std::unique_ptr<HttpExporter>> HttpExporter::Start(
    absl::string_view listen, const Registry* registry, const Tls& tls) {
  std::string host;
  int port = 0;
  BNN_RETURN_IF_ERROR(SplitHostPort(listen, &host, &port));
  std::unique_ptr<httplib::Server> http;
  if (tls.cert_file.empty()) {
    http = std::make_unique<httplib::Server>();
  } else {
    auto https = std::make_unique<httplib::SSLServer>(
        tls.cert_file.c_str(), tls.key_file.c_str(),
        tls.client_ca_file.empty() ? nullptr : tls.client_ca_file.c_str());
    if (!https->is_valid()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "the metrics endpoint cannot load the TLS files ", tls.cert_file,
          ", ", tls.key_file,
          tls.client_ca_file.empty() ? "" : ", " + tls.client_ca_file));
    }
    http = std::move(https);
  }
  http->new_task_queue = [] { return new httplib::ThreadPool(kHttpThreads); };
  http->set_read_timeout(kReadTimeout);
  http->set_write_timeout(kWriteTimeout);
  http->set_keep_alive_timeout(kKeepAliveSeconds);
  // httplib's default adds SO_REUSEPORT, which would let a second server
  // share the port and silently take half of the scrapes.
  http->set_socket_options([](int socket) {
    const int yes = 1;
    setsockopt(socket, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof(yes));
  });
  http->Get("/metrics",
            [registry](const httplib::Request&, httplib::Response& response) {
              response.set_content(registry->Serialize(), kContentType);
            });
  if (port == 0) {
    port = http->bind_to_any_port(host);
  } else if (!http->bind_to_port(host, port)) {
    port = -1;
  }
  if (port < 0) {
    return absl::UnavailableError(
        absl::StrCat("cannot bind the metrics listener to ", listen));
  }
  return std::unique_ptr<HttpExporter>(
      new HttpExporter(std::move(http), JoinHostPort(host, port)));
}

HttpExporter::HttpExporter(std::unique_ptr<httplib::Server> http,
                           std::string address)
    : http_(std::move(http)), address_(std::move(address)) {
  thread_ = std::thread([this] {
    http_->listen_after_bind();
    loop_exited_ = true;
  });
  // stop() is a no-op until the accept loop runs, so a destructor racing
  // with start-up would otherwise hang in join().
  while (!http_->is_running() && !loop_exited_) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
}

HttpExporter::~HttpExporter() {
  http_->stop();
  thread_.join();
}

}  // namespace bnn::server
