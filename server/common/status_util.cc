#include "server/common/status_util.h"

#include <string>

#include <absl/strings/match.h>
#include <absl/strings/str_cat.h>
#include <absl/strings/str_replace.h>
#include <absl/strings/string_view.h>

#include "server/common/user_text.h"

namespace bnn::server {

grpc::Status ToGrpcStatus(const absl::Status& status) {
  if (status.ok()) return grpc::Status::OK;
  return grpc::Status(
      static_cast<grpc::StatusCode>(status.code()),
      std::string(Utf8Prefix(status.message(), kMaxStatusMessageBytes)));
}

std::string HideDataDir(absl::string_view text, absl::string_view data_dir) {
  if (data_dir.empty()) return std::string(text);
  return absl::StrReplaceAll(text,
                             {{absl::StrCat(data_dir, "/"), "<data-dir>/"}});
}

absl::Status HideDataDir(const absl::Status& status,
                         absl::string_view data_dir) {
  if (status.ok() || data_dir.empty() ||
      !absl::StrContains(status.message(), data_dir)) {
    return status;
  }
  return absl::Status(status.code(), HideDataDir(status.message(), data_dir));
}

}  // namespace bnn::server
