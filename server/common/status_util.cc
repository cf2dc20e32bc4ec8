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

HttpStatus ToHttpStatus(const absl::Status& status) {
  HttpStatus out;
  out.message =
      std::string(Utf8Prefix(status.message(), kMaxStatusMessageBytes));
  switch (status.code()) {
    case absl::StatusCode::kOk:
      out.code = 200;
      break;
    case absl::StatusCode::kInvalidArgument:
    case absl::StatusCode::kFailedPrecondition:
    case absl::StatusCode::kOutOfRange:
      out.code = 400;
      break;
    case absl::StatusCode::kUnauthenticated:
      out.code = 401;
      break;
    case absl::StatusCode::kPermissionDenied:
      out.code = 403;
      break;
    case absl::StatusCode::kNotFound:
      out.code = 404;
      break;
    case absl::StatusCode::kAlreadyExists:
    case absl::StatusCode::kAborted:
      out.code = 409;
      break;
    case absl::StatusCode::kResourceExhausted:
      out.code = 429;
      break;
    case absl::StatusCode::kCancelled:
      out.code = 499;
      break;
    case absl::StatusCode::kUnimplemented:
      out.code = 501;
      break;
    case absl::StatusCode::kUnavailable:
      out.code = 503;
      break;
    case absl::StatusCode::kDeadlineExceeded:
      out.code = 504;
      break;
    default:
      out.code = 500;
      break;
  }
  return out;
}

std::string HideDataDir(absl::string_view text, absl::string_view data_dir,
                        absl::string_view blob_dir) {
  std::string out(text);
  // The blob directory first: it may lie inside the data directory.
  if (!blob_dir.empty()) {
    absl::StrReplaceAll({{absl::StrCat(blob_dir, "/"), "<blob-dir>/"}}, &out);
  }
  if (!data_dir.empty()) {
    absl::StrReplaceAll({{absl::StrCat(data_dir, "/"), "<data-dir>/"}}, &out);
  }
  return out;
}

absl::Status HideDataDir(const absl::Status& status, absl::string_view data_dir,
                         absl::string_view blob_dir) {
  if (status.ok() ||
      ((data_dir.empty() || !absl::StrContains(status.message(), data_dir)) &&
       (blob_dir.empty() || !absl::StrContains(status.message(), blob_dir)))) {
    return status;
  }
  return absl::Status(status.code(),
                      HideDataDir(status.message(), data_dir, blob_dir));
}

}  // namespace bnn::server
