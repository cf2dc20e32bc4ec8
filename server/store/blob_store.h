// Content-addressed files for what the metadata store (metadata_store.h)
// refers to: the rows of dataset versions and snapshot files. A blob is the
// bytes of one record file (bnn/io/record.h: a dataset version file, a
// snapshot), stored unchanged, so readers decode and map it as before; its
// name is the hex SHA-256 of those bytes (bnn::Sha256Hex), so equal contents
// are stored once and every byte is checked against the name.
//
// Layout under the root (e.g. <data-dir>/blobs):
//   objects/<first two hex digits>/<64 hex digits>   the blobs
//   tmp/<id>.tmp                                      blobs being written
//   quarantine/<64 hex digits>                        blobs that failed
// A blob is written to tmp/, fsync'd, renamed into objects/ and its
// directory fsync'd (bnn::FileWriter), so a crash leaves a whole blob or a
// temporary, and Open deletes temporaries.
//
// Integrity: Open (with Options::verify_on_open) and Verify() hash every
// blob; one whose bytes do not match its name is moved to quarantine/ and
// reported (a list for a log line and a metric), and from then on, also
// after a restart, every access to it is DataLoss naming it: it is never
// served. Map(kVerify) checks a blob again when it is read.
//
// Garbage collection is a sweep, not reference counting: blobs are shared
// by content, and a count kept beside them could drift from the records
// after a crash, while a sweep needs no state. Sweep() deletes every blob
// not in a set of referenced ones (MetadataReader::ReferencedBlobs()); a
// writer stores its blob before it commits the record that refers to it,
// so a crash in between leaves an unreferenced blob that the next sweep
// removes. A sweep must not run while a blob is stored but its record not
// yet committed (run it at start-up, before the store is used).
//
// Thread-safe: writes of the same content race only to rename identical
// bytes into place.
#ifndef BNN_SERVER_STORE_BLOB_STORE_H_
#define BNN_SERVER_STORE_BLOB_STORE_H_

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <absl/base/thread_annotations.h>
#include <absl/container/flat_hash_map.h>
#include <absl/container/flat_hash_set.h>
#include <absl/functional/function_ref.h>
#include <absl/status/status.h>
#include <absl/status/statusor.h>
#include <absl/strings/string_view.h>
#include <absl/synchronization/mutex.h>
#include <absl/time/time.h>

#include "bnn/io/file.h"

namespace bnn::server {

// A blob that failed its check, where it is now and why.
struct QuarantinedBlob {
  std::string blob;
  std::string path;
  std::string reason;
};

class BlobStore {
 public:
  struct Options {
    // Hash every blob when the store opens (one read of all stored bytes,
    // at the speed of SHA-256, a few hundred MB/s) and quarantine those
    // that fail. Off, blobs are only checked by Verify() and Map(kVerify).
    bool verify_on_open = true;
    // Other processes (replicas sharing a PostgreSQL metadata store) write
    // under the same root. Then Open deletes only temporaries older than
    // kSharedTemporaryAge (younger ones may be another replica's writes in
    // progress), RemoveIfUnreferenced deletes nothing (another replica may
    // have stored the same contents for a record it has not committed yet:
    // no lock spans the processes) and Sweep is refused. Blobs of deleted
    // records stay until a sweep with every replica stopped.
    bool shared = false;
  };
  // See Options::shared.
  static constexpr absl::Duration kSharedTemporaryAge = absl::Hours(24);

  // What Open found.
  struct OpenReport {
    int64_t blobs = 0;
    int64_t bytes = 0;
    // Temporaries of writes a crash interrupted, deleted.
    int64_t temporaries_removed = 0;
    // Quarantined by this open's verification.
    std::vector<QuarantinedBlob> quarantined;
  };

  enum class Check { kVerify, kTrust };

  // Opens (creating durably) the store under `root`, deletes temporaries
  // and, with verify_on_open, verifies every blob. `report` may be null.
  static absl::StatusOr<std::unique_ptr<BlobStore>> Open(std::string root,
                                                         const Options& options,
                                                         OpenReport* report);

  // Whether `blob` has the form of a blob name (64 lower-case hex digits).
  static bool IsBlobName(absl::string_view blob);

