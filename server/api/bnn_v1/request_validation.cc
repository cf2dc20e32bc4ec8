#include "server/api/bnn_v1/request_validation.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include <absl/strings/escaping.h>
#include <absl/strings/numbers.h>
#include <absl/strings/str_cat.h>
#include <absl/strings/str_join.h>
#include <absl/strings/str_split.h>

#include "bnn/data/dataset.h"
#include "bnn/model/model_spec.h"
#include "bnn/status.h"

#include "server/api/bnn_v1/to_wire.h"
#include "server/store/ids.h"
#include "server/store/model_store.h"

namespace bnn::server {
namespace {

// Code points of a UTF-8 string (bytes that do not continue a sequence).
int64_t Utf8Length(absl::string_view text) {
  return std::count_if(text.begin(), text.end(), [](char c) {
    return (static_cast<unsigned char>(c) & 0xC0) != 0x80;
  });
}

absl::Status CheckName(absl::string_view field, absl::string_view name,
                       bool required) {
  const int64_t length = Utf8Length(name);
  if ((required && length == 0) || length > kMaxNameChars) {
    return absl::InvalidArgumentError(
        absl::StrCat(field, " must be ", required ? "1" : "0", "..",
                     kMaxNameChars, " characters; it has ", length));
  }
  return absl::OkStatus();
}

const char* NonFiniteName(double value) {
  if (std::isnan(value)) return "NaN";
  return value > 0 ? "+Inf" : "-Inf";
}

// The values of `tensor` (at `field`) as doubles: exactly one of f64 and f32
// set, with `expected` values (the product of the checked shape).
absl::Status TensorValues(absl::string_view field, const v1::Tensor& tensor,
                          int64_t expected, std::vector<double>* out) {
  const bool f64 = tensor.f64_size() > 0;
  const bool f32 = tensor.f32_size() > 0;
  if (f64 && f32) {
    return absl::InvalidArgumentError(absl::StrCat(
        field, ".f64 and ", field, ".f32 are both set; send one dtype"));
  }
  const int64_t length = f64 ? tensor.f64_size() : tensor.f32_size();
  if (length != expected) {
    return absl::InvalidArgumentError(absl::StrCat(
        field, f32 ? ".f32" : ".f64", " has ", length, " values; ", field,
        ".shape [", absl::StrJoin(tensor.shape(), ", "), "] needs ", expected));
  }
  if (f64) {
    out->assign(tensor.f64().begin(), tensor.f64().end());
  } else {
    // float -> double is exact.
    out->assign(tensor.f32().begin(), tensor.f32().end());
  }
  return absl::OkStatus();
}

// The row count `shape[0]` of a tensor at `field` of rank `rank` (2 for
// [rows, features], 1 for [rows]); for rank 2 shape[1] must be `width`.
absl::StatusOr<int64_t> TensorRows(absl::string_view field,
                                   const v1::Tensor& tensor, int rank,
                                   int64_t width, absl::string_view owner) {
  const char* const expected = rank == 2 ? "[rows, num_features]" : "[rows]";
  if (tensor.shape_size() != rank) {
    return absl::InvalidArgumentError(absl::StrCat(
        field, ".shape has ", tensor.shape_size(), " dimensions [",
        absl::StrJoin(tensor.shape(), ", "), "]; it must be ", expected));
  }
  for (int d = 0; d < rank; ++d) {
    if (tensor.shape(d) < 0) {
      return absl::InvalidArgumentError(absl::StrCat(
          field, ".shape[", d, "] = ", tensor.shape(d), " is negative"));
    }
  }
  if (rank == 2 && tensor.shape(1) != width) {
    return absl::InvalidArgumentError(
        absl::StrCat(field, ".shape[1] = ", tensor.shape(1), "; the ", owner,
                     " has ", width, " features"));
  }
  return tensor.shape(0);
}

absl::Status CheckRowCount(absl::string_view field, int64_t first_row,
                           int64_t rows, const RowLimit& limit) {
  if (first_row + rows > limit.max_rows) {
    return absl::ResourceExhaustedError(absl::StrCat(
        field, " has ", first_row + rows, " rows; the server limit is ",
        limit.max_rows, " (", limit.flag, ")"));
  }
  return absl::OkStatus();
}

// Every value finite; `name(row, column)` names an offending value.
template <typename Name>
absl::Status CheckFinite(absl::Span<const double> values, int64_t width,
                         int64_t first_row, Name name) {
  for (size_t k = 0; k < values.size(); ++k) {
    if (!std::isfinite(values[k])) {
      const int64_t row = first_row + static_cast<int64_t>(k) / width;
      return absl::InvalidArgumentError(
          absl::StrCat(name(row, static_cast<int64_t>(k) % width), " is ",
                       NonFiniteName(values[k])));
    }
  }
  return absl::OkStatus();
}

// Per-row features (Features or Example messages) into `out`, each of
// `width` values.
template <typename Row>
absl::Status CopyRows(absl::string_view field,
                      const google::protobuf::RepeatedPtrField<Row>& rows,
                      int64_t width, int64_t first_row, absl::string_view owner,
                      std::vector<double>* out) {
  out->clear();
  out->reserve(rows.size() * width);
  for (int i = 0; i < rows.size(); ++i) {
    const auto& x = rows[i].x();
    if (x.size() != width) {
      return absl::InvalidArgumentError(
          absl::StrCat(field, "[", first_row + i, "].x has ", x.size(),
                       " values; the ", owner, " has ", width, " features"));
    }
    out->insert(out->end(), x.begin(), x.end());
  }
  return absl::OkStatus();
}

// The one path of both forms: the per-row messages `rows` (at
// `rows_field`) or the packed `tensor` (at `tensor_field`; set or not),
// into out->features, checked.
template <typename Row>
absl::Status ToMatrix(absl::string_view rows_field,
                      const google::protobuf::RepeatedPtrField<Row>& rows,
                      absl::string_view tensor_field, bool has_tensor,
                      const v1::Tensor& tensor, int64_t num_features,
                      int64_t first_row, const RowLimit& limit,
                      RowMatrix* out) {
  if (!rows.empty() && has_tensor) {
    return absl::InvalidArgumentError(
        absl::StrCat(rows_field, " and ", tensor_field,
                     " are both set; send the rows in one form"));
  }
  if (rows.empty() && !has_tensor) {
    if (!limit.required) return absl::OkStatus();
    return absl::InvalidArgumentError(
        absl::StrCat(rows_field, " is empty and ", tensor_field,
                     " is not set; send at least one row in one form"));
  }
  if (has_tensor) {
    BNN_ASSIGN_OR_RETURN(out->num_rows, TensorRows(tensor_field, tensor, 2,
                                                   num_features, limit.owner));
    BNN_RETURN_IF_ERROR(
        CheckRowCount(tensor_field, first_row, out->num_rows, limit));
    if (out->num_rows == 0 && limit.required) {
      return absl::InvalidArgumentError(
          absl::StrCat(tensor_field, ".shape[0] is 0; send at least one row"));
    }
    BNN_RETURN_IF_ERROR(TensorValues(
        tensor_field, tensor, out->num_rows * num_features, &out->features));
    return CheckFinite(
        out->features, num_features, first_row, [&](int64_t row, int64_t col) {
          return absl::StrCat(tensor_field, "[", row, ", ", col, "]");
        });
  }
  out->num_rows = rows.size();
  BNN_RETURN_IF_ERROR(
      CheckRowCount(rows_field, first_row, out->num_rows, limit));
  BNN_RETURN_IF_ERROR(CopyRows(rows_field, rows, num_features, first_row,
                               limit.owner, &out->features));
  return CheckFinite(
      out->features, num_features, first_row, [&](int64_t row, int64_t col) {
        return absl::StrCat(rows_field, "[", row, "].x[", col, "]");
      });
}

}  // namespace

RowLimit UploadRowLimit(const ServerLimits& limits) {
  return RowLimit{limits.max_upload_rows, "--max-upload-rows",
                  /*required=*/false, "dataset"};
}

RowLimit PredictRowLimit(const ServerLimits& limits) {
  return RowLimit{limits.max_predict_rows, "--max-predict-rows",
                  /*required=*/true, "snapshot"};
}

absl::StatusOr<RowMatrix> FeatureRows(
    absl::string_view rows_field,
    const google::protobuf::RepeatedPtrField<v1::Features>& rows,
    absl::string_view tensor_field, bool has_tensor, const v1::Tensor& tensor,
    int64_t num_features, const RowLimit& limit) {
  RowMatrix out;
  BNN_RETURN_IF_ERROR(ToMatrix(rows_field, rows, tensor_field, has_tensor,
                               tensor, num_features, 0, limit, &out));
  return out;
}

absl::StatusOr<RowMatrix> LabelledRows(absl::string_view prefix,
                                       const v1::RowChunk& chunk,
                                       int64_t num_features, int64_t first_row,
                                       const RowLimit& limit) {
  const std::string rows_field = absl::StrCat(prefix, "rows");
  const std::string features_field = absl::StrCat(prefix, "features");
  const std::string targets_field = absl::StrCat(prefix, "targets");
  if (chunk.has_features() != chunk.has_targets()) {
    return absl::InvalidArgumentError(absl::StrCat(
        features_field, " and ", targets_field,
        " go together: packed rows need both, per-row rows neither"));
  }
  if (!chunk.rows().empty() && chunk.has_targets()) {
    return absl::InvalidArgumentError(
        absl::StrCat(rows_field, " and ", features_field, "/", targets_field,
                     " are both set; send the rows in one form"));
  }
  RowMatrix out;
  BNN_RETURN_IF_ERROR(ToMatrix(rows_field, chunk.rows(), features_field,
                               chunk.has_features(), chunk.features(),
                               num_features, first_row, limit, &out));
  if (chunk.has_targets()) {
    BNN_ASSIGN_OR_RETURN(
        const int64_t targets,
        TensorRows(targets_field, chunk.targets(), 1, 0, limit.owner));
    if (targets != out.num_rows) {
      return absl::InvalidArgumentError(
          absl::StrCat(targets_field, ".shape[0] = ", targets, "; ",
                       features_field, " has ", out.num_rows, " rows"));
    }
    BNN_RETURN_IF_ERROR(TensorValues(targets_field, chunk.targets(),
                                     out.num_rows, &out.targets));
    BNN_RETURN_IF_ERROR(
        CheckFinite(out.targets, 1, first_row, [&](int64_t row, int64_t) {
          return absl::StrCat(targets_field, "[", row, "]");
        }));
    return out;
  }
  out.targets.reserve(chunk.rows_size());
  for (const v1::Example& example : chunk.rows()) {
    out.targets.push_back(example.y());
  }
  BNN_RETURN_IF_ERROR(
      CheckFinite(out.targets, 1, first_row, [&](int64_t row, int64_t) {
        return absl::StrCat(rows_field, "[", row, "].y");
      }));
  return out;
}

absl::Status RequireId(absl::string_view field, absl::string_view value) {
  if (value.empty()) {
    return absl::InvalidArgumentError(absl::StrCat(field, " is required"));
  }
  // Checked before any lookup, so that no message or log line echoes an
  // id of arbitrary length.
  if (value.size() > kMaxIdBytes) {
    return absl::InvalidArgumentError(absl::StrCat(
        field, " has ", value.size(), " bytes; ids have at most ", kMaxIdBytes,
        " (server ids are like ds-0123456789abcdef)"));
  }
  return absl::OkStatus();
}

absl::Status ValidateStreamMessage(absl::string_view stream,
                                   StreamPayload payload, int64_t index,
                                   bool have_header) {
  switch (payload) {
    case StreamPayload::kHeader:
      if (have_header) {
        return absl::InvalidArgumentError(
            absl::StrCat(stream, " message ", index,
                         " is a second header; send the header once, first"));
      }
      return absl::OkStatus();
    case StreamPayload::kChunk:
      if (!have_header) {
        return absl::InvalidArgumentError(absl::StrCat(
            stream, " message ", index,
            " is a row chunk before the header; the header must come first"));
      }
      return absl::OkStatus();
    case StreamPayload::kNone:
      break;
  }
  return absl::InvalidArgumentError(absl::StrCat(
      stream, " message ", index, " has neither a header nor a chunk"));
}

absl::Status ValidateDatasetHeader(const v1::DatasetHeader& header) {
  if (absl::Status s = CheckName("header.name", header.name(), true); !s.ok()) {
    return s;
  }
  if (IsId(kDatasetIdPrefix, header.name())) {
    return absl::InvalidArgumentError(absl::StrCat(
        "header.name '", header.name(),
        "' has the form of a dataset id; every dataset_id field also takes "
        "a dataset's name, so names must not look like ids"));
  }
  if (header.task() != v1::TASK_REGRESSION &&
      header.task() != v1::TASK_CLASSIFICATION) {
    return absl::InvalidArgumentError(absl::StrCat(
        "header.task must be TASK_REGRESSION or "
        "TASK_CLASSIFICATION; got ",
        v1::Task_Name(header.task()).empty() ? absl::StrCat(header.task())
                                             : v1::Task_Name(header.task())));
  }
  if (header.num_features() < 1 || header.num_features() > kMaxLayerWidth) {
    return absl::InvalidArgumentError(
        absl::StrCat("header.num_features = ", header.num_features(),
                     " must be in [1, ", kMaxLayerWidth, "]"));
  }
  if (header.feature_names_size() != 0 &&
      header.feature_names_size() != header.num_features()) {
    return absl::InvalidArgumentError(
        absl::StrCat("header.feature_names has ", header.feature_names_size(),
                     " names; send none or one per feature (num_features = ",
                     header.num_features(), ")"));
  }
  for (int i = 0; i < header.feature_names_size(); ++i) {
    if (absl::Status s =
            CheckName(absl::StrCat("header.feature_names[", i, "]"),
                      header.feature_names(i), true);
        !s.ok()) {
      return s;
    }
  }
  return CheckName("header.target_name", header.target_name(), false);
}

absl::Status ValidateStreamComplete(absl::string_view stream, bool have_header,
                                    int64_t num_rows) {
  if (!have_header) {
    return absl::InvalidArgumentError(
        absl::StrCat(stream, " has no header; send a header, then row chunks"));
  }
  if (num_rows == 0) {
    return absl::InvalidArgumentError(absl::StrCat(stream, " has no rows"));
  }
  return absl::OkStatus();
}

absl::Status ValidateClassLabels(absl::Span<const double> labels) {
  std::vector<double> distinct(labels.begin(), labels.end());
  std::sort(distinct.begin(), distinct.end());
  distinct.erase(std::unique(distinct.begin(), distinct.end()), distinct.end());
  if (distinct.size() < 2) {
    return absl::InvalidArgumentError(absl::StrCat(
        "classification needs at least 2 distinct labels in rows[].y; the "
        "upload has ",
        distinct.size()));
  }
  if (distinct.size() > static_cast<size_t>(kMaxLayerWidth)) {
    return absl::InvalidArgumentError(
        absl::StrCat("classification labels rows[].y take ", distinct.size(),
                     " distinct values; at most ", kMaxLayerWidth,
                     " classes are supported"));
  }
  return absl::OkStatus();
}

absl::Status EncodeAppendedLabels(absl::Span<double> labels, int64_t first_row,
                                  absl::Span<const double> class_values) {
  for (size_t i = 0; i < labels.size(); ++i) {
    const int64_t index = ClassIndex(class_values, labels[i]);
    if (index < 0) {
      return absl::InvalidArgumentError(absl::StrCat(
          "rows[", first_row + static_cast<int64_t>(i), "].y = ", labels[i],
          " is not a class of the dataset; its class labels are ",
          absl::StrJoin(class_values, ", "),
          " (a new class needs a new dataset)"));
    }
    labels[i] = static_cast<double>(index);
  }
  return absl::OkStatus();
}

absl::StatusOr<std::optional<int64_t>> RequestedVersion(absl::string_view field,
                                                        bool is_set,
                                                        int64_t value) {
  if (!is_set) return std::nullopt;
  if (value < 1) {
    return absl::InvalidArgumentError(absl::StrCat(
        field, " = ", value, " must be >= 1 (versions count from 1)"));
  }
  return value;
}

absl::Status ValidateModelSpec(const v1::ModelSpec& model) {
  if (model.hidden_sizes_size() > kMaxHiddenLayers) {
    return absl::InvalidArgumentError(
        absl::StrCat("model.hidden_sizes has ", model.hidden_sizes_size(),
                     " layers; at most ", kMaxHiddenLayers));
  }
  for (int i = 0; i < model.hidden_sizes_size(); ++i) {
    const int32_t width = model.hidden_sizes(i);
    if (width < 1 || width > kMaxLayerWidth) {
      return absl::InvalidArgumentError(
          absl::StrCat("model.hidden_sizes[", i, "] = ", width,
                       " must be in [1, ", kMaxLayerWidth, "]"));
    }
  }
  const int activations = model.activations_size();
  if (activations > 1 && activations != model.hidden_sizes_size()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "model.activations has ", activations,
        " entries; give none (relu), one for all layers or one per hidden "
        "layer (",
        model.hidden_sizes_size(), ")"));
  }
  for (int i = 0; i < activations; ++i) {
    if (!StringToActivation(model.activations(i)).ok()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "model.activations[", i, "] = '", model.activations(i),
          "' is not an activation; known: relu, tanh, leaky_tanh, identity"));
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<int> ResolveNumSamples(int requested,
                                      const ServerLimits& limits) {
  if (requested < 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "num_samples = ", requested, " must be >= 1, or 0 for the default (",
        kDefaultPredictSamples, ")"));
  }
  if (requested == 0) {
    return std::min(kDefaultPredictSamples, limits.max_predict_samples);
  }
  if (requested > limits.max_predict_samples) {
    return absl::ResourceExhaustedError(
        absl::StrCat("num_samples ", requested, " exceeds the server limit ",
                     limits.max_predict_samples, " (--max-predict-samples)"));
  }
  return requested;
}

