// UploadDataset and AppendRows: client streams of a header, then row chunks.
// Rows are validated as they arrive (row indices count across chunks), so a
// bad row ends the call at once; the dataset (or its next version) is stored
// on the I/O pool at the end of the stream, and only if every row was valid.
#include <optional>
#include <string>
#include <utility>

#include <spdlog/spdlog.h>

#include "bnn/data/dataset.h"
#include "bnn/status.h"

#include "server/api/bnn_v1/bnn_service.h"
#include "server/api/bnn_v1/request_validation.h"
#include "server/api/bnn_v1/stream_reader.h"
#include "server/api/bnn_v1/to_wire.h"
#include "server/store/dataset_file.h"

namespace bnn::server {
namespace {

// Validates one chunk of rows (numbered from the start of the stream, i.e.
// from data->num_rows()) and appends them to `data`.
absl::Status AddRows(const v1::RowChunk& chunk, const ServerLimits& limits,
                     Dataset* data) {
  BNN_RETURN_IF_ERROR(ValidateRowChunk(
      chunk, static_cast<int>(data->num_features), data->num_rows(), limits));
  for (const v1::Example& example : chunk.rows()) {
    data->features.insert(data->features.end(), example.x().begin(),
                          example.x().end());
    data->targets.push_back(example.y());
  }
  return absl::OkStatus();
}

}  // namespace

class BnnServiceImpl::UploadReactor final
    : public StreamReader<v1::UploadDatasetRequest, v1::UploadDatasetResponse> {
 public:
  UploadReactor(BnnServiceImpl* service, grpc::CallbackServerContext* context,
                grpc::ByteBuffer* response)
      : StreamReader(service, context, response, "UploadDataset", "upload",
                     &service->io_pool_) {}

 private:
  absl::Status Consume(v1::UploadDatasetRequest& message,
                       int64_t index) override {
    BNN_RETURN_IF_ERROR(ValidateStreamMessage("upload", PayloadOf(message),
                                              index, have_header_));
    if (message.has_header()) {
      BNN_RETURN_IF_ERROR(ValidateDatasetHeader(message.header()));
      header_ = std::move(*message.mutable_header());
      have_header_ = true;
      data_.num_features = header_.num_features();
      data_.feature_names.assign(header_.feature_names().begin(),
                                 header_.feature_names().end());
      data_.target_name = header_.target_name();
      return absl::OkStatus();
    }
    return AddRows(message.chunk(), service()->options_.limits, &data_);
  }

  absl::Status Commit(v1::UploadDatasetResponse* response) override {
    BNN_RETURN_IF_ERROR(
        ValidateStreamComplete("upload", have_header_, data_.num_rows()));
    if (header_.task() == v1::TASK_CLASSIFICATION) {
      BNN_RETURN_IF_ERROR(ValidateClassLabels(data_.targets));
      BNN_RETURN_IF_ERROR(EncodeClassLabels(&data_));
    }
    BNN_RETURN_IF_ERROR(data_.Validate());
    DatasetStore* const datasets = service()->datasets_;
    BNN_ASSIGN_OR_RETURN(const store::DatasetMeta meta,
                         datasets->Create(data_, header_.name()));
    service()->metrics_->datasets().Set(static_cast<double>(datasets->size()));
    spdlog::info("dataset {} '{}' stored: {} rows x {} features",
                 meta.dataset_id(), meta.name(), meta.num_rows(),
                 meta.num_features());
    ToDatasetInfo(meta, response->mutable_dataset());
    return absl::OkStatus();
  }

  bool have_header_ = false;
  v1::DatasetHeader header_;
  Dataset data_;
};

class BnnServiceImpl::AppendReactor final
    : public StreamReader<v1::AppendRowsRequest, v1::DatasetInfo> {
 public:
  AppendReactor(BnnServiceImpl* service, grpc::CallbackServerContext* context,
                grpc::ByteBuffer* response)
      : StreamReader(service, context, response, "AppendRows", "append",
                     &service->io_pool_) {}

 private:
  absl::Status Consume(v1::AppendRowsRequest& message, int64_t index) override {
    BNN_RETURN_IF_ERROR(ValidateStreamMessage("append", PayloadOf(message),
                                              index, have_header_));
    if (message.has_header()) return TakeHeader(message.header());
    const int64_t first_row = rows_.num_rows();
    BNN_RETURN_IF_ERROR(
        AddRows(message.chunk(), service()->options_.limits, &rows_));
    if (!IsClassification(rows_.task)) return absl::OkStatus();
    return EncodeAppendedLabels(
        absl::MakeSpan(rows_.targets).subspan(first_row), first_row,
        rows_.class_values);
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
    BNN_ASSIGN_OR_RETURN(rows_, DatasetSchema(latest));
    dataset_id_ = header.dataset_id();
    have_header_ = true;
    return absl::OkStatus();
  }

  absl::Status Commit(v1::DatasetInfo* response) override {
    BNN_RETURN_IF_ERROR(
        ValidateStreamComplete("append", have_header_, rows_.num_rows()));
    BNN_ASSIGN_OR_RETURN(
        const store::DatasetMeta meta,
        service()->datasets_->Append(dataset_id_, rows_, expected_version_));
    spdlog::info("dataset {} version {}: {} rows appended, {} in all",
                 meta.dataset_id(), meta.version(), rows_.num_rows(),
                 meta.num_rows());
    ToDatasetInfo(meta, response);
    return absl::OkStatus();
  }

  bool have_header_ = false;
  std::string dataset_id_;
  std::optional<int64_t> expected_version_;
  // The appended rows, labels encoded, with the dataset's schema.
  Dataset rows_;
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
