// Migration of a data directory written by the record-file stores
// (DatasetStore, JobStore, SnapshotStore) into the metadata store and blob
// store: the same records, once, and crash-safe (a crash before the commit
// leaves the old data intact and the next open migrates; a crash after it
// is finished by the next open).
#include "server/store/metadata_dir.h"

#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <string>
#include <unistd.h>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "bnn/io/file.h"
#include "bnn/status.h"

#include "server/store/dataset_file.h"
#include "server/store/dataset_store.h"
#include "server/store/job_store.h"
#include "server/store/snapshot_store.h"
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

// Every record of a data directory, as the stores serve them.
struct Records {
  // By (dataset id, version).
  std::map<std::pair<std::string, int64_t>, store::DatasetMeta> versions;
  std::map<std::string, store::SnapshotMeta> snapshots;
  std::map<std::string, store::JobRecord> jobs;
};

class MetadataDirTest : public ::testing::Test {
 protected:
  std::string data_dir() const { return dir_.path() + "/data"; }

  // A data directory of the record-file layout, made with main's stores:
  // three datasets (one with two versions, two sharing a name), two
  // snapshots, three jobs (one left RUNNING by a "crash").
  void MakeRecordFileDir() {
    auto datasets = DatasetStore::Open(data_dir() + "/datasets");
    ASSERT_TRUE(datasets.ok()) << datasets.status();
    absl::StatusOr<store::DatasetMeta> cubic =
        (*datasets)->Create(CubicDataset(20), "cubic");
    ASSERT_TRUE(cubic.ok()) << cubic.status();
    ASSERT_TRUE(
        (*datasets)
            ->Append(cubic->dataset_id(), CubicDataset(5, 2), std::nullopt)
            .ok());
    ASSERT_TRUE((*datasets)->Create(CubicDataset(8, 3), "other").ok());
    // Today's store refuses a second "other"; a data directory of an older
    // server may hold one: made in a side directory and copied in.
    {
      auto side = DatasetStore::Open(data_dir() + "/side");
      ASSERT_TRUE(side.ok()) << side.status();
      absl::StatusOr<store::DatasetMeta> twin =
          (*side)->Create(CubicDataset(9, 4), "other");
      ASSERT_TRUE(twin.ok()) << twin.status();
      for (const auto& entry :
           std::filesystem::directory_iterator(data_dir() + "/side")) {
        if (entry.path().filename().string().rfind(twin->dataset_id(), 0) ==
            0) {
          std::filesystem::copy_file(
              entry.path(),
              data_dir() + "/datasets/" + entry.path().filename().string());
        }
      }
    }
    std::filesystem::remove_all(data_dir() + "/side");

    auto snapshots = SnapshotStore::Open(data_dir() + "/snapshots");
    ASSERT_TRUE(snapshots.ok()) << snapshots.status();
    absl::StatusOr<store::SnapshotMeta> snap =
        (*snapshots)->Create(TinySnapshot(1));
    ASSERT_TRUE(snap.ok()) << snap.status();
    ASSERT_TRUE((*snapshots)->Create(TinySnapshot(2)).ok());

    auto jobs = JobStore::Open(data_dir() + "/jobs");
    ASSERT_TRUE(jobs.ok()) << jobs.status();
    store::JobRecord request;
    request.set_dataset_id(cubic->dataset_id());
    request.set_method("slang");
    request.add_hidden_sizes(4);
    for (int i = 0; i < 3; ++i) {
      absl::StatusOr<store::JobRecord> job = (*jobs)->Create(request);
      ASSERT_TRUE(job.ok()) << job.status();
      job_ids_.push_back(job->job_id());
    }
    ASSERT_TRUE((*jobs)
                    ->Update(job_ids_[0],
                             [&](store::JobRecord* job) {
                               job->set_state(store::JobRecord::SUCCEEDED);
                               job->set_snapshot_id(snap->snapshot_id());
                               return true;
                             })
                    .ok());
    ASSERT_TRUE((*jobs)
                    ->Update(job_ids_[1],
                             [](store::JobRecord* job) {
                               job->set_state(store::JobRecord::RUNNING);
                               return true;
                             })
                    .ok());
  }

  // The records as the record-file stores serve them now.
  Records ReadRecordFiles() {
    Records records;
    auto datasets = DatasetStore::Open(data_dir() + "/datasets");
    EXPECT_TRUE(datasets.ok());
    for (const store::DatasetMeta& latest : (*datasets)->List()) {
      for (int64_t v = 1; v <= latest.version(); ++v) {
        records.versions[{latest.dataset_id(), v}] =
            *(*datasets)->Get(latest.dataset_id(), v);
      }
    }
    auto snapshots = SnapshotStore::Open(data_dir() + "/snapshots");
    EXPECT_TRUE(snapshots.ok());
    for (const store::SnapshotMeta& meta : (*snapshots)->List()) {
      records.snapshots[meta.snapshot_id()] = meta;
    }
    auto jobs = JobStore::Open(data_dir() + "/jobs");
    EXPECT_TRUE(jobs.ok());
    for (const store::JobRecord& job : (*jobs)->List()) {
      records.jobs[job.job_id()] = job;
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
    EXPECT_FALSE(fs::exists(data_dir() + "/datasets"));
    EXPECT_FALSE(fs::exists(data_dir() + "/jobs"));
    EXPECT_FALSE(fs::exists(data_dir() + "/snapshots"));
    EXPECT_TRUE(fs::exists(aside + "/datasets"));
  }

  TempDir dir_;
  std::vector<std::string> job_ids_;
};

TEST_F(MetadataDirTest, MigratesEveryRecordOnce) {
  MakeRecordFileDir();
  const Records expected = ReadRecordFiles();
  ASSERT_THAT(expected.versions, SizeIs(4));
  ASSERT_THAT(expected.snapshots, SizeIs(2));
  ASSERT_THAT(expected.jobs, SizeIs(3));
  // The job a crash left RUNNING is INTERRUPTED (resumable), as JobStore
  // serves it.
  EXPECT_EQ(expected.jobs.at(job_ids_[1]).state(),
            store::JobRecord::INTERRUPTED);

  absl::StatusOr<MigrationReport> report = MigrateRecordFiles(data_dir());
  ASSERT_TRUE(report.ok()) << report.status();
  EXPECT_TRUE(report->migrated);
  EXPECT_TRUE(report->moved_aside);
  EXPECT_EQ(report->datasets, 3);
  EXPECT_EQ(report->dataset_versions, 4);
  EXPECT_EQ(report->snapshots, 2);
  EXPECT_EQ(report->jobs, 3);
  EXPECT_THAT(report->skipped, IsEmpty());
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
  ASSERT_THAT(report->skipped, SizeIs(1));
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
                       "record-file directories (datasets, jobs, snapshots)"));
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