absl::Status ValidateResponseSize(int64_t num_rows, int64_t values_per_row,
                                  const ServerLimits& limits) {
  // Doubles in packed fields; the estimate ignores the small per-row
  // overhead.
  const double bytes = static_cast<double>(num_rows) *
                       static_cast<double>(values_per_row) * sizeof(double);
  if (bytes > static_cast<double>(limits.max_message_bytes)) {
    return absl::ResourceExhaustedError(absl::StrCat(
        "the response would hold ", num_rows, " rows x ", values_per_row,
        " values (about ", static_cast<int64_t>(bytes),
        " bytes); the server limit is ", limits.max_message_bytes,
        " bytes (--max-message-bytes): ask for fewer rows, samples or "
        "quantiles"));
  }
  return absl::OkStatus();
}

absl::Status ValidateStreamBytes(absl::string_view stream, int64_t bytes,
                                 int64_t max_bytes, absl::string_view flag) {
  if (bytes <= max_bytes) return absl::OkStatus();
  return absl::ResourceExhaustedError(absl::StrCat(
      stream, " exceeds ", max_bytes, " bytes, the server limit (", flag, ")"));
}

absl::Status ValidateTrainingModel(const v1::StartTrainingRequest& request) {
  if (!request.model_name().empty()) {
    return ValidateModelName("model_name", request.model_name());
  }
  if (request.publish()) {
    return absl::InvalidArgumentError(
        "publish is set but model_name is empty; name the model to publish "
        "the snapshot under");
  }
  return absl::OkStatus();
}

