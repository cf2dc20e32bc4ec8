// Migration of a data directory of the record-file layout (datasets/,
// jobs/ with checkpoints, snapshots/, models/, as older servers wrote them)
// into the metadata store and blob store: the same records, once, and
// crash-safe (a crash before the commit leaves the old data intact and the
// next open migrates; a crash after it is finished by the next open).
#include "server/store/metadata_dir.h"

#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <string>
#include <unistd.h>
#include <vector>

#include <absl/strings/str_cat.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "bnn/io/file.h"
#include "bnn/io/record.h"
#include "bnn/io/snapshot.h"
#include "bnn/status.h"

#include "server/store/dataset_file.h"
#include "server/store/snapshot_meta.h"
#include "tests/server/server_test_util.h"

namespace bnn::server {
namespace {

namespace fs = std::filesystem;
using ::bnn::server::testutil::CubicDataset;
using ::bnn::server::testutil::EqualsProto;
using ::bnn::server::testutil::ReadFileOrEmpty;
using ::bnn::server::testutil::StatusIs;
using ::bnn::server::testutil::TempDir;
using ::bnn::server::testutil::TinySnapshot;
using ::testing::HasSubstr;
using ::testing::IsEmpty;
using ::testing::SizeIs;

// Every record of a data directory, as its files hold them.
struct Records {
  // By (dataset id, version).
  std::map<std::pair<std::string, int64_t>, store::DatasetMeta> versions;
  std::map<std::string, store::SnapshotMeta> snapshots;
  std::map<std::string, store::JobRecord> jobs;
};

// Writes version `version` of dataset `id` (the rows `rows` after
// `first_row` earlier ones) as the record-file layout named it.
void WriteDatasetVersion(const std::string& dir, const std::string& id,
                         int64_t version, const std::string& name,
                         const Dataset& rows, int64_t first_row) {
  store::DatasetMeta meta;
  meta.set_dataset_id(id);
  meta.set_version(version);
  meta.set_name(name);
  meta.set_task("regression");
  meta.set_num_rows(first_row + rows.num_rows());
  meta.set_num_features(static_cast<int32_t>(rows.num_features));
  meta.set_first_row(first_row);
  meta.set_hash(absl::StrCat("hash of ", id, " v", version));
  meta.set_created_unix_ms(1000 * version);
  const std::string path =
      version == 1 ? absl::StrCat(dir, "/", id, ".dataset")
                   : absl::StrCat(dir, "/", id, ".v", version, ".dataset");
  absl::StatusOr<std::unique_ptr<DatasetFileWriter>> writer =
      DatasetFileWriter::Create(absl::StrCat(path, kTempSuffix),
                                rows.num_features);
  ASSERT_TRUE(writer.ok()) << writer.status();
  ASSERT_TRUE((*writer)->AddRows(rows.features, rows.targets).ok());
  ASSERT_TRUE((*writer)->Commit(meta, path).ok());
}

class MetadataDirTest : public ::testing::Test {
 protected:
  std::string data_dir() const { return dir_.path() + "/data"; }

