// Checks of client requests, one function per rule set. Each returns
// InvalidArgument naming the offending field (as a path into the request,
// e.g. "rows[7].x[2]") and the violated constraint, or ResourceExhausted
// naming the server limit and its flag.
#ifndef BNN_SERVER_REQUEST_VALIDATION_H_
#define BNN_SERVER_REQUEST_VALIDATION_H_

#include <cstdint>

#include <absl/status/status.h>
#include <absl/status/statusor.h>
#include <absl/strings/string_view.h>
#include <absl/types/span.h>

#include "bnn/v1/bnn_service.pb.h"

namespace bnn::server {

// Server limits, set by flags.
struct ServerLimits {
  // --max-upload-rows
  int64_t max_upload_rows = 10'000'000;
  // --max-predict-rows
  int64_t max_predict_rows = 100'000;
  // --max-predict-samples
  int max_predict_samples = 4096;
};

// Names, feature names and the target name: 1..128 characters (UTF-8).
inline constexpr int kMaxNameChars = 128;
// Posterior samples of a Predict request that leaves num_samples at 0.
inline constexpr int kDefaultPredictSamples = 64;

// --- UploadDataset ---------------------------------------------------------

// Message `index` (0-based) of the upload stream, given whether a header was
// already received: the header must come first and only once, and every
// message must carry a payload.
absl::Status ValidateUploadMessage(const v1::UploadDatasetRequest& message,
                                   int64_t index, bool have_header);

absl::Status ValidateDatasetHeader(const v1::DatasetHeader& header);

// The rows of one chunk, the first of which is row `first_row` of the upload
// (errors count rows from the start of the upload, across chunks). Also
// enforces limits.max_upload_rows.
absl::Status ValidateRowChunk(const v1::RowChunk& chunk, int num_features,
                              int64_t first_row, const ServerLimits& limits);

// At the end of the stream: a header and at least one row arrived.
absl::Status ValidateUploadComplete(bool have_header, int64_t num_rows);

// Raw classification labels: at least two distinct values and at most as
// many classes as an output layer may have.
absl::Status ValidateClassLabels(absl::Span<const double> labels);

// --- StartTraining ----------------------------------------------------------

// Layer count and widths against bnn's bounds, activation count and names.
absl::Status ValidateModelSpec(const v1::ModelSpec& model);

// --- Predict ----------------------------------------------------------------

// Row count (1..limits.max_predict_rows), width and finiteness.
absl::Status ValidatePredictRows(
    const google::protobuf::RepeatedPtrField<v1::Features>& rows,
    int64_t num_features, const ServerLimits& limits);

// The sample count to use: `requested`, or kDefaultPredictSamples (capped
// at the limit) for 0; negative or above the limit fails.
absl::StatusOr<int> ResolveNumSamples(int requested,
                                      const ServerLimits& limits);

}  // namespace bnn::server

#endif  // BNN_SERVER_REQUEST_VALIDATION_H_
