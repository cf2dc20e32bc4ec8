#include "tests/test_util/fake_k8s_api.h"

#include <fstream>
#include <utility>
#include <vector>

#include <absl/strings/str_cat.h>
#include <absl/strings/str_split.h>
#include <absl/strings/strip.h>

#include "tests/test_util/http_client.h"

namespace bnn::testing {

absl::StatusOr<std::unique_ptr<FakeK8sApi>> FakeK8sApi::Start(
    const std::string& dir, absl::string_view token,
    absl::Duration startup_timeout) {
  std::unique_ptr<FakeK8sApi> fake(new FakeK8sApi);
  fake->token_file_ = dir + "/token";
  fake->log_path_ = dir + "/fake_k8s_api.log";
  if (absl::Status status = fake->SetToken(token); !status.ok()) {
    return status;
  }
  absl::StatusOr<std::unique_ptr<ChildProcess>> process =
      ChildProcess::Start({BNN_FAKE_K8S_PYTHON, BNN_FAKE_K8S_SCRIPT,
                           "--token-file", fake->token_file_, "--dir", dir},
                          fake->log_path_);
  if (!process.ok()) return process.status();
  fake->process_ = *std::move(process);
  absl::StatusOr<std::string> line =
      fake->process_->WaitForLine("fake-k8s-api listening ", startup_timeout);
  if (!line.ok()) {
    return absl::Status(
        line.status().code(),
        absl::StrCat("fake_k8s_api.py did not start: ", line.status().message(),
                     "\n", fake->Log()));
  }
  for (absl::string_view part : absl::StrSplit(*line, ' ')) {
    if (absl::ConsumePrefix(&part, "api=")) fake->api_url_ = std::string(part);
    if (absl::ConsumePrefix(&part, "control=")) {
      fake->control_ = std::string(part);
    }
    if (absl::ConsumePrefix(&part, "ca=")) fake->ca_file_ = std::string(part);
  }
  if (fake->api_url_.empty() || fake->control_.empty() ||
      fake->ca_file_.empty()) {
    return absl::InternalError(
        absl::StrCat("fake_k8s_api.py: unexpected line: ", *line));
  }
  return fake;
}

absl::Status FakeK8sApi::SetToken(absl::string_view token) {
  // Written to a new file and renamed, as the kubelet swaps projected
  // tokens: a reader sees the old token or the new one, never half.
  const std::string temp = token_file_ + ".new";
  {
    std::ofstream file(temp, std::ios::trunc);
    file << token << "\n";
    if (!file) return absl::InternalError("cannot write " + temp);
  }
  if (std::rename(temp.c_str(), token_file_.c_str()) != 0) {
    return absl::InternalError("cannot rename " + temp);
  }
  return absl::OkStatus();
}

absl::StatusOr<std::string> FakeK8sApi::Control(absl::string_view method,
                                                absl::string_view path,
                                                absl::string_view body) {
  absl::StatusOr<HttpResponse> response =
      HttpRequest(control_, method, path, body,
                  {{"Content-Type", "application/json"}}, absl::Seconds(10));
  if (!response.ok()) return response.status();
  if (response->status == 404) {
    return absl::NotFoundError(absl::StrCat(path, ": ", response->body));
  }
  if (response->status != 200) {
    return absl::InternalError(
        absl::StrCat(path, ": HTTP ", response->status, " ", response->body));
  }
  return response->body;
}

absl::StatusOr<std::string> FakeK8sApi::Requests() {
  return Control("GET", "/requests", "");
}

absl::StatusOr<std::string> FakeK8sApi::Jobs() {
  return Control("GET", "/jobs", "");
}

absl::Status FakeK8sApi::SetJobStatus(absl::string_view job_namespace,
                                      absl::string_view name,
                                      absl::string_view status_json) {
  return Control("POST",
                 absl::StrCat("/jobs/", job_namespace, "/", name, "/status"),
                 status_json)
      .status();
}

absl::Status FakeK8sApi::Inject(absl::string_view inject_json) {
  return Control("POST", "/inject", inject_json).status();
}

}  // namespace bnn::testing