  // A data directory of the record-file layout: three datasets (one with
  // two versions, two sharing a name), three snapshots (one without its
  // .info record), three jobs (one left RUNNING by a "crash", with its
  // checkpoint), two models (one whose only version names a snapshot that
  // is gone).
  void MakeRecordFileDir() {
    const std::string datasets = data_dir() + "/datasets";
    for (const char* dir : {"datasets", "jobs", "snapshots", "models"}) {
      fs::create_directories(data_dir() + "/" + dir);
    }
    const std::string cubic = "ds-00000000000000c1";
    WriteDatasetVersion(datasets, cubic, 1, "cubic", CubicDataset(20), 0);
    WriteDatasetVersion(datasets, cubic, 2, "cubic", CubicDataset(5, 2), 20);
    // Older servers allowed two datasets of one name.
    WriteDatasetVersion(datasets, "ds-00000000000000c2", 1, "other",
                        CubicDataset(8, 3), 0);
    WriteDatasetVersion(datasets, "ds-00000000000000c3", 1, "other",
                        CubicDataset(9, 4), 0);

    const std::string snapshots = data_dir() + "/snapshots";
    for (int i = 0; i < 3; ++i) {
      const std::string id = absl::StrCat("snap-00000000000000a", i);
      snapshot_ids_.push_back(id);
      const Snapshot snapshot = TinySnapshot(i + 1);
      const std::string bytes = *EncodeSnapshot(snapshot);
      ASSERT_TRUE(
          WriteFileAtomically(snapshots + "/" + id + ".snap", bytes).ok());
      snapshot_metas_[id] =
          SnapshotMetaOf(snapshot, id, static_cast<int64_t>(bytes.size()));
      if (i == 2) continue;  // as a crash before its record left it
      ASSERT_TRUE(WriteRecordFile(snapshots + "/" + id + ".info",
                                  kRecordFileSnapshotInfoFormat,
                                  snapshot_metas_[id])
                      .ok());
    }

    for (int i = 0; i < 3; ++i) {
      store::JobRecord job;
      job.set_job_id(absl::StrCat("job-00000000000000b", i));
      job.set_dataset_id(cubic);
      job.set_method("slang");
      job.add_hidden_sizes(4);
      job.set_created_unix_ms(100 + i);
      job.set_state(i == 0   ? store::JobRecord::SUCCEEDED
                    : i == 1 ? store::JobRecord::RUNNING
                             : store::JobRecord::QUEUED);
      if (i == 0) job.set_snapshot_id(snapshot_ids_[0]);
      job_ids_.push_back(job.job_id());
      ASSERT_TRUE(WriteRecordFile(
                      absl::StrCat(data_dir(), "/jobs/", job.job_id(), ".job"),
                      kRecordFileJobFormat, job)
                      .ok());
    }
    // The running job's checkpoint, and a stale one of the finished job.
    for (int i : {0, 1}) {
      std::ofstream(absl::StrCat(data_dir(), "/jobs/", job_ids_[i], ".ckpt"))
          << "checkpoint " << i;
    }

    store::ModelRecord model;
    model.set_name("m");
    model.set_next_version(4);
    model.set_created_unix_ms(10);
    model.set_updated_unix_ms(20);
    for (const auto& [version, snapshot] :
         {std::pair{1, snapshot_ids_[0]}, {3, snapshot_ids_[1]}}) {
      store::ModelRecord::Version* v = model.add_versions();
      v->set_version(version);
      v->set_snapshot_id(snapshot);
      v->set_created_unix_ms(10 + version);
    }
    (*model.mutable_aliases())["stable"] = 1;
    ASSERT_TRUE(WriteRecordFile(data_dir() + "/models/m.model",
                                kRecordFileModelFormat, model)
                    .ok());
    store::ModelRecord ghost;
    ghost.set_name("ghost");
    ghost.set_next_version(2);
    store::ModelRecord::Version* v = ghost.add_versions();
    v->set_version(1);
    v->set_snapshot_id("snap-00000000000000ff");
    ASSERT_TRUE(WriteRecordFile(data_dir() + "/models/ghost.model",
                                kRecordFileModelFormat, ghost)
                    .ok());
  }

  // The records as the files hold them now.
  Records ReadRecordFiles() {
    Records records;
    for (const auto& entry : fs::directory_iterator(data_dir() + "/datasets")) {
      absl::StatusOr<DatasetFileContents> file =
          ReadDatasetFile(entry.path().string());
      if (!file.ok()) continue;
      records.versions[{file->meta.dataset_id(), file->meta.version()}] =
          file->meta;
    }
    records.snapshots = snapshot_metas_;
    for (const std::string& id : job_ids_) {
      store::JobRecord job;
      if (ReadRecordFile(absl::StrCat(data_dir(), "/jobs/", id, ".job"),
                         kRecordFileJobFormat, &job)
              .ok()) {
        records.jobs[id] = job;
      }
    }
    return records;
  }

