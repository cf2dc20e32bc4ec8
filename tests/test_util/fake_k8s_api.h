// The fake Kubernetes API server (fake_k8s_api.py) as a child process, for
// the Kubernetes launcher's tests and bench/k8s: HTTPS on a free loopback
// port with a self-signed certificate made by openssl, checking every
// request's method, path, bearer token, headers and JSON body against the
// batch/v1 schema, plus the fake's control port (plain HTTP) to read what
// was requested and to change what it answers. No gtest here, so bench/
// programs use it too.
#ifndef BNN_TESTS_TEST_UTIL_FAKE_K8S_API_H_
#define BNN_TESTS_TEST_UTIL_FAKE_K8S_API_H_

#include <memory>
#include <string>

#include <absl/status/status.h>
#include <absl/status/statusor.h>
#include <absl/strings/string_view.h>
#include <absl/time/time.h>

#include "tests/test_util/subprocess.h"

namespace bnn::testing {

class FakeK8sApi {
 public:
  // Starts the fake with its token file, certificate and log in `dir`
  // (which must exist and outlive it), the token being `token`. Waits up
  // to `startup_timeout` for it to listen.
  static absl::StatusOr<std::unique_ptr<FakeK8sApi>> Start(
      const std::string& dir, absl::string_view token = "test-token-1",
      absl::Duration startup_timeout = absl::Seconds(30));
  // Kills the fake.
  ~FakeK8sApi() = default;

  // "https://127.0.0.1:PORT".
  const std::string& api_url() const { return api_url_; }
  // The PEM file clients must trust.
  const std::string& ca_file() const { return ca_file_; }
  // The token file the fake checks every request against (read per
  // request); clients may read the same file.
  const std::string& token_file() const { return token_file_; }
  // Rewrites the token file: from now on only `token` is accepted.
  absl::Status SetToken(absl::string_view token);

  // The JSON array of the API requests so far (fake_k8s_api.py, GET
  // /requests).
  absl::StatusOr<std::string> Requests();
  // The JSON array of the stored Jobs.
  absl::StatusOr<std::string> Jobs();
  // Replaces the status of Job `name` in `job_namespace` with the
  // JobStatus `status_json`; NotFound without such a Job.
  absl::Status SetJobStatus(absl::string_view job_namespace,
                            absl::string_view name,
                            absl::string_view status_json);
  // The next requests answer as `inject_json` says (fake_k8s_api.py, POST
  // /inject).
  absl::Status Inject(absl::string_view inject_json);

  // The fake's stderr so far.
  std::string Log() const { return ReadFileOrEmpty(log_path_); }

 private:
  FakeK8sApi() = default;
  absl::StatusOr<std::string> Control(absl::string_view method,
                                      absl::string_view path,
                                      absl::string_view body);

  std::unique_ptr<ChildProcess> process_;
  std::string api_url_;
  std::string control_;
  std::string ca_file_;
  std::string token_file_;
  std::string log_path_;
};

}  // namespace bnn::testing

#endif  // BNN_TESTS_TEST_UTIL_FAKE_K8S_API_H_
