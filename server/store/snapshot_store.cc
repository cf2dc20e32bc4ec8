#include "server/store/snapshot_store.h"

#include <algorithm>
#include <utility>

#include <absl/strings/str_cat.h>
#include <absl/synchronization/mutex.h>
#include <spdlog/spdlog.h>

#include "bnn/status.h"

#include "server/store/ids.h"
#include "server/store/snapshot_meta.h"

namespace bnn::server {
namespace {

absl::Status UnknownSnapshot(absl::string_view snapshot_id) {
  return absl::NotFoundError(
      absl::StrCat("snapshot_id '", snapshot_id, "' not found"));
}

}  // namespace

// An indexed snapshot that cannot be served is lost data, unless it was
// written by a newer server (FailedPrecondition).
absl::Status SnapshotLoadError(absl::string_view snapshot_id,
                               const absl::Status& cause) {
  return absl::Status(absl::IsFailedPrecondition(cause)
                          ? absl::StatusCode::kFailedPrecondition
                          : absl::StatusCode::kDataLoss,
                      absl::StrCat("snapshot_id '", snapshot_id,
                                   "' cannot be loaded: ", cause.message()));
}

std::string SnapshotStore::NewSnapshotId() const {
  return NewId(kSnapshotIdPrefix);
}

absl::StatusOr<SnapshotRecord> SnapshotStore::StoreFile(
    const Snapshot& snapshot, const std::string& snapshot_id,
    absl::string_view job_id) {
  BNN_ASSIGN_OR_RETURN(const std::string bytes, EncodeSnapshot(snapshot));
  SnapshotRecord record;
  record.meta =
      SnapshotMetaOf(snapshot, snapshot_id, static_cast<int64_t>(bytes.size()));
  record.meta.set_job_id(std::string(job_id));
  BNN_ASSIGN_OR_RETURN(record.payload_blob, blobs_->Put(bytes));
  return record;
}

absl::StatusOr<store::SnapshotMeta> SnapshotStore::Commit(
    const SnapshotRecord& record) {
  BNN_RETURN_IF_ERROR(metadata_->Write(
      [&](MetadataTransaction& tx) { return tx.CreateSnapshot(record); }));
  return record.meta;
}

absl::StatusOr<store::SnapshotMeta> SnapshotStore::Create(
    const Snapshot& snapshot, const std::string& snapshot_id,
    absl::string_view job_id) {
  absl::ReaderMutexLock reference(blobs_->reference_mutex());
  BNN_ASSIGN_OR_RETURN(
      const SnapshotRecord record,
      StoreFile(snapshot, snapshot_id.empty() ? NewSnapshotId() : snapshot_id,
                job_id));
  return Commit(record);
}

absl::StatusOr<store::SnapshotMeta> SnapshotStore::Import(
    const std::string& bytes) {
  BNN_ASSIGN_OR_RETURN(std::unique_ptr<FileWriter> file, NewImportFile());
  BNN_RETURN_IF_ERROR(file->Append(bytes));
  return Import(std::move(file));
}

absl::StatusOr<std::unique_ptr<FileWriter>> SnapshotStore::NewImportFile()
    const {
  return blobs_->NewTempFile();
}

absl::StatusOr<store::SnapshotMeta> SnapshotStore::Import(
    std::unique_ptr<FileWriter> file) {
  Snapshot snapshot;
  {
    BNN_ASSIGN_OR_RETURN(const MappedFile mapped,
                         MappedFile::Open(file->temp_path()));
    BNN_ASSIGN_OR_RETURN(snapshot, DecodeSnapshot(mapped.bytes()));
  }
  SnapshotRecord record;
  record.meta = SnapshotMetaOf(snapshot, NewSnapshotId(),
                               static_cast<int64_t>(file->size()));
  absl::ReaderMutexLock reference(blobs_->reference_mutex());
  BNN_ASSIGN_OR_RETURN(record.payload_blob, blobs_->Commit(std::move(file)));
  return Commit(record);
}

absl::StatusOr<SnapshotRecord> SnapshotStore::GetRecord(
    absl::string_view snapshot_id) const {
  absl::StatusOr<SnapshotRecord> record = metadata_->Read(
      [&](MetadataReader& r) { return r.GetSnapshot(snapshot_id); });
  if (absl::IsNotFound(record.status())) return UnknownSnapshot(snapshot_id);
  if (!record.ok()) return SnapshotLoadError(snapshot_id, record.status());
  if (absl::Status servable = blobs_->CheckNotQuarantined(record->payload_blob);
      !servable.ok()) {
    return SnapshotLoadError(snapshot_id, servable);
  }
  return record;
}

absl::StatusOr<store::SnapshotMeta> SnapshotStore::GetMeta(
    absl::string_view snapshot_id) const {
  BNN_ASSIGN_OR_RETURN(SnapshotRecord record, GetRecord(snapshot_id));
  return std::move(record.meta);
}

std::vector<store::SnapshotMeta> SnapshotStore::List() const {
  std::vector<store::SnapshotMeta> out;
  const absl::Status status = metadata_->Read([&](MetadataReader& r) {
    PageRequest page;
    page.page_size = kMaxPageSize;
    do {
      BNN_ASSIGN_OR_RETURN(Page<SnapshotRecord> records,
                           r.ListSnapshots(SnapshotFilter(), page));
      for (SnapshotRecord& record : records.items) {
        if (!blobs_->CheckNotQuarantined(record.payload_blob).ok()) continue;
        out.push_back(std::move(record.meta));
      }
      page.page_token = std::move(records.next_page_token);
    } while (!page.page_token.empty());
    return absl::OkStatus();
  });
  if (!status.ok()) {
    spdlog::error("cannot list snapshots: {}", status.ToString());
  }
  std::reverse(out.begin(), out.end());
  return out;
}

absl::StatusOr<std::vector<store::SnapshotMeta>> SnapshotStore::ListOfDataset(
    absl::string_view dataset_id, int limit) const {
  SnapshotFilter filter;
  filter.dataset_id = std::string(dataset_id);
  PageRequest page;
  page.page_size = std::clamp(limit, 1, kMaxPageSize);
  BNN_ASSIGN_OR_RETURN(Page<SnapshotRecord> records,
                       metadata_->Read([&](MetadataReader& r) {
                         return r.ListSnapshots(filter, page);
                       }));
  std::vector<store::SnapshotMeta> out;
  for (SnapshotRecord& record : records.items) {
    out.push_back(std::move(record.meta));
  }
  return out;
}

absl::StatusOr<Snapshot> SnapshotStore::Read(
    absl::string_view snapshot_id) const {
  BNN_ASSIGN_OR_RETURN(const MappedFile file, OpenFile(snapshot_id));
  absl::StatusOr<Snapshot> snapshot = DecodeSnapshot(file.bytes());
  if (!snapshot.ok()) return SnapshotLoadError(snapshot_id, snapshot.status());
  return snapshot;
}

absl::StatusOr<MappedFile> SnapshotStore::OpenFile(
    absl::string_view snapshot_id) const {
  BNN_ASSIGN_OR_RETURN(const SnapshotRecord record, GetRecord(snapshot_id));
  absl::StatusOr<MappedFile> file =
      blobs_->Map(record.payload_blob, BlobStore::Check::kTrust);
  if (absl::IsNotFound(file.status())) {
    // Deleted since the lookup (a concurrent DeleteSnapshot), or a blob that
    // vanished under a record that still names it: data loss, not an
    // unknown snapshot.
    if (absl::IsNotFound(GetRecord(snapshot_id).status())) {
      return UnknownSnapshot(snapshot_id);
    }
    return absl::DataLossError(
        absl::StrCat("snapshot_id '", snapshot_id, "': its file (blob ",
                     record.payload_blob, ") is missing from the blob store"));
  }
  if (!file.ok()) return SnapshotLoadError(snapshot_id, file.status());
  return file;
}

absl::Status SnapshotStore::Delete(
    absl::string_view snapshot_id,
    absl::FunctionRef<absl::Status(MetadataTransaction&)> before) {
  std::string blob;
  const absl::Status deleted =
      metadata_->Write([&](MetadataTransaction& tx) -> absl::Status {
        // A corrupt record is deleted too (its blob is swept at the next
        // start).
        absl::StatusOr<SnapshotRecord> record = tx.GetSnapshot(snapshot_id);
        if (absl::IsNotFound(record.status())) {
          return UnknownSnapshot(snapshot_id);
        }
        if (record.ok()) blob = record->payload_blob;
        BNN_RETURN_IF_ERROR(before(tx));
        return tx.DeleteSnapshot(snapshot_id);
      });
  BNN_RETURN_IF_ERROR(deleted);
  if (blob.empty()) return absl::OkStatus();  // swept at the next start
  return blobs_->RemoveIfUnreferenced(blob, [&]() {
    return metadata_->Read(
        [&](MetadataReader& r) { return r.IsBlobReferenced(blob); });
  });
}

absl::Status SnapshotStore::Delete(absl::string_view snapshot_id) {
  return Delete(snapshot_id,
                [](MetadataTransaction&) { return absl::OkStatus(); });
}

int64_t SnapshotStore::size() const {
  return metadata_->Read([](MetadataReader& r) { return r.CountSnapshots(); })
      .value_or(0);
}

}  // namespace bnn::server