  // Checks that the migrated store holds exactly `expected`, with every
  // blob holding its record's file.
  void ExpectMigrated(const Records& expected) {
    absl::StatusOr<MetadataDir> dir =
        MetadataDir::Open(data_dir(), MetadataDir::Options());
    ASSERT_TRUE(dir.ok()) << dir.status();
    EXPECT_THAT(dir->blob_report.quarantined, IsEmpty());
    EXPECT_EQ(dir->blobs_swept, 0);
    const std::string aside =
        absl::StrCat(data_dir(), "/", kMigratedRecordFilesDirName);
    ASSERT_TRUE(
        dir->metadata
            ->Read([&](MetadataReader& r) -> absl::Status {
              int64_t versions = 0;
              PageRequest page;
              page.page_size = kMaxPageSize;
              BNN_ASSIGN_OR_RETURN(Page<DatasetVersionRecord> latest,
                                   r.ListDatasets(page));
              for (const DatasetVersionRecord& d : latest.items) {
                BNN_ASSIGN_OR_RETURN(
                    std::vector<DatasetVersionRecord> all,
                    r.ListDatasetVersions(d.meta.dataset_id()));
                for (const DatasetVersionRecord& v : all) {
                  ++versions;
                  store::DatasetMeta want = expected.versions.at(
                      {v.meta.dataset_id(), v.meta.version()});
                  if (want.name() == "other") want.clear_name();
                  EXPECT_THAT(v.meta, EqualsProto(want));
                  // The blob is this version's dataset file.
                  BNN_ASSIGN_OR_RETURN(std::string path,
                                       dir->blobs->PathOf(v.rows_blob));
                  BNN_ASSIGN_OR_RETURN(DatasetFileContents file,
                                       ReadDatasetFile(path));
                  EXPECT_EQ(file.meta.version(), v.meta.version());
                  EXPECT_EQ(file.meta.dataset_id(), v.meta.dataset_id());
                }
              }
              EXPECT_EQ(versions,
                        static_cast<int64_t>(expected.versions.size()));
              BNN_ASSIGN_OR_RETURN(Page<SnapshotRecord> snapshots,
                                   r.ListSnapshots({}, page));
              EXPECT_THAT(snapshots.items, SizeIs(expected.snapshots.size()));
              for (const SnapshotRecord& s : snapshots.items) {
                EXPECT_THAT(
                    s.meta,
                    EqualsProto(expected.snapshots.at(s.meta.snapshot_id())));
                BNN_ASSIGN_OR_RETURN(std::string path,
                                     dir->blobs->PathOf(s.payload_blob));
                EXPECT_EQ(
                    ReadFileOrEmpty(path),
                    ReadFileOrEmpty(absl::StrCat(
                        aside, "/snapshots/", s.meta.snapshot_id(), ".snap")));
              }
              BNN_ASSIGN_OR_RETURN(Page<store::JobRecord> jobs,
                                   r.ListJobs({}, page));
              EXPECT_THAT(jobs.items, SizeIs(expected.jobs.size()));
              for (const store::JobRecord& job : jobs.items) {
                EXPECT_THAT(job, EqualsProto(expected.jobs.at(job.job_id())));
              }
              BNN_ASSIGN_OR_RETURN(std::optional<std::string> from,
                                   r.GetProperty(kMigratedFromProperty));
              EXPECT_TRUE(from.has_value());
              return absl::OkStatus();
            })
            .ok());
    // The model, its versions (numbers kept) and aliases, `latest` on the
    // newest; the one whose snapshot is gone kept without versions.
    ASSERT_TRUE(
        dir->metadata
            ->Read([&](MetadataReader& r) -> absl::Status {
              BNN_ASSIGN_OR_RETURN(store::ModelInfo m, r.GetModel("m"));
              EXPECT_EQ(m.next_version(), 4);
              EXPECT_EQ(m.created_unix_ms(), 10);
              BNN_ASSIGN_OR_RETURN(store::ModelVersion v3,
                                   r.GetModelVersion("m", 3));
              EXPECT_EQ(v3.snapshot_id(), snapshot_ids_[1]);
              EXPECT_TRUE(absl::IsNotFound(r.GetModelVersion("m", 2).status()));
              BNN_ASSIGN_OR_RETURN(std::vector<store::ModelAlias> aliases,
                                   r.ListAliases("m"));
              EXPECT_THAT(aliases, SizeIs(2));
              EXPECT_EQ(r.GetAlias("m", "latest")->version(), 3);
              EXPECT_EQ(r.GetAlias("m", "stable")->version(), 1);
              BNN_ASSIGN_OR_RETURN(Page<store::ModelVersion> ghost,
                                   r.ListModelVersions("ghost", PageRequest()));
              EXPECT_THAT(ghost.items, IsEmpty());
              return absl::OkStatus();
            })
            .ok());
    // Checkpoints of jobs that may resume only.
    EXPECT_EQ(
        ReadFileOrEmpty(data_dir() + "/checkpoints/" + job_ids_[1] + ".ckpt"),
        "checkpoint 1");
    EXPECT_FALSE(
        fs::exists(data_dir() + "/checkpoints/" + job_ids_[0] + ".ckpt"));
    for (const char* old : {"datasets", "jobs", "snapshots", "models"}) {
      EXPECT_FALSE(fs::exists(data_dir() + "/" + old)) << old;
      EXPECT_TRUE(fs::exists(aside + "/" + old)) << old;
    }
  }