absl::StatusOr<int> ResolveJobsPageSize(int requested) {
  if (requested < 0 || requested > kMaxJobsPageSize) {
    return absl::InvalidArgumentError(
        absl::StrCat("page_size = ", requested, " must be in [0, ",
                     kMaxJobsPageSize, "] (0 = ", kDefaultJobsPageSize, ")"));
  }
  return requested == 0 ? kDefaultJobsPageSize : requested;
}

absl::StatusOr<JobFilter> JobFilterOf(const v1::ListJobsRequest& request) {
  JobFilter filter;
  for (int i = 0; i < request.states_size(); ++i) {
    absl::StatusOr<store::JobRecord::State> state =
        FromWireJobState(request.states(i));
    if (!state.ok()) {
      return absl::InvalidArgumentError(
          absl::StrCat("states[", i, "]: ", state.status().message()));
    }
    filter.states.push_back(*state);
  }
  if (!request.dataset_id().empty()) {
    BNN_RETURN_IF_ERROR(RequireId("dataset_id", request.dataset_id()));
  }
  if (!request.model_name().empty()) {
    BNN_RETURN_IF_ERROR(ValidateModelName("model_name", request.model_name()));
  }
  if (request.method().size() > kMaxIdBytes) {
    return absl::InvalidArgumentError(
        absl::StrCat("method has ", request.method().size(),
                     " bytes; method names have at most ", kMaxIdBytes));
  }
  filter.dataset_id = request.dataset_id();
  filter.method = request.method();
  filter.model_name = request.model_name();
  return filter;
}

std::string EncodeJobsPageToken(const JobCursor& last) {
  return absl::WebSafeBase64Escape(
      absl::StrCat(last.created_unix_ms, ":", last.job_id));
}

absl::StatusOr<JobCursor> DecodeJobsPageToken(absl::string_view token) {
  const auto bad = [] {
    return absl::InvalidArgumentError(
        "page_token is not a next_page_token of ListJobs; start again with "
        "an empty page_token");
  };
  std::string decoded;
  if (token.size() > 4 * kMaxIdBytes ||
      !absl::WebSafeBase64Unescape(token, &decoded)) {
    return bad();
  }
  const std::vector<absl::string_view> parts =
      absl::StrSplit(decoded, absl::MaxSplits(':', 1));
  JobCursor cursor;
  if (parts.size() != 2 ||
      !absl::SimpleAtoi(parts[0], &cursor.created_unix_ms) ||
      !IsId(kJobIdPrefix, parts[1])) {
    return bad();
  }
  cursor.job_id = std::string(parts[1]);
  return cursor;
}

}  // namespace bnn::server
