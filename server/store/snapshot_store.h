// Posterior snapshots on disk: <dir>/<snapshot_id>.snap in the bnn snapshot
// format (bnn/io/snapshot.h), and beside it <snapshot_id>.info, a small
// store::SnapshotMeta record so that listing and lookups never decode a
// snapshot. Decoded snapshots are kept in memory by PredictorCache
// (predictor_cache.h), not here.
#ifndef BNN_SERVER_STORE_SNAPSHOT_STORE_H_
#define BNN_SERVER_STORE_SNAPSHOT_STORE_H_

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include <absl/base/thread_annotations.h>
#include <absl/status/status.h>
#include <absl/status/statusor.h>
#include <absl/strings/string_view.h>
#include <absl/synchronization/mutex.h>

#include "bnn/io/file.h"
#include "bnn/io/snapshot.h"

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
  // Opens `dir` (created if missing) and indexes the snapshots in it from
  // their .info records. A snapshot without a valid record (written by an
  // older server, or interrupted by a crash) is decoded once and its record
  // rewritten; one that cannot be decoded stays indexed with its error
  // (DataLoss on lookup) and is logged. Records without a snapshot are
  // deleted.
  static absl::StatusOr<std::unique_ptr<SnapshotStore>> Open(std::string dir);

  // A new snapshot id, for a writer that records which snapshot it is
  // about to create (a training job) before it calls Create with it.
  std::string NewSnapshotId() const;
  // Writes `snapshot` durably under `snapshot_id` (from NewSnapshotId()),
  // or a new id if it is empty, and returns its metadata, which records the
  // training job that produced it (`job_id`, if any).
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
  // decoded from its mapping and renamed into place, never copied.
  absl::StatusOr<store::SnapshotMeta> Import(std::unique_ptr<FileWriter> file);
  // A temporary file in the store's directory to write an imported
  // snapshot to as it arrives (dropping it deletes the file; a crash's
  // leftover is deleted when the store opens).
  absl::StatusOr<std::unique_ptr<FileWriter>> NewImportFile() const;

  // NotFound for an unknown id, DataLoss (naming the file) for a corrupt
  // snapshot.
  absl::StatusOr<store::SnapshotMeta> GetMeta(
      absl::string_view snapshot_id) const;

  // Every readable snapshot, oldest first (ties by id).
  std::vector<store::SnapshotMeta> List() const;

  // Reads and decodes a snapshot (uncached: see PredictorCache). NotFound
  // for an unknown (or just deleted) id, SnapshotLoadError() for one that
  // cannot be read or decoded.
  absl::StatusOr<Snapshot> Read(absl::string_view snapshot_id) const;

  // The snapshot's file exactly as stored, mapped into memory. The mapping
  // stays readable if the snapshot is deleted meanwhile.
  absl::StatusOr<MappedFile> OpenFile(absl::string_view snapshot_id) const;

  // Deletes the snapshot's files; later lookups are NotFound. Readers that
  // already hold its bytes finish normally. Corrupt snapshots can be deleted
  // too.
  absl::Status Delete(absl::string_view snapshot_id);

  // Number of readable snapshots.
  int64_t size() const;

 private:
  struct Entry {
    absl::Status status;  // why the snapshot is unreadable, or OK
    store::SnapshotMeta meta;
  };
  explicit SnapshotStore(std::string dir) : dir_(std::move(dir)) {}
  std::string PathOf(absl::string_view snapshot_id) const;
  std::string InfoPathOf(absl::string_view snapshot_id) const;
  // Indexes one snapshot file when the store opens.
  Entry Index(const std::string& snapshot_id, bool has_info) const;
  // Writes `bytes`, which decode to `snapshot`, and its record (naming
  // `job_id`) under `id`.
  absl::StatusOr<store::SnapshotMeta> Store(absl::string_view bytes,
                                            const Snapshot& snapshot,
                                            const std::string& id,
                                            absl::string_view job_id);
  // Writes the record of the snapshot file now stored under `meta`'s id and
  // indexes it; deletes the file if the record cannot be written.
  absl::StatusOr<store::SnapshotMeta> AddStored(
      const store::SnapshotMeta& meta);

  const std::string dir_;
  mutable absl::Mutex mu_;
  std::map<std::string, Entry, std::less<>> entries_ ABSL_GUARDED_BY(mu_);
};

}  // namespace bnn::server

#endif  // BNN_SERVER_STORE_SNAPSHOT_STORE_H_
