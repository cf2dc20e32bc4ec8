#include "server/store/snapshot_store.h"

#include <filesystem>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "bnn/predict/predictor.h"

#include "server/store/ids.h"
#include "tests/server/server_test_util.h"
#include "tests/server/store/store_dir.h"

namespace bnn::server {
namespace {

using ::bnn::server::testutil::CubicDataset;
using ::bnn::server::testutil::EqualsProto;
using ::bnn::server::testutil::ReadFileOrEmpty;
using ::bnn::server::testutil::StatusIs;
using ::bnn::server::testutil::StoreDir;
using ::bnn::server::testutil::TempDir;
using ::bnn::server::testutil::TinySnapshot;
using ::testing::ElementsAre;
using ::testing::IsEmpty;

// Seeded predictive means and variances of `snapshot` at two inputs.
std::vector<double> Predictions(const Snapshot& snapshot) {
  const std::unique_ptr<Predictor> predictor =
      *Predictor::Create(std::make_shared<const Snapshot>(snapshot));
  PredictOptions options;
  options.num_samples = 16;
  options.seed = 11;
  const Prediction prediction = *predictor->Predict({0.3, 2.0}, 2, options);
  std::vector<double> out = prediction.mean;
  out.insert(out.end(), prediction.variance.begin(), prediction.variance.end());
  return out;
}

class SnapshotStoreTest : public ::testing::Test {
 protected:
  SnapshotStore* Open() {
    store_.reset();
    dir_.Reopen();
    store_ = std::make_unique<SnapshotStore>(dir_.metadata(), dir_.blobs());
    return store_.get();
  }
  // The files under blobs/ (objects, quarantine and temporaries).
  int NumFiles() const {
    int files = 0;
    for (const auto& entry : std::filesystem::recursive_directory_iterator(
             temp_.path() + "/data/blobs")) {
      if (entry.is_regular_file()) ++files;
    }
    return files;
  }
  // The path of the blob holding snapshot `id`.
  std::string BlobPathOf(const std::string& id) {
    const absl::StatusOr<SnapshotRecord> record = dir_.metadata()->Read(
        [&](MetadataReader& r) { return r.GetSnapshot(id); });
    EXPECT_TRUE(record.ok()) << record.status();
    return *dir_.blobs()->PathOf(record->payload_blob);
  }

