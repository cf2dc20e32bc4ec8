#include "server/common/request_log.h"

#include <cstdint>

#include <absl/random/random.h>
#include <absl/status/status.h>
#include <absl/strings/match.h>
#include <absl/strings/str_format.h>
#include <absl/time/clock.h>
#include <absl/time/time.h>
#include <grpcpp/grpcpp.h>

#include "server/common/log.h"

namespace bnn::server {
namespace {

using grpc::experimental::InterceptionHookPoints;

// From creation (the call arrived) to the status it sends.
class RequestLogInterceptor final : public grpc::experimental::Interceptor {
 public:
  explicit RequestLogInterceptor(grpc::experimental::ServerRpcInfo* info)
      : info_(info),
        method_(info->method() == nullptr ? "" : info->method()),
        start_(absl::Now()),
        level_(absl::StartsWith(method_, "/grpc.") ? spdlog::level::debug
                                                   : spdlog::level::info) {}

  ~RequestLogInterceptor() override {
    // A call that ended without sending a status (cancelled).
    if (!logged_) Write(absl::StatusCode::kCancelled);
  }

  void Intercept(
      grpc::experimental::InterceptorBatchMethods* methods) override {
    if (methods->QueryInterceptionHookPoint(
            InterceptionHookPoints::POST_RECV_INITIAL_METADATA)) {
      peer_ = info_->server_context()->peer();
      const auto* metadata = methods->GetRecvInitialMetadata();
      if (const auto it = metadata->find(kRequestIdKey);
          it != metadata->end()) {
        const absl::string_view id(it->second.data(), it->second.size());
        if (IsUsableRequestId(id)) request_id_ = std::string(id);
      }
    }
    if (methods->QueryInterceptionHookPoint(
            InterceptionHookPoints::PRE_SEND_INITIAL_METADATA)) {
      methods->GetSendInitialMetadata()->emplace(kRequestIdKey, RequestId());
    }
    if (methods->QueryInterceptionHookPoint(
            InterceptionHookPoints::PRE_SEND_STATUS)) {
      methods->GetSendTrailingMetadata()->emplace(kRequestIdKey, RequestId());
      Write(
          static_cast<absl::StatusCode>(methods->GetSendStatus().error_code()));
    }
    methods->Proceed();
  }

 private:
  const std::string& RequestId() {
    if (request_id_.empty()) request_id_ = NewRequestId();
    return request_id_;
  }

  void Write(absl::StatusCode code) {
    logged_ = true;
    const double latency_ms = absl::ToDoubleMilliseconds(absl::Now() - start_);
    Log(level_, "rpc",
        {{"rpc", method_},
         {"peer", peer_},
         {"code", absl::StatusCodeToString(code)},
         {"latency_ms", latency_ms},
         {"request_id", RequestId()}});
  }

  // Only for the peer, read while the call certainly exists.
  grpc::experimental::ServerRpcInfo* const info_;
  const std::string method_;
  const absl::Time start_;
  const spdlog::level::level_enum level_;
  std::string peer_;
  std::string request_id_;
  bool logged_ = false;
};

class RequestLogFactory final
    : public grpc::experimental::ServerInterceptorFactoryInterface {
 public:
  grpc::experimental::Interceptor* CreateServerInterceptor(
      grpc::experimental::ServerRpcInfo* info) override {
    return new RequestLogInterceptor(info);
  }
};

}  // namespace

bool IsUsableRequestId(absl::string_view id) {
  if (id.empty() || id.size() > kMaxRequestIdBytes) return false;
  for (const char c : id) {
    if (c <= ' ' || c > '~') return false;
  }
  return true;
}

std::string NewRequestId() {
  thread_local absl::BitGen random;
  return absl::StrFormat("%016x%016x", absl::Uniform<uint64_t>(random),
                         absl::Uniform<uint64_t>(random));
}

std::unique_ptr<grpc::experimental::ServerInterceptorFactoryInterface>
NewRequestLogInterceptorFactory() {
  return std::make_unique<RequestLogFactory>();
}

}  // namespace bnn::server
