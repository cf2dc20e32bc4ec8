#include "server/jobs/kubernetes/api_client.h"

#include <curl/curl.h>
#include <fstream>
#include <mutex>
#include <sstream>
#include <utility>

#include <absl/strings/ascii.h>
#include <absl/strings/str_cat.h>
#include <absl/strings/str_format.h>
#include <absl/strings/strip.h>
#include <nlohmann/json.hpp>

#include "bnn/status.h"

namespace bnn::server::kubernetes {
namespace {

// The longest API server message kept in a status.
constexpr size_t kMaxMessageBytes = 1024;

struct Sink {
  std::string* body;
  int64_t max_bytes;
  bool overflowed = false;
};

size_t Write(char* data, size_t size, size_t count, void* user) {
  auto* sink = static_cast<Sink*>(user);
  const size_t bytes = size * count;
  if (static_cast<int64_t>(sink->body->size() + bytes) > sink->max_bytes) {
    sink->overflowed = true;
    return 0;  // libcurl stops with CURLE_WRITE_ERROR
  }
  sink->body->append(data, bytes);
  return bytes;
}

void GlobalInit() {
  static std::once_flag once;
  std::call_once(once, [] { curl_global_init(CURL_GLOBAL_DEFAULT); });
}

absl::StatusCode CodeOfHttp(int http_code, absl::string_view reason) {
  switch (http_code) {
    case 400:
    case 422:
      return absl::StatusCode::kInvalidArgument;
    case 401:
      return absl::StatusCode::kUnauthenticated;
    case 403:
      return absl::StatusCode::kPermissionDenied;
    case 404:
      return absl::StatusCode::kNotFound;
    case 409:
      return reason == "AlreadyExists" ? absl::StatusCode::kAlreadyExists
                                       : absl::StatusCode::kAborted;
    case 410:
      return absl::StatusCode::kAborted;
    case 429:
      return absl::StatusCode::kResourceExhausted;
    case 504:
      return absl::StatusCode::kDeadlineExceeded;
    default:
      return http_code >= 500 ? absl::StatusCode::kUnavailable
                              : absl::StatusCode::kFailedPrecondition;
  }
}

// The token file's contents without surrounding whitespace.
absl::StatusOr<std::string> ReadToken(const std::string& path) {
  std::ifstream file(path);
  std::stringstream text;
  text << file.rdbuf();
  std::string token(absl::StripAsciiWhitespace(text.str()));
  if (!file || token.empty()) {
    return absl::FailedPreconditionError(absl::StrCat(
        "kubernetes API: token_file ", path, " cannot be read or is empty"));
  }
  for (char c : token) {
    // A header line must not be split or forged.
    if (c == '\r' || c == '\n' || c == '\0') {
      return absl::FailedPreconditionError(absl::StrCat(
          "kubernetes API: token_file ", path, " holds more than one line"));
    }
  }
  return token;
}

}  // namespace

std::string QueryEscape(absl::string_view value) {
  std::string out;
  for (char c : value) {
    if (absl::ascii_isalnum(static_cast<uint8_t>(c)) || c == '-' || c == '_' ||
        c == '.' || c == '~') {
      out.push_back(c);
    } else {
      absl::StrAppendFormat(&out, "%%%02X", static_cast<uint8_t>(c));
    }
  }
  return out;
}

absl::Status StatusFromApiResponse(absl::string_view method,
                                   absl::string_view path, int http_code,
                                   absl::string_view body) {
  std::string reason, message;
  nlohmann::json status =
      nlohmann::json::parse(body.begin(), body.end(), nullptr, false);
  if (!status.is_discarded() && status.is_object() &&
      status.value("kind", "") == "Status") {
    if (status.contains("reason") && status["reason"].is_string()) {
      reason = status["reason"].get<std::string>();
    }
    if (status.contains("message") && status["message"].is_string()) {
      message = status["message"].get<std::string>();
    }
  } else {
    // Not an API server's Status (a proxy's page, say): its start.
    message = std::string(body.substr(0, 200));
  }
  if (message.size() > kMaxMessageBytes) {
    message.resize(kMaxMessageBytes);
    message += "...";
  }
  return absl::Status(
      CodeOfHttp(http_code, reason),
      absl::StrCat("kubernetes API ", method, " ", path, ": HTTP ", http_code,
                   reason.empty() ? "" : " ", reason,
                   message.empty() ? "" : ": ", message));
}

absl::StatusOr<std::unique_ptr<ApiClient>> ApiClient::Create(
    const LauncherOptions& options) {
  if (options.api_server.empty()) {
    return absl::InvalidArgumentError(
        "kubernetes API client: api_server is empty (ResolveInCluster fills "
        "it in)");
  }
  BNN_RETURN_IF_ERROR(options.Validate());
  GlobalInit();
  return std::unique_ptr<ApiClient>(new ApiClient(options));
}

ApiClient::~ApiClient() {
  for (void* handle : idle_) curl_easy_cleanup(static_cast<CURL*>(handle));
}

void* ApiClient::TakeHandle() {
  {
    absl::MutexLock lock(&mu_);
    if (!idle_.empty()) {
      void* handle = idle_.back();
      idle_.pop_back();
      return handle;
    }
  }
  return curl_easy_init();
}

void ApiClient::ReturnHandle(void* handle) {
  absl::MutexLock lock(&mu_);
  idle_.push_back(handle);
}

absl::StatusOr<ApiClient::Response> ApiClient::Call(
    absl::string_view method, absl::string_view path_and_query,
    absl::string_view body) {
  BNN_ASSIGN_OR_RETURN(const std::string token, ReadToken(options_.token_file));
  CURL* curl = static_cast<CURL*>(TakeHandle());
  if (curl == nullptr) {
    return absl::ResourceExhaustedError(
        "kubernetes API: curl_easy_init failed");
  }
  // Settings of an earlier call are dropped; the connection stays.
  curl_easy_reset(curl);

  const std::string url = absl::StrCat(options_.api_server, path_and_query);
  const std::string method_text(method);
  const std::string path(path_and_query.substr(0, path_and_query.find('?')));
  Response response;
  Sink sink{&response.body, options_.max_response_bytes};
  char error[CURL_ERROR_SIZE] = {0};

  curl_slist* headers = nullptr;
  const std::string authorization =
      absl::StrCat("Authorization: Bearer ", token);
  headers = curl_slist_append(headers, authorization.c_str());
  headers = curl_slist_append(headers, "Accept: application/json");
  if (!body.empty()) {
    headers = curl_slist_append(headers, "Content-Type: application/json");
  }
  curl_easy_setopt(curl, CURLOPT_URL, url.c_str());
  curl_easy_setopt(curl, CURLOPT_PROTOCOLS_STR, "https");
  curl_easy_setopt(curl, CURLOPT_FOLLOWLOCATION, 0L);
  curl_easy_setopt(curl, CURLOPT_NOSIGNAL, 1L);
  curl_easy_setopt(curl, CURLOPT_CAINFO, options_.ca_file.c_str());
  // Only the CA file: not the system's trust store.
  curl_easy_setopt(curl, CURLOPT_CAPATH, static_cast<char*>(nullptr));
  curl_easy_setopt(curl, CURLOPT_SSL_VERIFYPEER, 1L);
  curl_easy_setopt(curl, CURLOPT_SSL_VERIFYHOST, 2L);
  curl_easy_setopt(
      curl, CURLOPT_CONNECTTIMEOUT_MS,
      static_cast<long>(absl::ToInt64Milliseconds(options_.connect_timeout)));
  curl_easy_setopt(
      curl, CURLOPT_TIMEOUT_MS,
      static_cast<long>(absl::ToInt64Milliseconds(options_.request_timeout)));
  curl_easy_setopt(curl, CURLOPT_HTTPHEADER, headers);
  curl_easy_setopt(curl, CURLOPT_USERAGENT, "bnn-server kubernetes-launcher");
  curl_easy_setopt(curl, CURLOPT_WRITEFUNCTION, &Write);
  curl_easy_setopt(curl, CURLOPT_WRITEDATA, &sink);
  curl_easy_setopt(curl, CURLOPT_ERRORBUFFER, error);
  if (method_text == "GET") {
    curl_easy_setopt(curl, CURLOPT_HTTPGET, 1L);
  } else {
    curl_easy_setopt(curl, CURLOPT_CUSTOMREQUEST, method_text.c_str());
  }
  if (!body.empty()) {
    curl_easy_setopt(curl, CURLOPT_POSTFIELDS, body.data());
    curl_easy_setopt(curl, CURLOPT_POSTFIELDSIZE_LARGE,
                     static_cast<curl_off_t>(body.size()));
  }
  const CURLcode result = curl_easy_perform(curl);
  long http_code = 0;
  curl_easy_getinfo(curl, CURLINFO_RESPONSE_CODE, &http_code);
  // The header list holds the token: drop it before anything else.
  curl_easy_setopt(curl, CURLOPT_HTTPHEADER, static_cast<curl_slist*>(nullptr));
  curl_slist_free_all(headers);
  curl_easy_setopt(curl, CURLOPT_ERRORBUFFER, static_cast<char*>(nullptr));
  if (result == CURLE_OK) {
    ReturnHandle(curl);
  } else {
    // A failed connection is not reused.
    curl_easy_cleanup(curl);
  }

  const std::string where =
      absl::StrCat("kubernetes API ", method, " ", options_.api_server, path);
  const std::string detail =
      error[0] != '\0' ? error : curl_easy_strerror(result);
  switch (result) {
    case CURLE_OK:
      break;
    case CURLE_WRITE_ERROR:
      if (sink.overflowed) {
        return absl::ResourceExhaustedError(
            absl::StrCat(where, ": the response exceeds max_response_bytes (",
                         options_.max_response_bytes, ")"));
      }
      return absl::InternalError(absl::StrCat(where, ": ", detail));
    case CURLE_OPERATION_TIMEDOUT:
      return absl::DeadlineExceededError(absl::StrCat(
          where, ": timed out (connect_timeout ",
          absl::FormatDuration(options_.connect_timeout), ", request_timeout ",
          absl::FormatDuration(options_.request_timeout), "): ", detail));
    case CURLE_PEER_FAILED_VERIFICATION:
    case CURLE_SSL_CACERT_BADFILE:
      return absl::FailedPreconditionError(
          absl::StrCat(where,
                       ": the API server's TLS certificate does not "
                       "verify against ca_file ",
                       options_.ca_file, ": ", detail));
    case CURLE_UNSUPPORTED_PROTOCOL:
      return absl::InvalidArgumentError(absl::StrCat(where, ": ", detail));
    default:
      return absl::UnavailableError(absl::StrCat(where, ": ", detail));
  }
  if (http_code < 200 || http_code >= 300) {
    return StatusFromApiResponse(method, path, static_cast<int>(http_code),
                                 response.body);
  }
  response.http_code = static_cast<int>(http_code);
  return response;
}

}  // namespace bnn::server::kubernetes
