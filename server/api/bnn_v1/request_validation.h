// Checks of client requests, one function per rule set. Each returns
// InvalidArgument naming the offending field (as a path into the request,
// e.g. "rows[7].x[2]") and the violated constraint, or ResourceExhausted
// naming the server limit and its flag.
#ifndef BNN_SERVER_API_BNN_V1_REQUEST_VALIDATION_H_
#define BNN_SERVER_API_BNN_V1_REQUEST_VALIDATION_H_

#include <cstdint>
#include <optional>
#include <vector>

#include <absl/status/status.h>
#include <absl/status/statusor.h>
#include <absl/strings/string_view.h>
#include <absl/types/span.h>

#include "bnn/v1/bnn_service.pb.h"

#include "server/store/job_store.h"

namespace bnn::server {

// Server limits, set by flags.
struct ServerLimits {
  // --max-upload-rows
  int64_t max_upload_rows = 10'000'000;
  // --max-predict-rows
  int64_t max_predict_rows = 100'000;
  // --max-predict-samples
  int max_predict_samples = 4096;
  // --max-upload-bytes: the most message bytes one UploadDataset or
  // AppendRows stream may carry.
  int64_t max_upload_bytes = int64_t{1} << 30;
  // --max-snapshot-bytes: the largest snapshot ImportSnapshot accepts.
  int64_t max_snapshot_bytes = int64_t{2} << 30;
  // --max-message-bytes: the largest message the server accepts, and so the
  // largest Predict response it builds.
  int64_t max_message_bytes = int64_t{64} << 20;
};

// Names, feature names and the target name: 1..128 characters (UTF-8).
inline constexpr int kMaxNameChars = 128;
// Posterior samples of a Predict request that leaves num_samples at 0.
inline constexpr int kDefaultPredictSamples = 64;
// ECE bins of an Evaluate request: for ece_bins 0, and the most.
inline constexpr int kDefaultEceBins = 15;
inline constexpr int kMaxEceBins = 1000;

// Longest id a request may name: server ids (ds-, job-, snap- and 16 hex
// digits) are far shorter.
inline constexpr size_t kMaxIdBytes = 128;

// Models per ListModels page: the default (page_size 0) and the most.
inline constexpr int kDefaultModelsPageSize = 100;
inline constexpr int kMaxModelsPageSize = 1000;

// An id field, e.g. "snapshot_id": it must not be empty nor longer than
// kMaxIdBytes.
absl::Status RequireId(absl::string_view field, absl::string_view value);

// --- UploadDataset, AppendRows ---------------------------------------------

// What a message of a header-then-row-chunks stream carries.
enum class StreamPayload { kNone, kHeader, kChunk };

// For v1::UploadDatasetRequest and v1::AppendRowsRequest.
template <typename Request>
StreamPayload PayloadOf(const Request& message) {
  if (message.has_header()) return StreamPayload::kHeader;
  if (message.has_chunk()) return StreamPayload::kChunk;
  return StreamPayload::kNone;
}

// Message `index` (0-based) of a `stream` ("upload", "append"), given
// whether a header was already received: the header must come first and
// only once, and every message must carry a payload.
absl::Status ValidateStreamMessage(absl::string_view stream,
                                   StreamPayload payload, int64_t index,
                                   bool have_header);

absl::Status ValidateDatasetHeader(const v1::DatasetHeader& header);

// --- Rows in either form (Predict, Acquire, Evaluate, uploads, appends) ----
//
// Every request carrying rows takes them one message per row or packed in a
// v1::Tensor; both forms are converted here, by one path, into the core's
// row-major matrix, and every check (form, count and its limit, shape,
// width, finiteness) runs once on the way, whatever the form.

// Rows of a request in the core's layout.
struct RowMatrix {
  int64_t num_rows = 0;
  // num_rows x num_features, row-major.
  std::vector<double> features;
  // One per row; labelled rows only.
  std::vector<double> targets;
};

// The most rows a request may carry, the flag that sets it, whether rows
// are required (Predict, Acquire, Evaluate) or may be none (a chunk of an
// upload), and what fixes their width ("dataset", "snapshot"), for
// messages.
struct RowLimit {
  int64_t max_rows = 0;
  absl::string_view flag;
  bool required = true;
  absl::string_view owner = "snapshot";
};

// The feature rows of a request: per row in `rows` (at `rows_field`, e.g.
// "rows" or "rows.rows") or packed in `tensor` (at `tensor_field`, e.g.
// "features" or "rows.features"; `has_tensor` says whether it is set):
// exactly one form (InvalidArgument naming both fields otherwise), at most
// limit.max_rows rows (ResourceExhausted naming limit.flag), each of
// `num_features` finite values (InvalidArgument naming the row, or the
// tensor's shape, dtype or length).
absl::StatusOr<RowMatrix> FeatureRows(
    absl::string_view rows_field,
    const google::protobuf::RepeatedPtrField<v1::Features>& rows,
    absl::string_view tensor_field, bool has_tensor, const v1::Tensor& tensor,
    int64_t num_features, const RowLimit& limit);

// The labelled rows of `chunk` (fields named with `prefix`, "" or
// "rows."): per row in rows[] (x and y), or packed in features
// ([rows, num_features]) and targets ([rows]). Rows are numbered from
// `first_row` (an upload's rows count across its chunks), and
// first_row + rows may not exceed limit.max_rows.
absl::StatusOr<RowMatrix> LabelledRows(absl::string_view prefix,
                                       const v1::RowChunk& chunk,
                                       int64_t num_features, int64_t first_row,
                                       const RowLimit& limit);

// The limit of uploads and appends (--max-upload-rows; chunks may be
// empty) and of the rows of Predict, Acquire and Evaluate
// (--max-predict-rows).
RowLimit UploadRowLimit(const ServerLimits& limits);
RowLimit PredictRowLimit(const ServerLimits& limits);

// At the end of a `stream`: a header and at least one row arrived.
absl::Status ValidateStreamComplete(absl::string_view stream, bool have_header,
                                    int64_t num_rows);

// Raw classification labels: at least two distinct values and at most as
// many classes as an output layer may have.
absl::Status ValidateClassLabels(absl::Span<const double> labels);

// Raw classification labels appended to a dataset whose classes are the
// label values `class_values` (ascending): each must be one of them, as a
// dataset's classes never change. `labels` are rows[first_row...].y of the
// append; they are replaced by their class indices.
absl::Status EncodeAppendedLabels(absl::Span<double> labels, int64_t first_row,
                                  absl::Span<const double> class_values);

// --- Versions ---------------------------------------------------------------

// An optional version field of a request (`field`, set or not, its value):
// unset means the latest (nullopt); a set version must be >= 1.
absl::StatusOr<std::optional<int64_t>> RequestedVersion(absl::string_view field,
                                                        bool is_set,
                                                        int64_t value);

// --- StartTraining ----------------------------------------------------------

// Layer count and widths against bnn's bounds, activation count and names.
absl::Status ValidateModelSpec(const v1::ModelSpec& model);

// StartTraining's model_name and publish: a name if one is given, and one
// is required to publish.
absl::Status ValidateTrainingModel(const v1::StartTrainingRequest& request);

// --- ListJobs ----------------------------------------------------------------

// Jobs per ListJobs page: by default and at most.
inline constexpr int kDefaultJobsPageSize = 100;
inline constexpr int kMaxJobsPageSize = 1000;

// The page size of a ListJobs request: `requested`, or
// kDefaultJobsPageSize for 0; negative or above kMaxJobsPageSize fails.
absl::StatusOr<int> ResolveJobsPageSize(int requested);
// The filter of a ListJobs request (states checked).
absl::StatusOr<JobFilter> JobFilterOf(const v1::ListJobsRequest& request);
// The page token after `last` (the last job of a page), and back: an opaque
// string (URL-safe base64); a token ListJobs did not make fails with
// InvalidArgument naming page_token.
std::string EncodeJobsPageToken(const JobCursor& last);
absl::StatusOr<JobCursor> DecodeJobsPageToken(absl::string_view token);

// --- Predict, Acquire --------------------------------------------------------

// The sample count to use: `requested`, or kDefaultPredictSamples (capped
// at the limit) for 0; negative or above the limit fails.
absl::StatusOr<int> ResolveNumSamples(int requested,
                                      const ServerLimits& limits);

// A Predict response of `num_rows` rows of about `values_per_row` numbers
// each must fit in limits.max_message_bytes, so that per_sample outputs or
// many quantiles cannot make the server build an unbounded response.
absl::Status ValidateResponseSize(int64_t num_rows, int64_t values_per_row,
                                  const ServerLimits& limits);

// --- Client streams (UploadDataset, AppendRows, ImportSnapshot) ------------

// The bytes of a client stream's messages so far: at most `max_bytes`, the
// limit set by `flag`. `stream` names the stream in the message ("upload",
// "append", "import").
absl::Status ValidateStreamBytes(absl::string_view stream, int64_t bytes,
                                 int64_t max_bytes, absl::string_view flag);

}  // namespace bnn::server

#endif  // BNN_SERVER_API_BNN_V1_REQUEST_VALIDATION_H_
