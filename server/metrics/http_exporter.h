// Serves a Registry at GET /metrics over HTTP or HTTPS (cpp-httplib, built
// by Debian with OpenSSL) on its own threads, for Prometheus to scrape.
#ifndef BNN_SERVER_METRICS_HTTP_EXPORTER_H_
#define BNN_SERVER_METRICS_HTTP_EXPORTER_H_

#include <atomic>
#include <memory>
#include <string>
#include <thread>

#include <absl/status/statusor.h>
#include <absl/strings/string_view.h>

#include "server/metrics/registry.h"

namespace httplib {
class Server;
}  // namespace httplib

namespace bnn::server {

class HttpExporter {
 public:
  // PEM files for HTTPS; all empty for plain HTTP.
  struct Tls {
    // The server's certificate chain and its private key.
    std::string cert_file;
    std::string key_file;
    // If set, scrapers must present a client certificate signed by one of
    // these CAs.
    std::string client_ca_file;
  };

  // Binds `listen` ("host:port", "[v6]:port"; port 0 picks a free port) and
  // starts serving, over HTTPS if tls.cert_file is set (InvalidArgument if
  // the files cannot be loaded). `registry` is borrowed and must outlive the
  // exporter.
  static absl::StatusOr<std::unique_ptr<HttpExporter>> Start(
      absl::string_view listen, const Registry* registry, const Tls& tls = {});
  // Stops serving and joins the threads.
  ~HttpExporter();

  // host:port actually bound.
  const std::string& address() const { return address_; }

 private:
  HttpExporter(std::unique_ptr<httplib::Server> http, std::string address);

  std::unique_ptr<httplib::Server> http_;
  std::string address_;
  std::atomic<bool> loop_exited_{false};
  std::thread thread_;
};

}  // namespace bnn::server

#endif  // BNN_SERVER_METRICS_HTTP_EXPORTER_H_
