// One log line per RPC (method, peer, status code, latency, request id) and
// the request id of each call, through a gRPC server interceptor.
//
// Clients may name a call with the metadata "x-request-id"; a call without a
// usable one (IsUsableRequestId) gets a new random id. Either way the id is
// sent back in the response's initial and trailing metadata and appears in
// the call's log line, so a client's report and the server's log can be
// matched.
#ifndef BNN_SERVER_COMMON_REQUEST_LOG_H_
#define BNN_SERVER_COMMON_REQUEST_LOG_H_

#include <cstddef>
#include <memory>
#include <string>

#include <absl/strings/string_view.h>
#include <grpcpp/support/server_interceptor.h>

namespace bnn::server {

inline constexpr char kRequestIdKey[] = "x-request-id";
inline constexpr size_t kMaxRequestIdBytes = 128;

// 1 to kMaxRequestIdBytes bytes of printable ASCII without spaces (a UUID,
// a trace id, ...). Other values sent by a client are replaced.
bool IsUsableRequestId(absl::string_view id);
// 32 random hex digits.
std::string NewRequestId();

// For ServerBuilder::experimental().SetInterceptorCreators. Lines of the
// grpc.health.v1 and reflection services are logged at debug level, the
// others at info.
std::unique_ptr<grpc::experimental::ServerInterceptorFactoryInterface>
NewRequestLogInterceptorFactory();

}  // namespace bnn::server

#endif  // BNN_SERVER_COMMON_REQUEST_LOG_H_
