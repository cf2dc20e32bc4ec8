// A minimal HTTP/1.1 client for tests: one request per connection over
// plain TCP, enough to scrape /metrics, probe /healthz and /readyz, query
// Prometheus' HTTP API and call the Open Inference Protocol's REST form.
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

// Any request: `method` of `path_and_query` with the `headers` given
// (name, value) and `body` (with its Content-Length, unless empty for a
// method other than POST and PUT), "Connection: close", reading until the
// server closes. Errors as HttpGet's.
absl::StatusOr<HttpResponse> HttpRequest(
    absl::string_view host_port, absl::string_view method,
    absl::string_view path_and_query, absl::string_view body = "",
    const std::vector<std::pair<std::string, std::string>>& headers = {},
    absl::Duration timeout = absl::Seconds(10));

// "/path?k1=v1&k2=v2" with the keys and values percent-encoded.
std::string PathWithQuery(
    absl::string_view path,
    const std::vector<std::pair<std::string, std::string>>& params);

}  // namespace bnn::testing

#endif  // BNN_TESTS_TEST_UTIL_HTTP_CLIENT_H_
