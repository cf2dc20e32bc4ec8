// The single conversion from absl::Status to the wire status: a gRPC status,
// or for the HTTP APIs an HTTP status code and message.
#ifndef BNN_SERVER_COMMON_STATUS_UTIL_H_
#define BNN_SERVER_COMMON_STATUS_UTIL_H_

#include <cstddef>
#include <string>

#include <absl/status/status.h>
#include <absl/strings/string_view.h>
#include <grpcpp/support/status.h>

namespace bnn::server {

// Messages longer than this are cut so that a pathological error (e.g. one
// listing every row) cannot blow up trailing metadata.
inline constexpr size_t kMaxStatusMessageBytes = 1024;

// Casts the code (absl and gRPC share numbering) and truncates the message to
// kMaxStatusMessageBytes.
grpc::Status ToGrpcStatus(const absl::Status& status);

// The HTTP form of a status: its code by the usual correspondence of gRPC
// and HTTP codes (that of Google's API design guide and grpc-gateway: 200
// OK, 400 INVALID_ARGUMENT, FAILED_PRECONDITION and OUT_OF_RANGE, 401
// UNAUTHENTICATED, 403 PERMISSION_DENIED, 404 NOT_FOUND, 409 ALREADY_EXISTS
// and ABORTED, 429 RESOURCE_EXHAUSTED, 499 CANCELLED, 501 UNIMPLEMENTED, 503
// UNAVAILABLE, 504 DEADLINE_EXCEEDED, 500 otherwise), and the message cut
// as ToGrpcStatus cuts it.
struct HttpStatus {
  int code = 200;
  std::string message;
};
HttpStatus ToHttpStatus(const absl::Status& status);

// `status` with every path under the server's data directory `data_dir`
// written relative to "<data-dir>/", and under its --blob-dir `blob_dir`
// (if set) relative to "<blob-dir>/": errors from the store name the files
// they concern (the server logs them as they are), but clients must not
// learn the server's file system layout.
absl::Status HideDataDir(const absl::Status& status, absl::string_view data_dir,
                         absl::string_view blob_dir = "");
std::string HideDataDir(absl::string_view text, absl::string_view data_dir,
                        absl::string_view blob_dir = "");

}  // namespace bnn::server

#endif  // BNN_SERVER_COMMON_STATUS_UTIL_H_
