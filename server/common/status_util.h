// The single conversion from absl::Status to the wire status.
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

// `status` with every path under the server's data directory `data_dir`
// written relative to "<data-dir>/": errors from the store name the files
// they concern (the server logs them as they are), but clients must not
// learn the server's file system layout.
absl::Status HideDataDir(const absl::Status& status,
                         absl::string_view data_dir);
std::string HideDataDir(absl::string_view text, absl::string_view data_dir);

}  // namespace bnn::server

#endif  // BNN_SERVER_COMMON_STATUS_UTIL_H_
