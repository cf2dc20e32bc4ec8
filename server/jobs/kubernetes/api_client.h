// Requests to the Kubernetes API server over HTTPS, with libcurl (Debian
// libcurl4-openssl-dev): JSON in, JSON out, a bearer token read from its
// file for every request, the server's certificate checked against the CA
// file only, timeouts on the connection and the whole request, and a bound
// on the response size. Non-2xx answers become an absl::Status carrying the
// HTTP code and the API server's Status.message, never the token.
#ifndef BNN_SERVER_JOBS_KUBERNETES_API_CLIENT_H_
#define BNN_SERVER_JOBS_KUBERNETES_API_CLIENT_H_

#include <memory>
#include <string>
#include <vector>

#include <absl/base/thread_annotations.h>
#include <absl/status/status.h>
#include <absl/status/statusor.h>
#include <absl/strings/string_view.h>
#include <absl/synchronization/mutex.h>

#include "server/jobs/kubernetes/launcher_options.h"

namespace bnn::server::kubernetes {

// Thread-safe: concurrent calls use different connections (an idle one is
// reused, keeping its TLS session).
class ApiClient {
 public:
  struct Response {
    // The HTTP status code (2xx: Call returns errors for the others).
    int http_code = 0;
    std::string body;
  };

  // Uses options.api_server, token_file, ca_file, connect_timeout,
  // request_timeout and max_response_bytes (resolved: api_server must not
  // be empty). InvalidArgument if they do not validate.
  static absl::StatusOr<std::unique_ptr<ApiClient>> Create(
      const LauncherOptions& options);
  ~ApiClient();
  ApiClient(const ApiClient&) = delete;
  ApiClient& operator=(const ApiClient&) = delete;

  // `method` ("GET", "POST", "DELETE") of api_server + `path_and_query`,
  // with `body` as application/json when not empty. Errors:
  //  - the API server's answer, for a non-2xx code: the code mapped (400
  //    and 422 InvalidArgument, 401 Unauthenticated, 403 PermissionDenied,
  //    404 NotFound, 409 AlreadyExists (reason AlreadyExists) or Aborted,
  //    410 Aborted, 429 ResourceExhausted, 504 DeadlineExceeded, other 5xx
  //    Unavailable, other 4xx FailedPrecondition), the message
  //    "kubernetes API METHOD PATH: HTTP CODE REASON: MESSAGE";
  //  - FailedPrecondition naming token_file if it cannot be read or is
  //    empty, and naming ca_file if the server's certificate does not
  //    verify against it;
  //  - Unavailable if the server cannot be reached, DeadlineExceeded after
  //    connect_timeout or request_timeout, ResourceExhausted if the
  //    response exceeds max_response_bytes.
  absl::StatusOr<Response> Call(absl::string_view method,
                                absl::string_view path_and_query,
                                absl::string_view body = "");

 private:
  explicit ApiClient(const LauncherOptions& options) : options_(options) {}

  // An idle libcurl easy handle, or a new one.
  void* TakeHandle();
  void ReturnHandle(void* handle);

  const LauncherOptions options_;
  absl::Mutex mu_;
  // Idle CURL* handles, each keeping its connection.
  std::vector<void*> idle_ ABSL_GUARDED_BY(mu_);
};

// "METHOD PATH: HTTP CODE REASON: MESSAGE" of an API server's answer mapped
// to a status (as Call does); `body` is its Status object, if it is one.
absl::Status StatusFromApiResponse(absl::string_view method,
                                   absl::string_view path, int http_code,
                                   absl::string_view body);

// "%"-encodes a query parameter's value (RFC 3986 unreserved characters
// are kept).
std::string QueryEscape(absl::string_view value);

}  // namespace bnn::server::kubernetes

#endif  // BNN_SERVER_JOBS_KUBERNETES_API_CLIENT_H_
