#include "server/store/snapshot_store.h"

#include <algorithm>
#include <filesystem>
#include <set>
#include <system_error>
#include <utility>

#include <absl/strings/str_cat.h>
#include <spdlog/spdlog.h>

#include "bnn/io/record.h"
#include "bnn/status.h"

#include "server/store/ids.h"
#include "server/store/record_dir.h"
#include "server/store/snapshot_meta.h"

namespace bnn::server {
namespace {

constexpr absl::string_view kExtension = ".snap";
constexpr absl::string_view kInfoExtension = ".info";
constexpr RecordFormat kInfoFormat{"BNNSINFO", 1, "snapshot record"};

absl::Status UnknownSnapshot(absl::string_view snapshot_id) {
  return absl::NotFoundError(
      absl::StrCat("snapshot_id '", snapshot_id, "' not found"));
}

absl::StatusOr<store::SnapshotMeta> ReadInfo(const std::string& path) {
  store::SnapshotMeta meta;
  BNN_RETURN_IF_ERROR(ReadRecordFile(path, kInfoFormat, &meta).status());
  return meta;
}

absl::Status WriteInfo(const std::string& path,
                       const store::SnapshotMeta& meta) {
  return WriteRecordFile(path, kInfoFormat, meta);
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

absl::StatusOr<std::unique_ptr<SnapshotStore>> SnapshotStore::Open(
    std::string dir) {
  BNN_ASSIGN_OR_RETURN(const std::vector<std::string> ids,
                       ScanRecordDir(dir, kSnapshotIdPrefix, kExtension));
  BNN_ASSIGN_OR_RETURN(const std::vector<std::string> info_ids,
                       ScanRecordDir(dir, kSnapshotIdPrefix, kInfoExtension));
  std::unique_ptr<SnapshotStore> store(new SnapshotStore(std::move(dir)));
  const std::set<std::string> with_info(info_ids.begin(), info_ids.end());
  absl::MutexLock lock(&store->mu_);
  for (const std::string& id : ids) {
    store->entries_[id] = store->Index(id, with_info.count(id) > 0);
  }
  // Left by a crash in Create or Delete between the two files.
  for (const std::string& id : info_ids) {
    if (store->entries_.count(id) > 0) continue;
    spdlog::warn("snapshot {}: deleting a record without a snapshot", id);
    BNN_RETURN_IF_ERROR(RemoveFile(store->InfoPathOf(id)));
  }
  return store;
}

SnapshotStore::Entry SnapshotStore::Index(const std::string& snapshot_id,
                                          bool has_info) const {
  std::error_code error;
  const auto size = std::filesystem::file_size(PathOf(snapshot_id), error);
  if (has_info) {
    absl::StatusOr<store::SnapshotMeta> meta =
        ReadInfo(InfoPathOf(snapshot_id));
    // A record that does not describe this very file is rebuilt.
    if (meta.ok() && meta->snapshot_id() == snapshot_id && !error &&
        meta->size_bytes() == static_cast<int64_t>(size)) {
      return Entry{absl::OkStatus(), *std::move(meta)};
    }
  }
  absl::StatusOr<Snapshot> snapshot = ReadSnapshotFile(PathOf(snapshot_id));
  if (!snapshot.ok()) {
    Entry entry{SnapshotLoadError(snapshot_id, snapshot.status()), {}};
    entry.meta.set_snapshot_id(snapshot_id);
    spdlog::error("snapshot {} is unreadable: {}", snapshot_id,
                  entry.status.ToString());
    return entry;
  }
  Entry entry{absl::OkStatus(),
              SnapshotMetaOf(*snapshot, snapshot_id,
                             error ? 0 : static_cast<int64_t>(size))};
  // Without the record the snapshot is still served; it is decoded again on
  // the next start.
  if (const absl::Status written =
          WriteInfo(InfoPathOf(snapshot_id), entry.meta);
      !written.ok()) {
    spdlog::warn("snapshot {}: cannot write its record: {}", snapshot_id,
                 written.ToString());
  } else {
    spdlog::info("snapshot {}: record rebuilt", snapshot_id);
  }
  return entry;
}

std::string SnapshotStore::PathOf(absl::string_view snapshot_id) const {
  return absl::StrCat(dir_, "/", snapshot_id, kExtension);
}

std::string SnapshotStore::InfoPathOf(absl::string_view snapshot_id) const {
  return absl::StrCat(dir_, "/", snapshot_id, kInfoExtension);
}

std::string SnapshotStore::NewSnapshotId() const {
  absl::MutexLock lock(&mu_);
  std::string id;
  do {
    id = NewId(kSnapshotIdPrefix);
  } while (entries_.count(id) > 0);
  return id;
}

absl::StatusOr<store::SnapshotMeta> SnapshotStore::Create(
    const Snapshot& snapshot, const std::string& snapshot_id,
    absl::string_view job_id) {
  BNN_ASSIGN_OR_RETURN(const std::string bytes, EncodeSnapshot(snapshot));
  return Store(bytes, snapshot,
               snapshot_id.empty() ? NewSnapshotId() : snapshot_id, job_id);
}

absl::StatusOr<store::SnapshotMeta> SnapshotStore::Import(
    const std::string& bytes) {
  BNN_ASSIGN_OR_RETURN(std::unique_ptr<FileWriter> file, NewImportFile());
  BNN_RETURN_IF_ERROR(file->Append(bytes));
  return Import(std::move(file));
}

absl::StatusOr<std::unique_ptr<FileWriter>> SnapshotStore::NewImportFile()
    const {
  return FileWriter::Create(
      absl::StrCat(dir_, "/", NewId("incoming"), kTempSuffix));
}

absl::StatusOr<store::SnapshotMeta> SnapshotStore::Import(
    std::unique_ptr<FileWriter> file) {
  Snapshot snapshot;
  {
    BNN_ASSIGN_OR_RETURN(const MappedFile mapped,
                         MappedFile::Open(file->temp_path()));
    BNN_ASSIGN_OR_RETURN(snapshot, DecodeSnapshot(mapped.bytes()));
  }
  const std::string id = NewSnapshotId();
  const store::SnapshotMeta meta =
      SnapshotMetaOf(snapshot, id, static_cast<int64_t>(file->size()));
  // The snapshot first: a crash before its record is written leaves a
  // snapshot whose record Open() rebuilds.
  BNN_RETURN_IF_ERROR(file->Commit(PathOf(id)));
  return AddStored(meta);
}

absl::StatusOr<store::SnapshotMeta> SnapshotStore::Store(
    absl::string_view bytes, const Snapshot& snapshot, const std::string& id,
    absl::string_view job_id) {
  store::SnapshotMeta meta =
      SnapshotMetaOf(snapshot, id, static_cast<int64_t>(bytes.size()));
  meta.set_job_id(std::string(job_id));
  // The snapshot first: a crash before its record is written leaves a
  // snapshot whose record Open() rebuilds.
  BNN_RETURN_IF_ERROR(WriteFileAtomically(PathOf(id), bytes));
  return AddStored(meta);
}

absl::StatusOr<store::SnapshotMeta> SnapshotStore::AddStored(
    const store::SnapshotMeta& meta) {
  const std::string& id = meta.snapshot_id();
  if (absl::Status status = WriteInfo(InfoPathOf(id), meta); !status.ok()) {
    RemoveFile(PathOf(id)).IgnoreError();  // the error below says enough
    return status;
  }
  absl::MutexLock lock(&mu_);
  entries_[id] = Entry{absl::OkStatus(), meta};
  return meta;
}

absl::StatusOr<store::SnapshotMeta> SnapshotStore::GetMeta(
    absl::string_view snapshot_id) const {
  absl::MutexLock lock(&mu_);
  const auto it = entries_.find(snapshot_id);
  if (it == entries_.end()) return UnknownSnapshot(snapshot_id);
  if (!it->second.status.ok()) return it->second.status;
  return it->second.meta;
}

std::vector<store::SnapshotMeta> SnapshotStore::List() const {
  std::vector<store::SnapshotMeta> out;
  {
    absl::MutexLock lock(&mu_);
    for (const auto& [id, entry] : entries_) {
      if (entry.status.ok()) out.push_back(entry.meta);
    }
  }
  std::stable_sort(out.begin(), out.end(), [](const auto& a, const auto& b) {
    return a.created_unix_ms() < b.created_unix_ms();
  });
  return out;
}

absl::StatusOr<Snapshot> SnapshotStore::Read(
    absl::string_view snapshot_id) const {
  BNN_RETURN_IF_ERROR(GetMeta(snapshot_id).status());
  absl::StatusOr<Snapshot> snapshot = ReadSnapshotFile(PathOf(snapshot_id));
  if (!snapshot.ok()) return SnapshotLoadError(snapshot_id, snapshot.status());
  return snapshot;
}

absl::StatusOr<MappedFile> SnapshotStore::OpenFile(
    absl::string_view snapshot_id) const {
  BNN_RETURN_IF_ERROR(GetMeta(snapshot_id).status());
  absl::StatusOr<MappedFile> file = MappedFile::Open(PathOf(snapshot_id));
  // Deleted since the lookup.
  if (absl::IsNotFound(file.status())) return UnknownSnapshot(snapshot_id);
  return file;
}

absl::Status SnapshotStore::Delete(absl::string_view snapshot_id) {
  {
    // The files go under the lock, so that a concurrent reader whose read
    // fails can tell a deletion (entry gone) from corruption.
    absl::MutexLock lock(&mu_);
    const auto it = entries_.find(snapshot_id);
    if (it == entries_.end()) return UnknownSnapshot(snapshot_id);
    BNN_RETURN_IF_ERROR(RemoveFile(PathOf(snapshot_id)));
    // A leftover record is deleted by the next Open().
    if (absl::Status status = RemoveFile(InfoPathOf(snapshot_id));
        !status.ok()) {
      spdlog::warn("{}", status.ToString());
    }
    entries_.erase(it);
  }
  return SyncDirectory(dir_);
}

int64_t SnapshotStore::size() const {
  absl::MutexLock lock(&mu_);
  return std::count_if(entries_.begin(), entries_.end(),
                       [](const auto& kv) { return kv.second.status.ok(); });
}

}  // namespace bnn::server
