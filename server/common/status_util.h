// The single conversion from absl::Status to the wire status.
#ifndef BNN_SERVER_COMMON_STATUS_UTIL_H_
#define BNN_SERVER_COMMON_STATUS_UTIL_H_

#include <cstddef>

#include <absl/status/status.h>
#include <grpcpp/support/status.h>

namespace bnn::server {

// Messages longer than this are cut so that a pathological error (e.g. one
// listing every row) cannot blow up trailing metadata.
inline constexpr size_t kMaxStatusMessageBytes = 1024;

// Casts the code (absl and gRPC share numbering) and truncates the message to
// kMaxStatusMessageBytes.
grpc::Status ToGrpcStatus(const absl::Status& status);

}  // namespace bnn::server

#endif  // BNN_SERVER_COMMON_STATUS_UTIL_H_
