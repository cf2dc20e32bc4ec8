// ExportSnapshot and ImportSnapshot: a snapshot file, exactly as stored
// (versioned and checksummed), streamed out or in in chunks.
#include <algorithm>
#include <memory>
#include <optional>
#include <string>
#include <utility>

#include <absl/strings/str_cat.h>
#include <absl/time/clock.h>
#include <absl/time/time.h>
#include <spdlog/spdlog.h>

#include "bnn/io/file.h"
#include "bnn/status.h"

#include "server/api/bnn_v1/bnn_service.h"
#include "server/api/bnn_v1/request_validation.h"
#include "server/api/bnn_v1/stream_reader.h"
#include "server/api/bnn_v1/to_wire.h"
#include "server/common/status_util.h"
#include "server/common/user_text.h"

namespace bnn::server {
namespace {

// Bytes per exported message: well below the 4 MiB default receive limit of
// gRPC clients.
constexpr size_t kExportChunkBytes = size_t{1} << 20;

}  // namespace

// Writes one chunk at a time. The file is mapped and each chunk copied out
// of the mapping on the I/O pool (the copy may read the disk); the pool
// thread starts the write, and its completion schedules the next chunk.
class BnnServiceImpl::ExportReactor final
    : public grpc::ServerWriteReactor<v1::SnapshotChunk> {
 public:
  ExportReactor(BnnServiceImpl* service, grpc::CallbackServerContext* context,
                const v1::ExportSnapshotRequest& request)
      : service_(service), context_(context), start_(absl::Now()) {
    if (absl::Status status =
            service_->Authorize(context_, "ExportSnapshot").status();
        !status.ok()) {
      Complete(status);
      return;
    }
    // Resolved once: the export sends this snapshot whatever alias moves
    // happen meanwhile.
    absl::StatusOr<Target> target = service_->ResolveTarget(request);
    if (!target.ok()) {
      Complete(target.status());
      return;
    }
    target_ = *std::move(target);
    service_->io_pool_.Schedule([this] { Open(); });
  }

  void OnWriteDone(bool ok) override {
    if (!ok) {
      Complete(absl::CancelledError(
          "ExportSnapshot was cancelled: the client stopped reading"));
      return;
    }
    service_->io_pool_.Schedule([this] { WriteNext(); });
  }

  void OnDone() override { delete this; }

 private:
  void Open() {
    absl::StatusOr<MappedFile> file =
        service_->snapshots_->OpenFile(target_.snapshot_id);
    if (!file.ok()) {
      Complete(file.status());
      return;
    }
    file_ = *std::move(file);
    WriteNext();
  }

  // Starts writing the next chunk, or finishes after the last one.
  void WriteNext() {
    const absl::string_view bytes = file_->bytes();
    if (offset_ == bytes.size()) {
      Complete(absl::OkStatus());
      return;
    }
    const size_t size = std::min(kExportChunkBytes, bytes.size() - offset_);
    if (offset_ == 0) {
      chunk_.set_snapshot_id(target_.snapshot_id);
      chunk_.set_model_name(target_.model_name);
      chunk_.set_model_version(target_.model_version);
    } else {
      chunk_.clear_snapshot_id();
      chunk_.clear_model_name();
      chunk_.clear_model_version();
    }
    chunk_.set_data(bytes.data() + offset_, size);
    offset_ += size;
    StartWrite(&chunk_);
  }

  void Complete(const absl::Status& status) {
    Finish(ToGrpcStatus(
        service_->RecordOutcome(context_, "ExportSnapshot", start_, status)));
  }

  BnnServiceImpl* const service_;
  grpc::CallbackServerContext* const context_;
  const absl::Time start_;
  Target target_;
  std::optional<MappedFile> file_;
  size_t offset_ = 0;
  v1::SnapshotChunk chunk_;
};

// Writes the bytes to a temporary file of the snapshot store as they arrive
// (at most --max-snapshot-bytes); the store decodes the file completely
// before it is stored.
class BnnServiceImpl::ImportReactor final
    : public StreamReader<v1::SnapshotChunk, v1::SnapshotInfo> {
 public:
  ImportReactor(BnnServiceImpl* service, grpc::CallbackServerContext* context,
                grpc::ByteBuffer* response)
      : StreamReader(service, context, response, "ImportSnapshot", "import",
                     service->options_.limits.max_snapshot_bytes,
                     "--max-snapshot-bytes") {}

 private:
  absl::Status Consume(v1::SnapshotChunk& chunk, int64_t /*index*/) override {
    if (file_ == nullptr) {
      BNN_ASSIGN_OR_RETURN(file_, service()->snapshots_->NewImportFile());
    }
    return file_->Append(chunk.data());
  }

  absl::Status Commit(v1::SnapshotInfo* response) override {
    if (file_ == nullptr || file_->size() == 0) {
      return absl::InvalidArgumentError(
          "the import has no data; send the snapshot file in chunks");
    }
    SnapshotStore* const snapshots = service()->snapshots_;
    // Decoding holds the parsed message and the decoded snapshot, each
    // about the size of the file.
    BNN_ASSIGN_OR_RETURN(
        const MemoryBudget::Reservation reservation,
        service()->memory_budget_->TryReserve(
            Who(), 2 * static_cast<int64_t>(file_->size()),
            absl::StrCat("decoding a snapshot of ", file_->size(), " bytes")));
    BNN_ASSIGN_OR_RETURN(const store::SnapshotMeta meta,
                         snapshots->Import(std::move(file_)));
    service()->metrics_->snapshots_imported().Increment();
    service()->metrics_->snapshots().Set(
        static_cast<double>(snapshots->size()));
    spdlog::info("snapshot {} imported: {} bytes, method {}, dataset {}",
                 meta.snapshot_id(), meta.size_bytes(), SafeText(meta.method()),
                 SafeText(meta.dataset_id()));
    ToSnapshotInfo(meta, response);
    return absl::OkStatus();
  }

  void Discard() override { file_.reset(); }

  // Created by the first chunk.
  std::unique_ptr<FileWriter> file_;
};

grpc::ServerWriteReactor<v1::SnapshotChunk>* BnnServiceImpl::ExportSnapshot(
    grpc::CallbackServerContext* context,
    const v1::ExportSnapshotRequest* request) {
  return new ExportReactor(this, context, *request);
}

grpc::ServerReadReactor<grpc::ByteBuffer>* BnnServiceImpl::ImportSnapshot(
    grpc::CallbackServerContext* context, grpc::ByteBuffer* response) {
  auto* reactor = new ImportReactor(this, context, response);
  reactor->Start();
  return reactor;
}

}  // namespace bnn::server
