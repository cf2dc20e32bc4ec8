#include "server/common/status_util.h"

#include <string>

#include <absl/status/status.h>
#include <gtest/gtest.h>

namespace bnn::server {
namespace {

TEST(ToGrpcStatusTest, OkIsOk) {
  EXPECT_TRUE(ToGrpcStatus(absl::OkStatus()).ok());
}

TEST(ToGrpcStatusTest, KeepsCodeAndMessage) {
  const grpc::Status status =
      ToGrpcStatus(absl::NotFoundError("dataset_id 'ds-1' not found"));
  EXPECT_EQ(status.error_code(), grpc::StatusCode::NOT_FOUND);
  EXPECT_EQ(status.error_message(), "dataset_id 'ds-1' not found");
}

TEST(ToGrpcStatusTest, EveryCodeMapsToTheSameNumber) {
  for (int code = 1; code <= 16; ++code) {
    const grpc::Status status = ToGrpcStatus(
        absl::Status(static_cast<absl::StatusCode>(code), "message"));
    EXPECT_EQ(static_cast<int>(status.error_code()), code);
  }
}

TEST(ToGrpcStatusTest, TruncatesLongMessages) {
  const grpc::Status status =
      ToGrpcStatus(absl::InvalidArgumentError(std::string(5000, 'x')));
  EXPECT_EQ(status.error_message(), std::string(kMaxStatusMessageBytes, 'x'));
}

TEST(ToGrpcStatusTest, TruncationDoesNotSplitAUtf8Character) {
  // 1023 ASCII bytes, then a 2-byte character straddling the limit.
  const std::string message = std::string(1023, 'a') + "\xC3\xA9" + "tail";
  const grpc::Status status = ToGrpcStatus(absl::InternalError(message));
  EXPECT_EQ(status.error_message(), std::string(1023, 'a'));
}

TEST(HideDataDirTest, WritesDataDirectoryPathsRelatively) {
  const absl::Status status = absl::ResourceExhaustedError(
      "cannot write /var/lib/bnn/datasets/incoming-1.tmp: No space left; "
      "/var/lib/bnn/jobs too");
  const absl::Status hidden = HideDataDir(status, "/var/lib/bnn");
  EXPECT_EQ(hidden.code(), absl::StatusCode::kResourceExhausted);
  EXPECT_EQ(hidden.message(),
            "cannot write <data-dir>/datasets/incoming-1.tmp: No space left; "
            "<data-dir>/jobs too");
  EXPECT_EQ(HideDataDir(absl::OkStatus(), "/var/lib/bnn"), absl::OkStatus());
  EXPECT_EQ(HideDataDir("no path here", "/var/lib/bnn"), "no path here");
}

TEST(HideDataDirTest, WritesBlobDirectoryPathsRelatively) {
  const absl::Status status = absl::DataLossError(
      "cannot read /mnt/blobs/objects/ab/abcd: bad; /var/lib/bnn/x too");
  EXPECT_EQ(HideDataDir(status, "/var/lib/bnn", "/mnt/blobs").message(),
            "cannot read <blob-dir>/objects/ab/abcd: bad; <data-dir>/x too");
  // Only the blob directory in the message.
  EXPECT_EQ(HideDataDir(absl::DataLossError("/mnt/blobs/tmp/t: bad"),
                        "/var/lib/bnn", "/mnt/blobs")
                .message(),
            "<blob-dir>/tmp/t: bad");
}

TEST(StatusUtilTest, HttpStatusOfEachCode) {
  EXPECT_EQ(ToHttpStatus(absl::OkStatus()).code, 200);
  EXPECT_EQ(ToHttpStatus(absl::InvalidArgumentError("x")).code, 400);
  EXPECT_EQ(ToHttpStatus(absl::FailedPreconditionError("x")).code, 400);
  EXPECT_EQ(ToHttpStatus(absl::UnauthenticatedError("x")).code, 401);
  EXPECT_EQ(ToHttpStatus(absl::PermissionDeniedError("x")).code, 403);
  EXPECT_EQ(ToHttpStatus(absl::NotFoundError("x")).code, 404);
  EXPECT_EQ(ToHttpStatus(absl::AlreadyExistsError("x")).code, 409);
  EXPECT_EQ(ToHttpStatus(absl::ResourceExhaustedError("x")).code, 429);
  EXPECT_EQ(ToHttpStatus(absl::CancelledError("x")).code, 499);
  EXPECT_EQ(ToHttpStatus(absl::UnavailableError("x")).code, 503);
  EXPECT_EQ(ToHttpStatus(absl::DeadlineExceededError("x")).code, 504);
  EXPECT_EQ(ToHttpStatus(absl::DataLossError("x")).code, 500);
  EXPECT_EQ(ToHttpStatus(absl::InternalError("x")).code, 500);
  // The message is cut as ToGrpcStatus cuts it.
  const HttpStatus cut =
      ToHttpStatus(absl::InvalidArgumentError(std::string(5000, 'm')));
  EXPECT_EQ(cut.message.size(), kMaxStatusMessageBytes);
}

}  // namespace
}  // namespace bnn::server
