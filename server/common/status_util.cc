#include "server/common/status_util.h"

#include <string>

#include <absl/strings/string_view.h>

namespace bnn::server {

grpc::Status ToGrpcStatus(const absl::Status& status) {
  if (status.ok()) return grpc::Status::OK;
  absl::string_view message = status.message();
  if (message.size() > kMaxStatusMessageBytes) {
    size_t cut = kMaxStatusMessageBytes;
    // Back off to a UTF-8 character boundary (never split a code point).
    while (cut > 0 &&
           (static_cast<unsigned char>(message[cut]) & 0xC0) == 0x80) {
      --cut;
    }
    message = message.substr(0, cut);
  }
  return grpc::Status(static_cast<grpc::StatusCode>(status.code()),
                      std::string(message));
}

}  // namespace bnn::server
