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

#include <absl/strings/numbers.h>
#include <absl/strings/str_cat.h>
#include <absl/strings/str_join.h>
#include <absl/time/clock.h>
#include <absl/time/time.h>

#include "bnn/io/file.h"
#include "bnn/io/snapshot.h"
#include "bnn/status.h"

#include "server/store/dataset_file.h"
#include "server/store/ids.h"
#include "server/store/record_dir.h"
#include "server/store/snapshot_meta.h"

namespace bnn::server {
namespace {

namespace fs = std::filesystem;

// The record-file layout's directories, as older servers created them.
constexpr const char* kRecordDirs[] = {"datasets", "jobs", "models",
                                       "snapshots"};
constexpr absl::string_view kDatasetExtension = ".dataset";
// Between the id and the version number in the file names of versions >= 2.
constexpr absl::string_view kVersionMark = ".v";
constexpr absl::string_view kSnapshotExtension = ".snap";
constexpr absl::string_view kSnapshotInfoExtension = ".info";
constexpr absl::string_view kJobExtension = ".job";
constexpr absl::string_view kCheckpointExtension = ".ckpt";
constexpr absl::string_view kModelExtension = ".model";
// The alias of a model's newest version (model_store.h), derived in the
// record-file layout and stored in the metadata store.
constexpr absl::string_view kLatest = "latest";
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

// ScanRecordDir or ScanRecordStems (with an empty `id_prefix`) of `dir`,
// which older servers may not have made: none if it does not exist.
absl::StatusOr<std::vector<std::string>> StemsIn(const std::string& dir,
                                                 absl::string_view id_prefix,
                                                 absl::string_view extension) {
  std::error_code error;
  if (!fs::is_directory(dir, error)) return std::vector<std::string>();
  if (id_prefix.empty()) return ScanRecordStems(dir, extension);
  return ScanRecordDir(dir, id_prefix, extension);
}

// Whether `stem` names a dataset version file: "<id>" for version 1,
// "<id>.v<N>" for version N >= 2 (only the canonical spelling).
bool IsDatasetStem(absl::string_view stem) {
  if (IsId(kDatasetIdPrefix, stem)) return true;
  const size_t mark = stem.rfind(kVersionMark);
  if (mark == absl::string_view::npos) return false;
  const absl::string_view number = stem.substr(mark + kVersionMark.size());
  int64_t parsed = 0;
  return absl::SimpleAtoi(number, &parsed) && parsed >= 2 &&
         absl::StrCat(parsed) == number &&
         IsId(kDatasetIdPrefix, stem.substr(0, mark));
}

// The metadata of the snapshot file `snap`: its .info record if that
// describes this very file, else the decoded snapshot's.
absl::StatusOr<store::SnapshotMeta> ReadSnapshotMeta(const std::string& dir,
                                                     const std::string& id) {
  const std::string snap = absl::StrCat(dir, "/", id, kSnapshotExtension);
  std::error_code error;
  const uintmax_t size = fs::file_size(snap, error);
  store::SnapshotMeta meta;
  if (ReadRecordFile(absl::StrCat(dir, "/", id, kSnapshotInfoExtension),
                     kRecordFileSnapshotInfoFormat, &meta)
          .ok() &&
      meta.snapshot_id() == id && !error &&
      meta.size_bytes() == static_cast<int64_t>(size)) {
    return meta;
  }
  BNN_ASSIGN_OR_RETURN(const Snapshot snapshot, ReadSnapshotFile(snap));
  return SnapshotMetaOf(snapshot, id, error ? 0 : static_cast<int64_t>(size));
}

// Links `from` to `to` (a temporary name renamed into place, so `to` is
// whole or absent), or copies it where links are not allowed.
absl::Status LinkFile(const std::string& from, const std::string& to) {
  const std::string temp = absl::StrCat(to, kTempSuffix);
  std::error_code error;
  fs::remove(temp, error);
  fs::create_hard_link(from, temp, error);
  if (error) {
    BNN_ASSIGN_OR_RETURN(const std::string contents, ReadFile(from));
    return WriteFileAtomically(to, contents);
  }
  fs::rename(temp, to, error);
  if (error) {
    return absl::InternalError(absl::StrCat("cannot rename ", temp, " to ", to,
                                            ": ", error.message()));
  }
  return absl::OkStatus();
}

// Writes every readable record of the record-file directories under
// `data_dir` into `tx`, their files into `blobs`, the checkpoints of jobs
// that may resume into checkpoints/.
absl::Status CopyRecords(const std::string& data_dir, BlobStore* blobs,
                         MetadataTransaction& tx, MigrationReport* report) {
  // Datasets: every version file, read to learn which version it holds,
  // then each dataset's versions in order up to the first missing or
  // unreadable one (later versions build on its rows).
  const std::string dataset_dir = data_dir + "/datasets";
  BNN_ASSIGN_OR_RETURN(const std::vector<std::string> dataset_stems,
                       StemsIn(dataset_dir, "", kDatasetExtension));
  std::map<std::string, std::map<int64_t, std::string>> version_files;
  std::map<std::string, store::DatasetMeta> metas;  // by path
  for (const std::string& stem : dataset_stems) {
    if (!IsDatasetStem(stem)) continue;
    const std::string path =
        absl::StrCat(dataset_dir, "/", stem, kDatasetExtension);
    absl::StatusOr<DatasetFileContents> file = ReadDatasetFile(path);
    if (!file.ok()) {
      report->skipped.push_back(file.status().ToString());
      continue;
    }
    version_files[file->meta.dataset_id()][file->meta.version()] = path;
    metas[path] = std::move(file->meta);
  }
  std::vector<DatasetVersionRecord> firsts;
  std::map<std::string, std::vector<DatasetVersionRecord>> later;
  for (const auto& [id, files] : version_files) {
    int64_t rows_before = 0;
    int64_t version = 1;
    for (auto file = files.begin(); file != files.end(); ++file, ++version) {
      const store::DatasetMeta& meta = metas[file->second];
      if (file->first != version || meta.first_row() != rows_before) {
        for (auto rest = file; rest != files.end(); ++rest) {
          report->skipped.push_back(absl::StrCat(
              rest->second, ": dataset ", id, " version ", rest->first,
              " does not follow a readable version ", version - 1));
        }
        break;
      }
      rows_before = meta.num_rows();
      DatasetVersionRecord record;
      record.meta = meta;
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

  // Snapshots: their metadata from their .info records (or decoded), their
  // files as blobs.
  const std::string snapshot_dir = data_dir + "/snapshots";
  BNN_ASSIGN_OR_RETURN(
      const std::vector<std::string> snapshot_ids,
      StemsIn(snapshot_dir, kSnapshotIdPrefix, kSnapshotExtension));
  std::set<std::string> migrated_snapshots;
  for (const std::string& id : snapshot_ids) {
    absl::StatusOr<store::SnapshotMeta> meta =
        ReadSnapshotMeta(snapshot_dir, id);
    if (!meta.ok()) {
      report->skipped.push_back(meta.status().ToString());
      continue;
    }
    SnapshotRecord record;
    record.meta = *std::move(meta);
    BNN_ASSIGN_OR_RETURN(
        record.payload_blob,
        blobs->Adopt(absl::StrCat(snapshot_dir, "/", id, kSnapshotExtension)));
    BNN_RETURN_IF_ERROR(tx.CreateSnapshot(record));
    migrated_snapshots.insert(id);
    ++report->snapshots;
  }

  // Jobs, and the checkpoints of those that may resume.
  const std::string job_dir = data_dir + "/jobs";
  const std::string checkpoint_dir =
      absl::StrCat(data_dir, "/", kCheckpointDirName);
  BNN_RETURN_IF_ERROR(CreateDirectoryDurably(checkpoint_dir));
  BNN_ASSIGN_OR_RETURN(const std::vector<std::string> job_ids,
                       StemsIn(job_dir, kJobIdPrefix, kJobExtension));
  for (const std::string& id : job_ids) {
    const std::string path = absl::StrCat(job_dir, "/", id, kJobExtension);
    store::JobRecord job;
    absl::Status read =
        ReadRecordFile(path, kRecordFileJobFormat, &job).status();
    if (read.ok() && job.job_id() != id) {
      read = absl::DataLossError(
          absl::StrCat(path, ": holds job_id '", job.job_id(), "'"));
    }
    if (!read.ok()) {
      report->skipped.push_back(read.ToString());
      continue;
    }
    BNN_RETURN_IF_ERROR(tx.CreateJob(job));
    ++report->jobs;
    const std::string checkpoint =
        absl::StrCat(job_dir, "/", id, kCheckpointExtension);
    std::error_code error;
    if (job.state() != store::JobRecord::SUCCEEDED &&
        job.state() != store::JobRecord::FAILED &&
        job.state() != store::JobRecord::CANCELLED &&
        fs::exists(checkpoint, error)) {
      BNN_RETURN_IF_ERROR(LinkFile(
          checkpoint,
          absl::StrCat(checkpoint_dir, "/", id, kCheckpointExtension)));
      ++report->checkpoints;
    }
  }
  if (report->checkpoints > 0) {
    BNN_RETURN_IF_ERROR(SyncDirectory(checkpoint_dir));
  }

  // Models: each record becomes the model, its versions (of migrated
  // snapshots) and its aliases, `latest` on the newest version.
  const std::string model_dir = data_dir + "/models";
  BNN_ASSIGN_OR_RETURN(const std::vector<std::string> model_names,
                       StemsIn(model_dir, "", kModelExtension));
  for (const std::string& name : model_names) {
    const std::string path =
        absl::StrCat(model_dir, "/", name, kModelExtension);
    store::ModelRecord record;
    absl::Status read =
        ReadRecordFile(path, kRecordFileModelFormat, &record).status();
    if (read.ok() && record.name() != name) {
      read = absl::DataLossError(
          absl::StrCat(path, ": holds model '", record.name(), "'"));
    }
    if (!read.ok()) {
      report->skipped.push_back(read.ToString());
      continue;
    }
    store::ModelInfo info;
    info.set_name(record.name());
    info.set_next_version(record.next_version());
    info.set_created_unix_ms(record.created_unix_ms());
    info.set_updated_unix_ms(record.updated_unix_ms());
    std::vector<store::ModelVersion> versions;
    std::set<int64_t> kept;
    for (const store::ModelRecord::Version& v : record.versions()) {
      if (migrated_snapshots.count(v.snapshot_id()) == 0) {
        report->skipped.push_back(absl::StrCat(
            path, ": version ", v.version(), " of model '", name,
            "' names snapshot ", v.snapshot_id(), ", which was not migrated"));
        continue;
      }
      store::ModelVersion& version = versions.emplace_back();
      version.set_model_name(record.name());
      version.set_version(v.version());
      version.set_snapshot_id(v.snapshot_id());
      version.set_created_unix_ms(v.created_unix_ms());
      kept.insert(v.version());
      info.set_next_version(std::max(info.next_version(), v.version() + 1));
    }
    std::vector<store::ModelAlias> aliases;
    for (const auto& [alias, version] : record.aliases()) {
      if (kept.count(version) == 0 || alias == kLatest) continue;
      store::ModelAlias& a = aliases.emplace_back();
      a.set_model_name(record.name());
      a.set_alias(alias);
      a.set_version(version);
      a.set_updated_unix_ms(record.updated_unix_ms());
    }
    if (!kept.empty()) {
      store::ModelAlias& latest = aliases.emplace_back();
      latest.set_model_name(record.name());
      latest.set_alias(std::string(kLatest));
      latest.set_version(*kept.rbegin());
      latest.set_updated_unix_ms(record.updated_unix_ms());
    }
    absl::Status restored = tx.RestoreModel(info, versions, aliases);
    if (absl::IsInvalidArgument(restored) ||
        absl::IsFailedPrecondition(restored)) {
      report->skipped.push_back(absl::StrCat(path, ": ", restored.ToString()));
      continue;
    }
    BNN_RETURN_IF_ERROR(restored);
    ++report->models;
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
                       report.snapshots, " snapshots, ", report.jobs, " jobs (",
                       report.checkpoints, " checkpoints), ", report.models,
                       " models, ", report.skipped.size(),
                       " unreadable records skipped"));
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
  const std::string default_blob_dir =
      absl::StrCat(data_dir, "/", kBlobDirName);
  const std::string blob_dir =
      options.blob_dir.empty() ? default_blob_dir : options.blob_dir;
  const bool shared = !options.postgres_uri.empty();
  if (shared || blob_dir != default_blob_dir) {
    // The migration writes <data-dir>/metadata.db and <data-dir>/blobs.
    if (const std::vector<std::string> record_dirs = RecordDirsIn(data_dir);
        !record_dirs.empty()) {
      return absl::FailedPreconditionError(absl::StrCat(
          data_dir, " holds record-file directories of an older server (",
          absl::StrJoin(record_dirs, ", "),
          "); start once with the default metadata and blob directory to "
          "migrate them"));
    }
  }
  if (shared) {
    BNN_ASSIGN_OR_RETURN(
        dir.metadata,
        PostgresMetadataStore::Open(options.postgres_uri, options.postgres));
  } else {
    BNN_ASSIGN_OR_RETURN(dir.migration,
                         MigrateRecordFiles(data_dir, options.migration));
    BNN_ASSIGN_OR_RETURN(
        dir.metadata,
        SqliteMetadataStore::Open(absl::StrCat(data_dir, "/", kMetadataDbName),
                                  options.metadata));
  }
  BlobStore::Options blob_options = options.blobs;
  blob_options.shared = blob_options.shared || shared;
  BNN_ASSIGN_OR_RETURN(
      dir.blobs, BlobStore::Open(blob_dir, blob_options, &dir.blob_report));
  if (options.sweep_unreferenced_blobs && !blob_options.shared) {
    BNN_ASSIGN_OR_RETURN(const absl::flat_hash_set<std::string> referenced,
                         dir.metadata->Read([](MetadataReader& r) {
                           return r.ReferencedBlobs();
                         }));
    BNN_ASSIGN_OR_RETURN(dir.blobs_swept, dir.blobs->Sweep(referenced));
  }
  // Checkpoints go where every process that may claim the job reads
  // them: beside the shared blobs with PostgreSQL; in the data directory
  // with SQLite, whose store only the process holding that directory's
  // lock uses (a server, or bnn-train in its place).
  dir.checkpoint_dir =
      options.postgres_uri.empty()
          ? absl::StrCat(data_dir, "/", kCheckpointDirName)
          : absl::StrCat(options.blob_dir, "/", kCheckpointDirName);
  return dir;
}

}  // namespace bnn::server
