#include "server/store/metadata_store.h"

#include <absl/strings/escaping.h>
#include <absl/strings/str_cat.h>

#include "bnn/io/record.h"
#include "bnn/status.h"

namespace bnn::server {
namespace {

RecordFormat FormatOf(RecordKind kind) {
  switch (kind) {
    case RecordKind::kDatasetVersion:
      return {"BNNMDSV1", 1, "dataset version record"};
    case RecordKind::kSnapshot:
      return {"BNNMSNP1", 1, "snapshot record"};
    case RecordKind::kJob:
      return {"BNNMJOB1", 1, "job record"};
    case RecordKind::kModel:
      return {"BNNMMOD1", 1, "model record"};
    case RecordKind::kModelVersion:
      return {"BNNMMVR1", 1, "model version record"};
    case RecordKind::kModelAlias:
      return {"BNNMALS1", 1, "model alias record"};
  }
  return {"BNNMUNK1", 1, "record"};
}

}  // namespace

absl::StatusOr<std::string> EncodePayload(
    RecordKind kind, const google::protobuf::MessageLite& message) {
  return EncodeRecordMessage(FormatOf(kind), message);
}

absl::Status DecodePayload(RecordKind kind, absl::string_view payload,
                           absl::string_view what,
                           google::protobuf::MessageLite* message) {
  const absl::StatusOr<uint32_t> version =
      DecodeRecordMessage(FormatOf(kind), payload, message);
  if (version.ok()) return absl::OkStatus();
  const std::string text = absl::StrCat(
      what, ": stored record is unreadable: ", version.status().message());
  if (absl::IsFailedPrecondition(version.status())) {
    return absl::FailedPreconditionError(text);
  }
  return absl::DataLossError(text);
}

std::string EncodePageToken(absl::string_view list, int64_t key,
                            absl::string_view id) {
  store::PageTokenState state;
  state.set_list(std::string(list));
  state.set_key(key);
  state.set_id(std::string(id));
  return absl::WebSafeBase64Escape(state.SerializeAsString());
}

absl::StatusOr<store::PageTokenState> DecodePageToken(absl::string_view list,
                                                      absl::string_view token) {
  std::string bytes;
  store::PageTokenState state;
  if (!absl::WebSafeBase64Unescape(token, &bytes) ||
      !state.ParseFromString(bytes) || state.list() != list) {
    return absl::InvalidArgumentError(absl::StrCat(
        "page_token: not a page token of the list of ", list,
        " (pass the next_page_token of the previous page unchanged)"));
  }
  return state;
}

absl::Status ValidatePageRequest(const PageRequest& page) {
  if (page.page_size < 1 || page.page_size > kMaxPageSize) {
    return absl::InvalidArgumentError(absl::StrCat(
        "page_size: must be in [1, ", kMaxPageSize, "], got ", page.page_size));
  }
  return absl::OkStatus();
}

}  // namespace bnn::server