  // Stores `contents` and returns its name. Storing contents that are
  // already stored writes nothing.
  absl::StatusOr<std::string> Put(absl::string_view contents);
  // A temporary file in tmp/ for contents too large to hold in memory
  // (dropping it uncommitted deletes it), and the commit that hashes it
  // (through a read-only mapping) and renames it into place.
  absl::StatusOr<std::unique_ptr<FileWriter>> NewTempFile() const;
  absl::StatusOr<std::string> Commit(std::unique_ptr<FileWriter> file);
  // A new path in tmp/ for a writer that creates its file itself (e.g. a
  // dataset version's record), to Adopt once complete; Open deletes it if
  // a crash leaves it.
  std::string NewTempPath() const;
  // Stores the existing file `path` (not modified afterwards) as a blob:
  // hard-linked into objects/ when the file system allows, else copied.
  // The file itself is left as it is.
  absl::StatusOr<std::string> Adopt(const std::string& path);

  // The blob's path, for readers that open it themselves (e.g. the
  // mapped rows of a dataset). NotFound for an unknown blob, DataLoss for a
  // quarantined one.
  absl::StatusOr<std::string> PathOf(absl::string_view blob) const;
  // DataLoss naming the blob if it is quarantined, else OK: a check that
  // touches no file, for lookups on the hot path.
  absl::Status CheckNotQuarantined(absl::string_view blob) const;
  // The blob mapped read-only. With kVerify its bytes are hashed first; a
  // mismatch quarantines it and is DataLoss.
  absl::StatusOr<MappedFile> Map(absl::string_view blob, Check check);

  // Hashes every stored blob and quarantines those that fail; returns them.
  absl::StatusOr<std::vector<QuarantinedBlob>> Verify();

  // Deletes every blob not in `referenced`; returns their number. See the
  // file comment for when it may run. FailedPrecondition for a shared
  // store.
  absl::StatusOr<int64_t> Sweep(
      const absl::flat_hash_set<std::string>& referenced);

  // Every quarantined blob, including those quarantined before this open.
  std::vector<QuarantinedBlob> Quarantined() const;

  // Held shared by a writer from storing a blob until the record that
  // refers to it is committed (or abandoned), so that RemoveIfUnreferenced
  // never deletes a blob a record is about to refer to.
  absl::Mutex* reference_mutex() ABSL_LOCK_RETURNED(reference_mu_) {
    return &reference_mu_;
  }
  // Deletes `blob` (stored or quarantined) unless `referenced`, called with
  // reference_mutex() held exclusively, says a record refers to it. A blob
  // that is not stored is not an error. A shared store deletes nothing.
  absl::Status RemoveIfUnreferenced(
      absl::string_view blob,
      absl::FunctionRef<absl::StatusOr<bool>()> referenced)
      ABSL_LOCKS_EXCLUDED(reference_mu_);

 private:
  BlobStore(std::string root, std::string objects, std::string tmp,
            std::string quarantine, bool shared)
      : shared_(shared),
        root_(std::move(root)),
        objects_(std::move(objects)),
        tmp_(std::move(tmp)),
        quarantine_(std::move(quarantine)) {}

  std::string ObjectPath(absl::string_view blob) const;
  // Creates objects/<prefix>/ durably.
  absl::Status CreateObjectDir(absl::string_view blob) const;
  // NotFound or DataLoss unless `blob` is stored and not quarantined.
  absl::Status CheckServable(absl::string_view blob) const;
  // Hashes a stored blob; quarantines it if it fails (returned).
  absl::StatusOr<std::optional<QuarantinedBlob>> CheckOne(
      absl::string_view blob);
  // Moves the blob to quarantine/ and remembers it.
  absl::StatusOr<QuarantinedBlob> Quarantine(absl::string_view blob,
                                             std::string reason);
  // The names of the stored blobs.
  absl::StatusOr<std::vector<std::string>> List() const;

  const bool shared_;
  const std::string root_;
  const std::string objects_;
  const std::string tmp_;
  const std::string quarantine_;
  absl::Mutex reference_mu_ ABSL_ACQUIRED_BEFORE(mu_);
  mutable absl::Mutex mu_;
  absl::flat_hash_map<std::string, QuarantinedBlob> quarantined_
      ABSL_GUARDED_BY(mu_);
};

}  // namespace bnn::server

#endif  // BNN_SERVER_STORE_BLOB_STORE_H_
