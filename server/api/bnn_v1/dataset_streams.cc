// UploadDataset and AppendRows: client streams of a header, then row chunks.
// Rows are validated as they arrive (row indices count across chunks) and
// written to a temporary file of the dataset store, so a bad row ends the
// call at once and no stream holds its rows in memory; the dataset (or its
// next version) is committed at the end of the stream, and only if every
// row was valid.
#include <cmath>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include <absl/strings/str_cat.h>
#include <spdlog/spdlog.h>

#include "bnn/data/dataset.h"
#include "bnn/model/model_spec.h"
#include "bnn/status.h"

#include "server/api/bnn_v1/bnn_service.h"
#include "server/api/bnn_v1/request_validation.h"
#include "server/api/bnn_v1/stream_reader.h"
#include "server/api/bnn_v1/to_wire.h"
#include "server/common/user_text.h"
#include "server/store/dataset_file.h"

namespace bnn::server {
namespace {

// Validates one chunk of rows, per row or packed (numbered from the start
// of the stream, `first_row`), and converts it into `out`.
absl::Status ChunkToRows(const v1::RowChunk& chunk, int64_t num_features,
                         int64_t first_row, const ServerLimits& limits,
                         RowMatrix* out) {
  BNN_ASSIGN_OR_RETURN(*out, LabelledRows("", chunk, num_features, first_row,
                                          UploadRowLimit(limits)));
  return absl::OkStatus();
}

}  // namespace

class BnnServiceImpl::UploadReactor final
    : public StreamReader<v1::UploadDatasetRequest, v1::UploadDatasetResponse> {
 public:
  UploadReactor(BnnServiceImpl* service, grpc::CallbackServerContext* context,
                grpc::ByteBuffer* response)
      : StreamReader(service, context, response, "UploadDataset", "upload",
                     service->options_.limits.max_upload_bytes,
                     "--max-upload-bytes") {}

 private:
  absl::Status Consume(v1::UploadDatasetRequest& message,
                       int64_t index) override {
    BNN_RETURN_IF_ERROR(ValidateStreamMessage("upload", PayloadOf(message),
                                              index, rows_ != nullptr));
    if (message.has_header()) return TakeHeader(message.header());
    const int64_t first_row = rows_->num_rows();
    BNN_RETURN_IF_ERROR(ChunkToRows(message.chunk(), schema_.num_features,
                                    first_row, service()->options_.limits,
                                    &chunk_));
    if (header_.task() == v1::TASK_CLASSIFICATION) {
      BNN_RETURN_IF_ERROR(CollectLabels(first_row));
    }
    return rows_->AddRows(chunk_.features, chunk_.targets);
  }

  absl::Status TakeHeader(const v1::DatasetHeader& header) {
    BNN_RETURN_IF_ERROR(ValidateDatasetHeader(header));
    // Checked again when the dataset is stored; failing now spares the
    // client sending rows in vain.
    BNN_RETURN_IF_ERROR(service()->datasets_->CheckNameFree(header.name()));
    header_ = header;
    schema_.num_features = header.num_features();
    schema_.feature_names.assign(header.feature_names().begin(),
                                 header.feature_names().end());
    schema_.target_name = header.target_name();
    BNN_ASSIGN_OR_RETURN(
        rows_, service()->datasets_->NewVersionWriter(schema_.num_features));
    return absl::OkStatus();
  }

  // Classification: the chunk's labels are integers, and the distinct ones
  // (the classes) stay within what an output layer supports, checked as
  // they arrive so that they never take much memory.
  absl::Status CollectLabels(int64_t first_row) {
    for (size_t i = 0; i < chunk_.targets.size(); ++i) {
      const double y = chunk_.targets[i];
      if (y != std::floor(y)) {
        return absl::InvalidArgumentError(
            absl::StrCat("rows[", first_row + static_cast<int64_t>(i),
                         "].y = ", y, " is not an integer class label"));
      }
      if (labels_.insert(y).second &&
          labels_.size() > static_cast<size_t>(kMaxLayerWidth)) {
        return ValidateClassLabels(
            std::vector<double>(labels_.begin(), labels_.end()));
      }
    }
    return absl::OkStatus();
  }

  absl::Status Commit(v1::UploadDatasetResponse* response) override {
    BNN_RETURN_IF_ERROR(ValidateStreamComplete(
        "upload", rows_ != nullptr, rows_ == nullptr ? 0 : rows_->num_rows()));
    if (header_.task() == v1::TASK_CLASSIFICATION) {
      schema_.class_values.assign(labels_.begin(), labels_.end());
      BNN_RETURN_IF_ERROR(ValidateClassLabels(schema_.class_values));
      schema_.num_classes = static_cast<int>(labels_.size());
      schema_.task =
          schema_.num_classes == 2 ? Task::kBinary : Task::kMulticlass;
    }
    DatasetStore* const datasets = service()->datasets_;
    BNN_ASSIGN_OR_RETURN(
        const store::DatasetMeta meta,
        datasets->Create(std::move(rows_), schema_, header_.name()));
    service()->metrics_->datasets().Set(static_cast<double>(datasets->size()));
    spdlog::info(
        "dataset {} '{}' stored: {} rows x {} features, {} bytes "
        "received",
        meta.dataset_id(), SafeText(meta.name()), meta.num_rows(),
        meta.num_features(), bytes_received());
    ToDatasetInfo(meta, response->mutable_dataset());
    return absl::OkStatus();
  }

  void Discard() override { rows_.reset(); }

  v1::DatasetHeader header_;
  // The dataset's schema: no rows (those go to rows_).
  Dataset schema_;
  // Set by the header.
  std::unique_ptr<DatasetFileWriter> rows_;
  std::set<double> labels_;
  RowMatrix chunk_;
};

class BnnServiceImpl::AppendReactor final
    : public StreamReader<v1::AppendRowsRequest, v1::DatasetInfo> {
 public:
  AppendReactor(BnnServiceImpl* service, grpc::CallbackServerContext* context,
                grpc::ByteBuffer* response)
      : StreamReader(service, context, response, "AppendRows", "append",
                     service->options_.limits.max_upload_bytes,
                     "--max-upload-bytes") {}

 private:
  absl::Status Consume(v1::AppendRowsRequest& message, int64_t index) override {
    BNN_RETURN_IF_ERROR(ValidateStreamMessage("append", PayloadOf(message),
                                              index, rows_ != nullptr));
    if (message.has_header()) return TakeHeader(message.header());
    const int64_t first_row = rows_->num_rows();
    BNN_RETURN_IF_ERROR(ChunkToRows(message.chunk(), schema_.num_features,
                                    first_row, service()->options_.limits,
                                    &chunk_));
    if (IsClassification(schema_.task)) {
      BNN_RETURN_IF_ERROR(EncodeAppendedLabels(
          absl::MakeSpan(chunk_.targets), first_row, schema_.class_values));
    }
    return rows_->AddRows(chunk_.features, chunk_.targets);
  }

  // Rows are checked against the latest version's schema, which every
  // version shares.
  absl::Status TakeHeader(const v1::AppendHeader& header) {
    BNN_RETURN_IF_ERROR(RequireId("header.dataset_id", header.dataset_id()));
    BNN_ASSIGN_OR_RETURN(expected_version_,
                         RequestedVersion("header.expected_version",
                                          header.has_expected_version(),
                                          header.expected_version()));
    BNN_ASSIGN_OR_RETURN(const store::DatasetMeta latest,
                         service()->datasets_->Get(header.dataset_id()));
    // Checked again when the version is written; failing now spares the
    // client sending rows in vain.
    BNN_RETURN_IF_ERROR(CheckExpectedVersion(latest, expected_version_));
    BNN_ASSIGN_OR_RETURN(schema_, DatasetSchema(latest));
    BNN_ASSIGN_OR_RETURN(
        rows_, service()->datasets_->NewVersionWriter(schema_.num_features));
    dataset_id_ = latest.dataset_id();  // header.dataset_id may be a name
    return absl::OkStatus();
  }

  absl::Status Commit(v1::DatasetInfo* response) override {
    BNN_RETURN_IF_ERROR(ValidateStreamComplete(
        "append", rows_ != nullptr, rows_ == nullptr ? 0 : rows_->num_rows()));
    const int64_t appended = rows_->num_rows();
    BNN_ASSIGN_OR_RETURN(const store::DatasetMeta meta,
                         service()->datasets_->Append(
                             dataset_id_, std::move(rows_), expected_version_));
    spdlog::info("dataset {} version {}: {} rows appended, {} in all",
                 meta.dataset_id(), meta.version(), appended, meta.num_rows());
    ToDatasetInfo(meta, response);
    return absl::OkStatus();
  }

  void Discard() override { rows_.reset(); }

  std::string dataset_id_;
  std::optional<int64_t> expected_version_;
  // The dataset's schema, without rows.
  Dataset schema_;
  // The appended rows, labels encoded; set by the header.
  std::unique_ptr<DatasetFileWriter> rows_;
  RowMatrix chunk_;
};

grpc::ServerReadReactor<grpc::ByteBuffer>* BnnServiceImpl::UploadDataset(
    grpc::CallbackServerContext* context, grpc::ByteBuffer* response) {
  auto* reactor = new UploadReactor(this, context, response);
  reactor->Start();
  return reactor;
}

grpc::ServerReadReactor<grpc::ByteBuffer>* BnnServiceImpl::AppendRows(
    grpc::CallbackServerContext* context, grpc::ByteBuffer* response) {
  auto* reactor = new AppendReactor(this, context, response);
  reactor->Start();
  return reactor;
}

}  // namespace bnn::server