  TempDir temp_;
  StoreDir dir_{temp_.path() + "/data"};
  std::unique_ptr<SnapshotStore> store_;
};

TEST_F(SnapshotStoreTest, CreateThenReadAfterReopening) {
  const Snapshot snapshot = TinySnapshot(1);
  std::string id;
  {
    SnapshotStore* store = Open();
    const absl::StatusOr<store::SnapshotMeta> created = store->Create(snapshot);
    ASSERT_TRUE(created.ok()) << created.status();
    id = created->snapshot_id();
    EXPECT_TRUE(IsId(kSnapshotIdPrefix, id));
    EXPECT_EQ(store->size(), 1);
  }
  SnapshotStore* store = Open();
  EXPECT_EQ(store->size(), 1);
  const absl::StatusOr<Snapshot> read = store->Read(id);
  ASSERT_TRUE(read.ok()) << read.status();
  EXPECT_EQ(read->method, "slang");
  EXPECT_EQ(read->training.seed, snapshot.training.seed);
  EXPECT_EQ(Predictions(*read), Predictions(snapshot));
}

TEST_F(SnapshotStoreTest, MetadataDescribesTheSnapshot) {
  const Snapshot snapshot = TinySnapshot(3);
  SnapshotStore* store = Open();
  const store::SnapshotMeta meta = *store->Create(snapshot);
  EXPECT_EQ(meta.method(), "slang");
  EXPECT_EQ(meta.params().at("batch_size"), "10");
  EXPECT_EQ(meta.task(), "regression");
  EXPECT_THAT(meta.class_values(), IsEmpty());
  EXPECT_EQ(meta.num_features(), 1);
  EXPECT_THAT(meta.hidden_sizes(), ElementsAre(4));
  EXPECT_THAT(meta.activations(), ElementsAre("relu"));
  EXPECT_EQ(meta.num_parameters(), (1 + 1) * 4 + (4 + 1) * 1);
  EXPECT_EQ(meta.posterior_family(), "low_rank");
  EXPECT_EQ(meta.dataset_id(), "ds-00000000000000aa");
  EXPECT_EQ(meta.dataset_version(), 2);
  EXPECT_EQ(meta.dataset_hash(), snapshot.training.dataset_hash);
  EXPECT_EQ(meta.steps(), 2);
  EXPECT_EQ(meta.epochs(), 1);
  EXPECT_EQ(meta.seed(), 3u);
  EXPECT_EQ(meta.created_unix_ms(), snapshot.created_unix_ms);
  EXPECT_EQ(meta.size_bytes(), static_cast<int64_t>(std::filesystem::file_size(
                                   BlobPathOf(meta.snapshot_id()))));
  EXPECT_EQ(meta.format_version(), kSnapshotFormatVersion);
  EXPECT_EQ(meta.library_version(), snapshot.library_version);
  EXPECT_EQ(meta.job_id(), "");
  EXPECT_THAT(*store->GetMeta(meta.snapshot_id()), EqualsProto(meta));
  ASSERT_EQ(store->List().size(), 1u);
  EXPECT_THAT(*Open()->GetMeta(meta.snapshot_id()), EqualsProto(meta));
  EXPECT_EQ(store_->Create(snapshot, "", "job-00000000000000aa")->job_id(),
            "job-00000000000000aa");
}

TEST_F(SnapshotStoreTest, ListsOldestFirst) {
  SnapshotStore* store = Open();
  Snapshot older = TinySnapshot(1);
  Snapshot newer = older;
  older.created_unix_ms = 1000;
  newer.created_unix_ms = 2000;
  const std::string second = store->Create(newer)->snapshot_id();
  const std::string first = store->Create(older)->snapshot_id();
  std::vector<std::string> listed;
  for (const auto& meta : store->List()) listed.push_back(meta.snapshot_id());
  EXPECT_THAT(listed, ElementsAre(first, second));
}

TEST_F(SnapshotStoreTest, IdenticalBytesShareOneBlob) {
  const std::string bytes = *EncodeSnapshot(TinySnapshot(5));
  SnapshotStore* store = Open();
  const std::string a = store->Import(bytes)->snapshot_id();
  const std::string b = store->Import(bytes)->snapshot_id();
  EXPECT_NE(a, b);
  EXPECT_EQ(NumFiles(), 1);
  // Deleting one keeps the blob the other still uses.
  ASSERT_TRUE(store->Delete(a).ok());
  EXPECT_EQ(NumFiles(), 1);
  EXPECT_EQ(store->OpenFile(b)->bytes(), bytes);
  ASSERT_TRUE(store->Delete(b).ok());
  EXPECT_EQ(NumFiles(), 0);
}

TEST_F(SnapshotStoreTest, BlobWithoutRecordIsSweptOnOpen) {
  SnapshotStore* store = Open();
  {
    // A crash between the blob's write and its record's commit.
    absl::ReaderMutexLock reference(store->blobs().reference_mutex());
    ASSERT_TRUE(
        store->StoreFile(TinySnapshot(1), store->NewSnapshotId(), "").ok());
  }
  EXPECT_EQ(NumFiles(), 1);
  Open();
  EXPECT_EQ(NumFiles(), 0);
  EXPECT_EQ(dir_.dir().blobs_swept, 1);
}

TEST_F(SnapshotStoreTest, UnknownIdIsNotFound) {
  SnapshotStore* store = Open();
  for (const absl::Status& status :
       {store->Read("snap-0000000000000000").status(),
        store->GetMeta("snap-0000000000000000").status(),
        store->OpenFile("snap-0000000000000000").status(),
        store->Delete("snap-0000000000000000")}) {
    EXPECT_THAT(status, StatusIs(absl::StatusCode::kNotFound,
                                 "snapshot_id 'snap-0000000000000000' not "
                                 "found"));
  }
}

TEST_F(SnapshotStoreTest, CorruptBlobIsDataLossThenQuarantined) {
  std::string id, other;
  {
    SnapshotStore* store = Open();
    id = store->Create(TinySnapshot(1))->snapshot_id();
    other = store->Create(TinySnapshot(2))->snapshot_id();
  }
  const std::string path = BlobPathOf(id);
  std::string bytes = ReadFileOrEmpty(path);
  bytes[bytes.size() / 2] ^= 0x10;
  std::filesystem::remove(path);  // the blob is a read-only hard link
  std::ofstream(path, std::ios::binary | std::ios::trunc) << bytes;
  // Found by its record; detected when decoded.
  EXPECT_THAT(store_->Read(id).status(),
              StatusIs(absl::StatusCode::kDataLoss,
                       "snapshot_id '" + id + "' cannot be loaded"));
  // The next open quarantines the blob: every access is DataLoss naming the
  // snapshot, and it is not listed.
  SnapshotStore* store = Open();
  ASSERT_EQ(dir_.dir().blob_report.quarantined.size(), 1u);
  for (const absl::Status& status :
       {store->GetMeta(id).status(), store->Read(id).status(),
        store->OpenFile(id).status()}) {
    EXPECT_THAT(status, StatusIs(absl::StatusCode::kDataLoss,
                                 "snapshot_id '" + id + "' cannot be loaded"));
    EXPECT_THAT(status, StatusIs(absl::StatusCode::kDataLoss, "quarantined"));
  }
  ASSERT_EQ(store->List().size(), 1u);
  EXPECT_EQ(store->List()[0].snapshot_id(), other);
  EXPECT_TRUE(store->Read(other).ok());
  // It can still be deleted, quarantined file and all.
  EXPECT_TRUE(store->Delete(id).ok());
  EXPECT_EQ(NumFiles(), 1);
  Open();
  EXPECT_THAT(dir_.blobs()->Quarantined(), IsEmpty());
}

TEST_F(SnapshotStoreTest, DeleteRemovesTheFiles) {
  SnapshotStore* store = Open();
  const std::string id = store->Create(TinySnapshot(1))->snapshot_id();
  const absl::StatusOr<MappedFile> file = store->OpenFile(id);
  ASSERT_TRUE(file.ok()) << file.status();
  ASSERT_TRUE(store->Delete(id).ok());
  EXPECT_EQ(NumFiles(), 0);
  EXPECT_EQ(store->size(), 0);
  EXPECT_THAT(store->Read(id).status(),
              StatusIs(absl::StatusCode::kNotFound, "not found"));
  EXPECT_THAT(store->Delete(id),
              StatusIs(absl::StatusCode::kNotFound, "not found"));
  // A reader that mapped the file finishes its work.
  EXPECT_TRUE(DecodeSnapshot(file->bytes()).ok());
  EXPECT_EQ(Open()->size(), 0);
}

TEST_F(SnapshotStoreTest, ImportStoresTheBytesUnchanged) {
  const Snapshot snapshot = TinySnapshot(5);
  const std::string bytes = *EncodeSnapshot(snapshot);
  SnapshotStore* store = Open();
  const absl::StatusOr<store::SnapshotMeta> meta = store->Import(bytes);
  ASSERT_TRUE(meta.ok()) << meta.status();
  EXPECT_EQ(meta->seed(), 5u);
  EXPECT_EQ(meta->size_bytes(), static_cast<int64_t>(bytes.size()));
  EXPECT_EQ(store->OpenFile(meta->snapshot_id())->bytes(), bytes);
  // The same posterior: bitwise-identical predictions.
  EXPECT_EQ(Predictions(*store->Read(meta->snapshot_id())),
            Predictions(snapshot));
}

TEST_F(SnapshotStoreTest, ImportOfBadBytesStoresNothing) {
  const std::string bytes = *EncodeSnapshot(TinySnapshot(5));
  std::string corrupt = bytes;
  corrupt[bytes.size() / 2] ^= 0x01;
  std::string newer = bytes;
  newer[8] = 99;  // format_version, little-endian u32 after the magic
  SnapshotStore* store = Open();
  EXPECT_THAT(store->Import(bytes.substr(0, bytes.size() - 1)).status(),
              StatusIs(absl::StatusCode::kDataLoss, "truncated"));
  EXPECT_THAT(store->Import(corrupt).status(),
              StatusIs(absl::StatusCode::kDataLoss, "checksum mismatch"));
  EXPECT_THAT(store->Import(newer).status(),
              StatusIs(absl::StatusCode::kFailedPrecondition,
                       "snapshot format version 99 is newer"));
  EXPECT_THAT(
      store->Import("not a snapshot").status(),
      StatusIs(absl::StatusCode::kDataLoss, "not a bnn-serve snapshot"));
  EXPECT_EQ(store->size(), 0);
  EXPECT_EQ(NumFiles(), 0);
}

}  // namespace
}  // namespace bnn::server
