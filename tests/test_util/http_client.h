// A minimal HTTP/1.1 client for tests: one GET per connection over plain
// TCP, enough to scrape /metrics, probe /healthz and /readyz, and query
// Prometheus' HTTP API.
#ifndef BNN_TESTS_TEST_UTIL_HTTP_CLIENT_H_
#define BNN_TESTS_TEST_UTIL_HTTP_CLIENT_H_

#include <map>
#include <string>
#include <utility>
#include <vector>

#include <absl/status/statusor.h>
#include <absl/strings/string_view.h>
#include <absl/time/time.h>

namespace bnn::testing {

struct HttpResponse {
  int status = 0;
  // Header names lower-cased.
  std::map<std::string, std::string> headers;
  std::string body;
};

// GET http://HOST_PORT/PATH_AND_QUERY ("host:port" with an IPv4 address or
// a name) with "Connection: close", reading until the server closes.
// Unavailable if it cannot connect, DeadlineExceeded after `timeout`,
// Internal for a malformed response (chunked bodies are decoded).
absl::StatusOr<HttpResponse> HttpGet(absl::string_view host_port,
                                     absl::string_view path_and_query,
                                     absl::Duration timeout = absl::Seconds(10),
                                     absl::string_view method = "GET");

// "/path?k1=v1&k2=v2" with the keys and values percent-encoded.
std::string PathWithQuery(
    absl::string_view path,
    const std::vector<std::pair<std::string, std::string>>& params);

}  // namespace bnn::testing

#endif  // BNN_TESTS_TEST_UTIL_HTTP_CLIENT_H_
