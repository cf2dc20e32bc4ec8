// Posterior snapshots: each snapshot file (the bnn snapshot format,
// bnn/io/snapshot.h) is a blob of the data directory's BlobStore
// (blob_store.h), and its store::SnapshotMeta a record of the MetadataStore
// (metadata_store.h) naming that blob, so that listing and lookups never
// decode a snapshot. Decoded snapshots are kept in memory by PredictorCache
// (predictor_cache.h), not here.
//
// A snapshot is stored blob first, record second (holding the blob store's
// reference_mutex() in between): a crash before the record's commit leaves
// an unreferenced blob, which the next start's sweep deletes. A snapshot
// whose blob is quarantined (it failed its SHA-256 check) is DataLoss naming
// the snapshot on every access, and is not listed.
#ifndef BNN_SERVER_STORE_SNAPSHOT_STORE_H_
#define BNN_SERVER_STORE_SNAPSHOT_STORE_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include <absl/functional/function_ref.h>
#include <absl/status/status.h>
#include <absl/status/statusor.h>
#include <absl/strings/string_view.h>

#include "bnn/io/file.h"
#include "bnn/io/snapshot.h"

#include "server/store/blob_store.h"
#include "server/store/metadata_store.h"
#include "store/store.pb.h"

namespace bnn::server {

// The error of a stored snapshot that cannot be served because of `cause`:
// DataLoss naming the snapshot, or FailedPrecondition when `cause` is (a
// newer format).
absl::Status SnapshotLoadError(absl::string_view snapshot_id,
                               const absl::Status& cause);

// Thread-safe.
class SnapshotStore {
 public:
  // Both are borrowed and must outlive the store.
  SnapshotStore(MetadataStore* metadata, BlobStore* blobs)
      : metadata_(metadata), blobs_(blobs) {}

  // A new snapshot id, for a writer that names the snapshot before it
  // commits it (a training job); ids are random, and a commit under an id
  // already taken fails with AlreadyExists.
  std::string NewSnapshotId() const;

  // Stores the snapshot file of `snapshot` as a blob and returns the record
  // that names it under `snapshot_id` (from NewSnapshotId()) and the job
  // that produced it (`job_id`, if any), for the caller to commit with
  // MetadataTransaction::CreateSnapshot inside its own transaction. The
  // caller holds blobs().reference_mutex() shared from before this call
  // until that commit.
  absl::StatusOr<SnapshotRecord> StoreFile(const Snapshot& snapshot,
                                           const std::string& snapshot_id,
                                           absl::string_view job_id);

  // Stores `snapshot` under `snapshot_id` (a new id if it is empty) and
  // returns its metadata, which records `job_id`.
  absl::StatusOr<store::SnapshotMeta> Create(
      const Snapshot& snapshot, const std::string& snapshot_id = "",
      absl::string_view job_id = "");

  // Stores the snapshot file `bytes` (e.g. from another server's export)
  // unchanged under a new id, after decoding it completely. The errors of
  // bnn::DecodeSnapshot (DataLoss for truncated or corrupt bytes,
  // FailedPrecondition for a newer format, InvalidArgument for bad
  // contents) are returned as they are, and nothing is stored.
  absl::StatusOr<store::SnapshotMeta> Import(const std::string& bytes);
  // The same for a snapshot file written to a NewImportFile(): it is
  // decoded from its mapping and renamed into the blob store, never copied.
  absl::StatusOr<store::SnapshotMeta> Import(std::unique_ptr<FileWriter> file);
  // A temporary file to write an imported snapshot to as it arrives
  // (dropping it deletes the file; a crash's leftover is deleted when the
  // blob store opens).
  absl::StatusOr<std::unique_ptr<FileWriter>> NewImportFile() const;

  // NotFound for an unknown id, DataLoss naming it for a snapshot whose
  // record or blob is corrupt.
  absl::StatusOr<store::SnapshotMeta> GetMeta(
      absl::string_view snapshot_id) const;

  // Every readable snapshot, oldest first (ties by id).
  std::vector<store::SnapshotMeta> List() const;
  // Up to `limit` readable snapshots trained on `dataset_id`, newest first.
  absl::StatusOr<std::vector<store::SnapshotMeta>> ListOfDataset(
      absl::string_view dataset_id, int limit) const;

  // Reads and decodes a snapshot (uncached: see PredictorCache). NotFound
  // for an unknown (or just deleted) id, SnapshotLoadError() for one that
  // cannot be read or decoded.
  absl::StatusOr<Snapshot> Read(absl::string_view snapshot_id) const;

  // The snapshot's file exactly as stored, mapped into memory. The mapping
  // stays readable if the snapshot is deleted meanwhile.
  absl::StatusOr<MappedFile> OpenFile(absl::string_view snapshot_id) const;

  // Deletes the snapshot's record, after `before` has run in the same
  // transaction (e.g. removing the model versions that point at it), and
  // then its blob unless another record shares it. Later lookups are
  // NotFound; readers that already hold its bytes finish normally. Corrupt
  // snapshots can be deleted too.
  absl::Status Delete(
      absl::string_view snapshot_id,
      absl::FunctionRef<absl::Status(MetadataTransaction&)> before);
  absl::Status Delete(absl::string_view snapshot_id);

  // Number of snapshots.
  int64_t size() const;

  MetadataStore& metadata() const { return *metadata_; }
  BlobStore& blobs() const { return *blobs_; }

 private:
  // The record of a snapshot whose blob is servable.
  absl::StatusOr<SnapshotRecord> GetRecord(absl::string_view snapshot_id) const;
  // Commits the record of a stored blob (whose reference the caller holds).
  absl::StatusOr<store::SnapshotMeta> Commit(const SnapshotRecord& record);

  MetadataStore* const metadata_;
  BlobStore* const blobs_;
};

}  // namespace bnn::server

#endif  // BNN_SERVER_STORE_SNAPSHOT_STORE_H_