  TempDir dir_;
  std::vector<std::string> job_ids_;
  std::vector<std::string> snapshot_ids_;
  std::map<std::string, store::SnapshotMeta> snapshot_metas_;
};

TEST_F(MetadataDirTest, MigratesEveryRecordOnce) {
  MakeRecordFileDir();
  const Records expected = ReadRecordFiles();
  ASSERT_THAT(expected.versions, SizeIs(4));
  ASSERT_THAT(expected.snapshots, SizeIs(3));
  ASSERT_THAT(expected.jobs, SizeIs(3));

  absl::StatusOr<MigrationReport> report = MigrateRecordFiles(data_dir());
  ASSERT_TRUE(report.ok()) << report.status();
  EXPECT_TRUE(report->migrated);
  EXPECT_TRUE(report->moved_aside);
  EXPECT_EQ(report->datasets, 3);
  EXPECT_EQ(report->dataset_versions, 4);
  EXPECT_EQ(report->snapshots, 3);
  EXPECT_EQ(report->jobs, 3);
  EXPECT_EQ(report->checkpoints, 1);
  EXPECT_EQ(report->models, 2);
  // The version of the model whose snapshot is gone.
  ASSERT_THAT(report->skipped, SizeIs(1));
  EXPECT_THAT(report->skipped[0], HasSubstr("snap-00000000000000ff"));
  ASSERT_THAT(report->dropped_names, SizeIs(1));
  EXPECT_THAT(report->dropped_names[0], HasSubstr("other: ds-"));
  ExpectMigrated(expected);

  // Once: a second open migrates nothing.
  absl::StatusOr<MigrationReport> again = MigrateRecordFiles(data_dir());
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_FALSE(again->migrated);
  EXPECT_FALSE(again->moved_aside);
  ExpectMigrated(expected);
}

TEST_F(MetadataDirTest, FreshDirectoryNeedsNoMigration) {
  absl::StatusOr<MetadataDir> dir =
      MetadataDir::Open(data_dir(), MetadataDir::Options());
  ASSERT_TRUE(dir.ok()) << dir.status();
  EXPECT_FALSE(dir->migration.migrated);
  EXPECT_TRUE(fs::exists(data_dir() + "/metadata.db"));
  EXPECT_FALSE(fs::exists(data_dir() + "/record-files.migrated"));
}

TEST_F(MetadataDirTest, UnreadableRecordsAreSkippedAndReported) {
  MakeRecordFileDir();
  // A job record torn by a bad disk.
  const std::string torn = data_dir() + "/jobs/" + job_ids_[2] + ".job";
  ASSERT_TRUE(WriteFileAtomically(torn, "BNNJOB01 torn").ok());
  const Records expected = ReadRecordFiles();
  ASSERT_THAT(expected.jobs, SizeIs(2));
  absl::StatusOr<MigrationReport> report = MigrateRecordFiles(data_dir());
  ASSERT_TRUE(report.ok()) << report.status();
  EXPECT_EQ(report->jobs, 2);
  ASSERT_THAT(report->skipped, SizeIs(2));
  EXPECT_THAT(report->skipped[0], HasSubstr(job_ids_[2]));
  ExpectMigrated(expected);
  // The unreadable file is kept for the operator.
  EXPECT_TRUE(fs::exists(data_dir() + "/record-files.migrated/jobs/" +
                         job_ids_[2] + ".job"));
}

TEST_F(MetadataDirTest, FailureBeforeTheCommitLeavesOldDataAndRetries) {
  MakeRecordFileDir();
  const Records expected = ReadRecordFiles();
  MigrationOptions failing;
  failing.on_step = [](absl::string_view step) {
    return step == "records_written" ? absl::InternalError("disk unplugged")
                                     : absl::OkStatus();
  };
  EXPECT_THAT(MigrateRecordFiles(data_dir(), failing).status(),
              StatusIs(absl::StatusCode::kInternal, "disk unplugged"));
  EXPECT_FALSE(fs::exists(data_dir() + "/metadata.db"));
  EXPECT_TRUE(fs::exists(data_dir() + "/metadata.db.migrating"));
  // The old data is intact and served as before.
  const Records after = ReadRecordFiles();
  EXPECT_EQ(after.versions.size(), expected.versions.size());
  EXPECT_EQ(after.jobs.size(), expected.jobs.size());
  EXPECT_EQ(after.snapshots.size(), expected.snapshots.size());

  absl::StatusOr<MigrationReport> report = MigrateRecordFiles(data_dir());
  ASSERT_TRUE(report.ok()) << report.status();
  EXPECT_TRUE(report->migrated);
  EXPECT_FALSE(fs::exists(data_dir() + "/metadata.db.migrating"));
  ExpectMigrated(expected);
}

// A real crash (the process ends at once) at each step: the next open ends
// with every record migrated once.
class MetadataDirCrashTest : public MetadataDirTest,
                             public ::testing::WithParamInterface<const char*> {
};

TEST_P(MetadataDirCrashTest, NextOpenCompletesTheMigration) {
  GTEST_FLAG_SET(death_test_style, "fast");  // the child sees this data dir
  MakeRecordFileDir();
  const Records expected = ReadRecordFiles();
  const std::string crash_at = GetParam();
  MigrationOptions crashing;
  crashing.on_step = [&](absl::string_view step) {
    if (step == crash_at) _exit(42);
    return absl::OkStatus();
  };
  EXPECT_EXIT(MigrateRecordFiles(data_dir(), crashing).IgnoreError(),
              ::testing::ExitedWithCode(42), "");
  const bool committed = crash_at == "renamed";
  EXPECT_EQ(fs::exists(data_dir() + "/metadata.db"), committed);
  EXPECT_TRUE(fs::exists(data_dir() + "/datasets"));

  absl::StatusOr<MigrationReport> report = MigrateRecordFiles(data_dir());
  ASSERT_TRUE(report.ok()) << report.status();
  EXPECT_EQ(report->migrated, !committed);
  EXPECT_TRUE(report->moved_aside);
  ExpectMigrated(expected);
}

INSTANTIATE_TEST_SUITE_P(Steps, MetadataDirCrashTest,
                         ::testing::Values("records_written", "renamed"));

TEST_F(MetadataDirTest, MixedLayoutsAreRefused) {
  ASSERT_TRUE(MetadataDir::Open(data_dir(), MetadataDir::Options()).ok());
  MakeRecordFileDir();
  EXPECT_THAT(MetadataDir::Open(data_dir(), MetadataDir::Options()).status(),
              StatusIs(absl::StatusCode::kFailedPrecondition,
                       "record-file directories (datasets, jobs, models, "
                       "snapshots)"));
}

// --blob-dir: the blobs live there, and a record-file directory (whose
// migration writes <data-dir>/blobs) is refused rather than migrated.
TEST_F(MetadataDirTest, BlobDirOfItsOwn) {
  MetadataDir::Options options;
  options.blob_dir = dir_.path() + "/elsewhere";
  {
    absl::StatusOr<MetadataDir> dir = MetadataDir::Open(data_dir(), options);
    ASSERT_TRUE(dir.ok()) << dir.status();
    absl::StatusOr<std::string> blob = dir->blobs->Put("rows");
    ASSERT_TRUE(blob.ok()) << blob.status();
    EXPECT_TRUE(fs::exists(absl::StrCat(options.blob_dir, "/objects/",
                                        blob->substr(0, 2), "/", *blob)));
    EXPECT_FALSE(fs::exists(data_dir() + "/blobs"));
  }
  MakeRecordFileDir();
  EXPECT_THAT(MetadataDir::Open(data_dir(), options).status(),
              StatusIs(absl::StatusCode::kFailedPrecondition,
                       "holds record-file directories of an older server"));
  EXPECT_FALSE(fs::exists(data_dir() + "/record-files.migrated"));
}

TEST_F(MetadataDirTest, UnreferencedBlobsAreSweptAndQuarantineReported) {
  MakeRecordFileDir();
  ASSERT_TRUE(MigrateRecordFiles(data_dir()).ok());
  std::string snapshot_blob;
  {
    absl::StatusOr<MetadataDir> dir =
        MetadataDir::Open(data_dir(), MetadataDir::Options());
    ASSERT_TRUE(dir.ok()) << dir.status();
    // A blob whose record was never committed (a crash in between).
    ASSERT_TRUE(dir->blobs->Put("orphan").ok());
    absl::StatusOr<Page<SnapshotRecord>> snapshots = dir->metadata->Read(
        [](MetadataReader& r) { return r.ListSnapshots({}, PageRequest()); });
    ASSERT_TRUE(snapshots.ok());
    snapshot_blob = snapshots->items[0].payload_blob;
    // Flip a bit of the blob (its hard link in record-files.migrated/
    // shares the bytes: a bad disk would hit both).
    const std::string path = *dir->blobs->PathOf(snapshot_blob);
    std::fstream file(path, std::ios::in | std::ios::out | std::ios::binary);
    file.seekg(40);
    char byte = 0;
    file.get(byte);
    file.seekp(40);
    file.put(static_cast<char>(byte ^ 1));
  }
  absl::StatusOr<MetadataDir> dir =
      MetadataDir::Open(data_dir(), MetadataDir::Options());
  ASSERT_TRUE(dir.ok()) << dir.status();
  EXPECT_EQ(dir->blobs_swept, 1);
  ASSERT_THAT(dir->blob_report.quarantined, SizeIs(1));
  EXPECT_EQ(dir->blob_report.quarantined[0].blob, snapshot_blob);
  EXPECT_THAT(dir->blobs->Map(snapshot_blob, BlobStore::Check::kTrust).status(),
              StatusIs(absl::StatusCode::kDataLoss, snapshot_blob));
}

}  // namespace
}  // namespace bnn::server
