// The store of a data directory:
//   <data-dir>/metadata.db    SQLite metadata (sqlite_metadata_store.h):
//                             datasets and versions, snapshots, jobs,
//                             models with their versions and aliases (or
//                             a PostgreSQL database shared by replicas,
//                             postgres_metadata_store.h)
//   <data-dir>/blobs/         dataset version rows and snapshot files
//                             (blob_store.h), content-addressed (or a
//                             directory of its own, shared by replicas)
//   <data-dir>/checkpoints/   <job_id>.ckpt, the last training checkpoint
//                             of each job that may still resume (JobStore;
//                             <blob-dir>/checkpoints/ with PostgreSQL, so
//                             that any replica can resume the job)
// and the one-time migration of a data directory of the record-file layout
// of older servers (datasets/, jobs/, snapshots/, models/, one record file
// per dataset version, job, snapshot and model, and jobs/<id>.ckpt) into it.
// The readers of that layout live only here.
//
// The migration reads the old directories, links every dataset version
// file and snapshot file into the blob store and every checkpoint of a job
// that may resume into checkpoints/ (hard links: no copy, no extra space)
// and writes every record into a new database, metadata.db.migrating, in
// one transaction with a rollback journal. Only when that database is
// complete and fsync'd is it renamed to metadata.db (the commit point; the
// database records that it was migrated), and then the old directories are
// moved into <data-dir>/record-files.migrated/ for the operator to delete.
// A crash before the rename leaves the old directories untouched and the
// next open migrates again from scratch (blobs and checkpoints already
// linked are replaced, a stale .migrating file is deleted, blob links of a
// failed attempt are swept); a crash after it leaves metadata.db and the
// old directories, which the next open moves aside.
#ifndef BNN_SERVER_STORE_METADATA_DIR_H_
#define BNN_SERVER_STORE_METADATA_DIR_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include <absl/status/status.h>
#include <absl/status/statusor.h>
#include <absl/strings/string_view.h>

#include "bnn/io/record.h"

#include "server/store/blob_store.h"
#include "server/store/postgres_metadata_store.h"
#include "server/store/sqlite_metadata_store.h"

namespace bnn::server {

inline constexpr absl::string_view kMetadataDbName = "metadata.db";
inline constexpr absl::string_view kBlobDirName = "blobs";
inline constexpr absl::string_view kCheckpointDirName = "checkpoints";
// Where the migration moves the record-file directories.
inline constexpr absl::string_view kMigratedRecordFilesDirName =
    "record-files.migrated";
// The store property (MetadataReader::GetProperty) a migrated database
// holds: when and from what it was migrated.
inline constexpr absl::string_view kMigratedFromProperty =
    "migrated_from_record_files";

// What a migration did.
struct MigrationReport {
  // Whether records were migrated by this call.
  bool migrated = false;
  // Whether this call moved the old directories aside (after a migration,
  // or finishing one a crash interrupted).
  bool moved_aside = false;
  int64_t datasets = 0;
  int64_t dataset_versions = 0;
  int64_t snapshots = 0;
  int64_t jobs = 0;
  int64_t models = 0;
  // Checkpoints of jobs that may resume, linked into checkpoints/.
  int64_t checkpoints = 0;
  // Records that could not be read (corrupt, truncated, newer format), and
  // model versions whose snapshot could not be, each "<file>: <error>";
  // they stay in the moved-aside directories.
  std::vector<std::string> skipped;
  // Dataset names several datasets shared (allowed by old servers): each
  // "<name>: <ids>"; those datasets are migrated without their name, which
  // names are unique in the metadata store.
  std::vector<std::string> dropped_names;
};

// The record formats of the record-file layout, for the migration (and
// tests that write such a directory); the dataset version files
// (dataset_file.h) and snapshot files (bnn/io/snapshot.h) kept their
// formats as blobs.
inline constexpr RecordFormat kRecordFileJobFormat{"BNNJOB01", 1, "job record"};
inline constexpr RecordFormat kRecordFileSnapshotInfoFormat{"BNNSINFO", 1,
                                                            "snapshot record"};
inline constexpr RecordFormat kRecordFileModelFormat{"BNNMODEL", 1,
                                                     "model record"};

struct MigrationOptions {
  // Called with the name of each step as it is reached ("records_written":
  // the new database is complete but not yet in place; "renamed": it is in
  // place, the old directories not yet moved); an error stops the
  // migration there, as a crash would. For tests of crash safety.
  std::function<absl::Status(absl::string_view step)> on_step;
};

// Migrates `data_dir` if it holds record-file directories and no metadata
// database (or finishes a migration a crash interrupted); otherwise does
// nothing. FailedPrecondition if the directory holds both a database that
// was not migrated and record-file directories, naming them. The caller
// holds the data directory's lock (DataDirLock).
absl::StatusOr<MigrationReport> MigrateRecordFiles(
    const std::string& data_dir, const MigrationOptions& options = {});

struct MetadataDir {
  struct Options {
    SqliteMetadataStore::Options metadata;
    // A PostgreSQL connection URI (--metadata): the metadata lives in that
    // database, shared with the other servers given it, instead of in
    // <data-dir>/metadata.db. The blob store is then shared
    // (BlobStore::Options::shared: nothing swept) and a data directory of
    // the record-file layout is refused (migrate it with SQLite first).
    std::string postgres_uri;
    PostgresMetadataStore::Options postgres;
    // The blob directory (--blob-dir); empty: <data-dir>/blobs. A
    // record-file data directory migrates only into <data-dir>/blobs.
    std::string blob_dir;
    BlobStore::Options blobs;
    // Delete blobs no record refers to (left by a crash between a blob's
    // write and its record's commit, or by deletions) when the store opens.
    bool sweep_unreferenced_blobs = true;
    MigrationOptions migration;
  };

  // Migrates `data_dir` if needed (MigrateRecordFiles), then opens its
  // metadata and blobs, verifying and sweeping the blobs as the options
  // say. The caller holds the data directory's lock.
  static absl::StatusOr<MetadataDir> Open(const std::string& data_dir,
                                          const Options& options);

  // SqliteMetadataStore or PostgresMetadataStore.
  std::unique_ptr<MetadataStore> metadata;
  std::unique_ptr<BlobStore> blobs;
  // The directory of job checkpoints (JobStore::Open): <data-dir>/
  // checkpoints with SQLite, <blob-dir>/checkpoints with PostgreSQL, where
  // every replica that may take a job over reads it.
  std::string checkpoint_dir;
  MigrationReport migration;
  // Temporaries deleted, blobs found and quarantined (for the start-up log
  // line and metric).
  BlobStore::OpenReport blob_report;
  int64_t blobs_swept = 0;
};

}  // namespace bnn::server

#endif  // BNN_SERVER_STORE_METADATA_DIR_H_
