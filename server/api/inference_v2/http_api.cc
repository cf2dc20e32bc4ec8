#include "server/api/inference_v2/http_api.h"

#include <string_view>
#include <utility>
#include <vector>

#include <absl/strings/str_cat.h>
#include <absl/strings/str_split.h>
#include <absl/synchronization/notification.h>
#include <absl/time/clock.h>
#include <spdlog/spdlog.h>

#include "bnn/status.h"

#include "server/api/inference_v2/json_codec.h"
#include "server/auth/authenticator.h"
#include "server/common/status_util.h"
#include "server/common/user_text.h"

namespace bnn::server::oip {
namespace {

constexpr char kJson[] = "application/json";

HttpServer::Response Json(int status, std::string body) {
  HttpServer::Response response;
  response.status = status;
  response.content_type = kJson;
  response.body = std::move(body);
  return response;
}

// A health answer: 200 for true, 400 for false, empty bodies (the
// specification's health responses).
HttpServer::Response Health(bool ok) {
  HttpServer::Response response;
  response.status = ok ? 200 : 400;
  return response;
}

HttpServer::Response Failure(const absl::Status& status) {
  const HttpStatus http = ToHttpStatus(status);
  return Json(http.code, ErrorJson(http.message));
}

// What a path below /v2 asks for.
struct Endpoint {
  // The protocol's method ("ModelInfer"), or empty for no endpoint.
  std::string rpc;
  std::string model;
  std::string version;
  // The HTTP method it takes.
  const char* method = "GET";
};

Endpoint Parse(absl::string_view path) {
  Endpoint e;
  if (path == "/v2") {
    e.rpc = "ServerMetadata";
    return e;
  }
  if (path == "/v2/health/live") {
    e.rpc = "ServerLive";
    return e;
  }
  if (path == "/v2/health/ready") {
    e.rpc = "ServerReady";
    return e;
  }
  if (!absl::ConsumePrefix(&path, "/v2/models/")) return e;
  std::vector<std::string> parts = absl::StrSplit(path, '/');
  if (parts.empty() || parts[0].empty()) return e;
  e.model = parts[0];
  size_t next = 1;
  if (parts.size() >= 3 && parts[1] == "versions" && !parts[2].empty()) {
    e.version = parts[2];
    next = 3;
  }
  if (parts.size() == next) {
    e.rpc = "ModelMetadata";
  } else if (parts.size() == next + 1 && parts[next] == "ready") {
    e.rpc = "ModelReady";
  } else if (parts.size() == next + 1 && parts[next] == "infer") {
    e.rpc = "ModelInfer";
    e.method = "POST";
  }
  return e;
}

// Answers one request of `endpoint` (authorised as `caller`); on failure
// sets `status` instead, which the caller converts.
HttpServer::Response Answer(InferenceApi* api, const Endpoint& endpoint,
                            const HttpServer::Request& request,
                            const std::string& caller, absl::Status* status) {
  if (endpoint.rpc == "ServerLive") return Health(true);
  if (endpoint.rpc == "ServerReady") return Health(api->Ready());
  if (endpoint.rpc == "ServerMetadata") {
    inference::ServerMetadataResponse metadata;
    api->ServerMetadata(&metadata);
    return Json(200, ServerMetadataJson(metadata));
  }
  if (endpoint.rpc == "ModelReady") {
    const absl::StatusOr<bool> ready =
        api->ModelReady(endpoint.model, endpoint.version);
    *status = ready.status();
    return ready.ok() ? Health(*ready) : HttpServer::Response();
  }
  if (endpoint.rpc == "ModelMetadata") {
    inference::ModelMetadataResponse metadata;
    *status = api->ModelMetadata(endpoint.model, endpoint.version, &metadata);
    return status->ok() ? Json(200, ModelMetadataJson(metadata))
                        : HttpServer::Response();
  }
  // ModelInfer.
  absl::StatusOr<inference::ModelInferRequest> infer =
      ParseInferRequest(request.body);
  if (!infer.ok()) {
    *status = infer.status();
    return HttpServer::Response();
  }
  infer->set_model_name(endpoint.model);
  infer->set_model_version(endpoint.version);
  BnnServiceImpl::ForeignCall call;
  call.rpc = absl::StrCat(kRestPrefix, endpoint.rpc);
  call.client = ClientKey(request.peer, caller);
  call.cancelled = [api] { return api->Cancelled(); };
  inference::ModelInferResponse response;
  absl::Notification done;
  api->ModelInfer(std::move(call), &*infer, &response,
                  [status, &done](absl::Status result) {
                    *status = std::move(result);
                    done.Notify();
                  });
  done.WaitForNotification();
  return status->ok() ? Json(200, InferResponseJson(response))
                      : HttpServer::Response();
}

}  // namespace

HttpServer::Response JsonRefusal(int status, const std::string& message) {
  return Json(status, ErrorJson(message));
}

HttpServer::Route InferenceRoute(InferenceApi* api) {
  HttpServer::Route route;
  route.path = "/v2";
  route.subtree = true;
  route.methods = {"GET", "HEAD", "POST"};
  route.handler = [api](const HttpServer::Request& request) {
    const absl::Time start = absl::Now();
    const Endpoint endpoint = Parse(request.path);
    HttpServer::Response response;
    absl::Status status;
    std::string label = "rest";
    if (endpoint.rpc.empty()) {
      response = JsonRefusal(
          404, absl::StrCat("no endpoint of the inference protocol at ",
                            SafeText(request.path, 256)));
    } else if (request.method != endpoint.method &&
               !(request.method == "HEAD" &&
                 std::string_view(endpoint.method) == "GET")) {
      response = JsonRefusal(
          405, absl::StrCat(request.path, " takes ", endpoint.method));
    } else {
      label = absl::StrCat(kRestPrefix, endpoint.rpc);
      std::vector<absl::string_view> authorization(
          request.authorization.begin(), request.authorization.end());
      const absl::StatusOr<std::string> caller =
          api->Authorize(authorization, endpoint.rpc);
      if (!caller.ok()) {
        status = caller.status();
      } else if (api->draining() && endpoint.rpc != "ServerLive" &&
                 endpoint.rpc != "ServerReady") {
        status = absl::UnavailableError("the server is shutting down");
      } else {
        response = Answer(api, endpoint, request, *caller, &status);
      }
      status = api->RecordOutcome(label, request.peer, start, status);
      if (!status.ok()) response = Failure(status);
    }
    spdlog::info("http method={} path={} status={} peer={} latency_ms={}",
                 request.method, SafeText(request.path, 256), response.status,
                 request.peer, absl::ToDoubleMilliseconds(absl::Now() - start));
    return response;
  };
  return route;
}

}  // namespace bnn::server::oip
