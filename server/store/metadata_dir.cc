#include "server/store/metadata_dir.h"

#include <cerrno>
#include <cstring>
#include <fcntl.h>
#include <filesystem>
#include <map>
#include <set>
#include <system_error>
#include <unistd.h>
#include <utility>

#include <absl/strings/str_cat.h>
#include <absl/strings/str_join.h>
#include <absl/time/clock.h>
#include <absl/time/time.h>

#include "bnn/io/file.h"
#include "bnn/status.h"

#include "server/store/dataset_file.h"
#include "server/store/dataset_store.h"
#include "server/store/ids.h"
#include "server/store/job_store.h"
#include "server/store/record_dir.h"
#include "server/store/snapshot_store.h"

namespace bnn::server {
namespace {

namespace fs = std::filesystem;

// The record-file layout's directories, as Server::Create opens them.
constexpr const char* kRecordDirs[] = {"datasets", "jobs", "snapshots"};
constexpr absl::string_view kMigratingSuffix = ".migrating";

absl::Status Step(const MigrationOptions& options, absl::string_view step) {
  return options.on_step ? options.on_step(step) : absl::OkStatus();
}

absl::Status FsyncFile(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    return absl::InternalError(
        absl::StrCat("cannot open ", path, ": ", std::strerror(errno)));
  }
  absl::Status status;
  if (::fsync(fd) != 0) {
    status = absl::InternalError(
        absl::StrCat("cannot fsync ", path, ": ", std::strerror(errno)));
  }
  ::close(fd);
  return status;
}

std::vector<std::string> RecordDirsIn(const std::string& data_dir) {
  std::vector<std::string> found;
  for (const char* dir : kRecordDirs) {
    std::error_code error;
    if (fs::is_directory(absl::StrCat(data_dir, "/", dir), error)) {
      found.push_back(dir);
    }
  }
  return found;
}

// Moves the record-file directories into record-files.migrated/.
absl::Status MoveAside(const std::string& data_dir,
                       const std::vector<std::string>& dirs) {
  const std::string aside =
      absl::StrCat(data_dir, "/", kMigratedRecordFilesDirName);
  BNN_RETURN_IF_ERROR(CreateDirectoryDurably(aside));
  for (const std::string& dir : dirs) {
    const std::string from = absl::StrCat(data_dir, "/", dir);
    const std::string to = absl::StrCat(aside, "/", dir);
    std::error_code error;
    if (fs::exists(to, error)) {
      return absl::FailedPreconditionError(absl::StrCat(
          "cannot move ", from, " aside: ", to,
          " exists already; move one of them out of the data directory"));
    }
    fs::rename(from, to, error);
    if (error) {
      return absl::InternalError(absl::StrCat("cannot move ", from, " to ", to,
                                              ": ", error.message()));
    }
  }
  BNN_RETURN_IF_ERROR(SyncDirectory(aside));
  return SyncDirectory(data_dir);
}

// Writes every readable record of the record-file stores under `data_dir`
// into `tx`, their files into `blobs`.
absl::Status CopyRecords(const std::string& data_dir, BlobStore* blobs,
                         MetadataTransaction& tx, MigrationReport* report) {
  // Datasets: every version file, read with the dataset file reader to
  // learn which version it holds, then each dataset's versions in order as
  // DatasetStore serves them, up to the first unreadable one.
  const std::string dataset_dir = data_dir + "/datasets";
  BNN_ASSIGN_OR_RETURN(std::unique_ptr<DatasetStore> datasets,
                       DatasetStore::Open(dataset_dir));
  BNN_ASSIGN_OR_RETURN(const std::vector<std::string> dataset_stems,
                       ScanRecordStems(dataset_dir, ".dataset"));
  std::map<std::string, std::map<int64_t, std::string>> version_files;
  for (const std::string& stem : dataset_stems) {
    const std::string path = absl::StrCat(dataset_dir, "/", stem, ".dataset");
    absl::StatusOr<DatasetFileContents> file = ReadDatasetFile(path);
    if (!file.ok()) {
      report->skipped.push_back(file.status().ToString());
      continue;
    }
    version_files[file->meta.dataset_id()][file->meta.version()] = path;
  }
  std::vector<DatasetVersionRecord> firsts;
  std::map<std::string, std::vector<DatasetVersionRecord>> later;
  for (const auto& [id, files] : version_files) {
    for (int64_t version = 1;; ++version) {
      const auto file = files.find(version);
      if (file == files.end()) break;
      absl::StatusOr<store::DatasetMeta> meta = datasets->Get(id, version);
      if (!meta.ok()) {
        for (auto rest = file; rest != files.end(); ++rest) {
          report->skipped.push_back(
              absl::StrCat(rest->second, ": ", meta.status().ToString()));
        }
        break;
      }
      DatasetVersionRecord record;
      record.meta = *std::move(meta);
      BNN_ASSIGN_OR_RETURN(record.rows_blob, blobs->Adopt(file->second));
      if (version == 1) {
        firsts.push_back(std::move(record));
      } else {
        later[id].push_back(std::move(record));
      }
    }
  }
  // Names several datasets share are dropped: the store's names are unique.
  std::map<std::string, std::vector<std::string>> by_name;
  for (const DatasetVersionRecord& first : firsts) {
    if (!first.meta.name().empty()) {
      by_name[first.meta.name()].push_back(first.meta.dataset_id());
    }
  }
  std::set<std::string> shared;
  for (const auto& [name, ids] : by_name) {
    if (ids.size() < 2) continue;
    shared.insert(name);
    report->dropped_names.push_back(
        absl::StrCat(name, ": ", absl::StrJoin(ids, ", ")));
  }
  for (DatasetVersionRecord& first : firsts) {
    const bool drop = shared.count(first.meta.name()) > 0;
    if (drop) first.meta.clear_name();
    BNN_RETURN_IF_ERROR(tx.CreateDataset(first));
    ++report->datasets;
    ++report->dataset_versions;
    for (DatasetVersionRecord& next : later[first.meta.dataset_id()]) {
      if (drop) next.meta.clear_name();
      BNN_RETURN_IF_ERROR(tx.AddDatasetVersion(next));
      ++report->dataset_versions;
    }
  }

  // Snapshots: their metadata as SnapshotStore indexes it, their files as
  // blobs.
  const std::string snapshot_dir = data_dir + "/snapshots";
  BNN_ASSIGN_OR_RETURN(std::unique_ptr<SnapshotStore> snapshots,
                       SnapshotStore::Open(snapshot_dir));
  BNN_ASSIGN_OR_RETURN(const std::vector<std::string> snapshot_ids,
                       ScanRecordDir(snapshot_dir, kSnapshotIdPrefix, ".snap"));
  for (const std::string& id : snapshot_ids) {
    absl::StatusOr<store::SnapshotMeta> meta = snapshots->GetMeta(id);
    if (!meta.ok()) {
      report->skipped.push_back(meta.status().ToString());
      continue;
    }
    SnapshotRecord record;
    record.meta = *std::move(meta);
    BNN_ASSIGN_OR_RETURN(
        record.payload_blob,
        blobs->Adopt(absl::StrCat(snapshot_dir, "/", id, ".snap")));
    BNN_RETURN_IF_ERROR(tx.CreateSnapshot(record));
    ++report->snapshots;
  }

  // Jobs, as JobStore serves them after a restart.
  const std::string job_dir = data_dir + "/jobs";
  BNN_ASSIGN_OR_RETURN(std::unique_ptr<JobStore> jobs, JobStore::Open(job_dir));
  BNN_ASSIGN_OR_RETURN(const std::vector<std::string> job_ids,
                       ScanRecordDir(job_dir, kJobIdPrefix, ".job"));
  for (const std::string& id : job_ids) {
    // An unreadable record is served as its error (DataLoss naming it).
    absl::StatusOr<store::JobRecord> job = jobs->Get(id);
    if (!job.ok()) {
      report->skipped.push_back(job.status().ToString());
      continue;
    }
    BNN_RETURN_IF_ERROR(tx.CreateJob(*job));
    ++report->jobs;
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<MigrationReport> MigrateRecordFiles(
    const std::string& data_dir, const MigrationOptions& options) {
  MigrationReport report;
  const std::string db_path = absl::StrCat(data_dir, "/", kMetadataDbName);
  const std::vector<std::string> record_dirs = RecordDirsIn(data_dir);
  std::error_code error;
  if (fs::exists(db_path, error)) {
    if (record_dirs.empty()) return report;
    // Finish a migration a crash interrupted after its commit, or refuse a
    // directory that mixes the layouts.
    BNN_ASSIGN_OR_RETURN(std::unique_ptr<SqliteMetadataStore> db,
                         SqliteMetadataStore::Open(db_path));
    BNN_ASSIGN_OR_RETURN(const std::optional<std::string> migrated,
                         db->Read([](MetadataReader& r) {
                           return r.GetProperty(kMigratedFromProperty);
                         }));
    if (!migrated.has_value()) {
      return absl::FailedPreconditionError(absl::StrCat(
          data_dir, " holds ", kMetadataDbName,
          " and record-file directories (", absl::StrJoin(record_dirs, ", "),
          ") that it was not migrated from; move them out of the data "
          "directory"));
    }
    BNN_RETURN_IF_ERROR(MoveAside(data_dir, record_dirs));
    report.moved_aside = true;
    return report;
  }
  if (record_dirs.empty()) return report;

  // A stale database of an attempt a crash interrupted is started afresh.
  const std::string temp_path = absl::StrCat(db_path, kMigratingSuffix);
  for (const std::string& stale : {temp_path, temp_path + "-journal"}) {
    BNN_RETURN_IF_ERROR(RemoveFile(stale));
  }
  {
    // Blobs are verified when the store opens after the migration.
    BlobStore::Options blob_options;
    blob_options.verify_on_open = false;
    BNN_ASSIGN_OR_RETURN(
        std::unique_ptr<BlobStore> blobs,
        BlobStore::Open(absl::StrCat(data_dir, "/", kBlobDirName), blob_options,
                        nullptr));
    SqliteMetadataStore::Options db_options;
    db_options.wal = false;  // one file, to rename into place
    BNN_ASSIGN_OR_RETURN(std::unique_ptr<SqliteMetadataStore> db,
                         SqliteMetadataStore::Open(temp_path, db_options));
    BNN_RETURN_IF_ERROR(db->Write([&](MetadataTransaction& tx) -> absl::Status {
      BNN_RETURN_IF_ERROR(CopyRecords(data_dir, blobs.get(), tx, &report));
      return tx.SetProperty(
          kMigratedFromProperty,
          absl::StrCat(absl::FormatTime(absl::RFC3339_sec, absl::Now(),
                                        absl::UTCTimeZone()),
                       ": ", report.datasets, " datasets (",
                       report.dataset_versions, " versions), ",
                       report.snapshots, " snapshots, ", report.jobs, " jobs, ",
                       report.skipped.size(), " unreadable records skipped"));
    }));
  }
  BNN_RETURN_IF_ERROR(FsyncFile(temp_path));
  BNN_RETURN_IF_ERROR(Step(options, "records_written"));
  fs::rename(temp_path, db_path, error);
  if (error) {
    return absl::InternalError(absl::StrCat("cannot rename ", temp_path,
                                            " into place: ", error.message()));
  }
  BNN_RETURN_IF_ERROR(SyncDirectory(data_dir));
  report.migrated = true;
  BNN_RETURN_IF_ERROR(Step(options, "renamed"));
  BNN_RETURN_IF_ERROR(MoveAside(data_dir, record_dirs));
  report.moved_aside = true;
  return report;
}

absl::StatusOr<MetadataDir> MetadataDir::Open(const std::string& data_dir,
                                              const Options& options) {
  MetadataDir dir;
  BNN_RETURN_IF_ERROR(CreateDirectoryDurably(data_dir));
  BNN_ASSIGN_OR_RETURN(dir.migration,
                       MigrateRecordFiles(data_dir, options.migration));
  BNN_ASSIGN_OR_RETURN(
      dir.metadata,
      SqliteMetadataStore::Open(absl::StrCat(data_dir, "/", kMetadataDbName),
                                options.metadata));
  BNN_ASSIGN_OR_RETURN(
      dir.blobs, BlobStore::Open(absl::StrCat(data_dir, "/", kBlobDirName),
                                 options.blobs, &dir.blob_report));
  if (options.sweep_unreferenced_blobs) {
    BNN_ASSIGN_OR_RETURN(const absl::flat_hash_set<std::string> referenced,
                         dir.metadata->Read([](MetadataReader& r) {
                           return r.ReferencedBlobs();
                         }));
    BNN_ASSIGN_OR_RETURN(dir.blobs_swept, dir.blobs->Sweep(referenced));
  }
  return dir;
}

}  // namespace bnn::server
