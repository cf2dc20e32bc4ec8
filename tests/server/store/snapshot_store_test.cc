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

namespace bnn::server {
namespace {

using ::bnn::server::testutil::CubicDataset;
using ::bnn::server::testutil::EqualsProto;
using ::bnn::server::testutil::ReadFileOrEmpty;
using ::bnn::server::testutil::StatusIs;
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
  std::unique_ptr<SnapshotStore> Open() {
    absl::StatusOr<std::unique_ptr<SnapshotStore>> store =
        SnapshotStore::Open(dir());
    EXPECT_TRUE(store.ok()) << store.status();
    return store.ok() ? *std::move(store) : nullptr;
  }
  std::string dir() const { return dir_.path() + "/snapshots"; }
  std::string PathOf(const std::string& id) const {
    return dir() + "/" + id + ".snap";
  }
  std::string InfoPathOf(const std::string& id) const {
    return dir() + "/" + id + ".info";
  }
  int NumFiles() const {
    int files = 0;
    for ([[maybe_unused]] const auto& entry :
         std::filesystem::directory_iterator(dir())) {
      ++files;
    }
    return files;
  }

  TempDir dir_;
};

TEST_F(SnapshotStoreTest, CreateThenReadAfterReopening) {
  const Snapshot snapshot = TinySnapshot(1);
  std::string id;
  {
    std::unique_ptr<SnapshotStore> store = Open();
    const absl::StatusOr<store::SnapshotMeta> created = store->Create(snapshot);
    ASSERT_TRUE(created.ok()) << created.status();
    id = created->snapshot_id();
    EXPECT_TRUE(IsId(kSnapshotIdPrefix, id));
    EXPECT_EQ(store->size(), 1);
  }
  std::unique_ptr<SnapshotStore> store = Open();
  EXPECT_EQ(store->size(), 1);
  const absl::StatusOr<Snapshot> read = store->Read(id);
  ASSERT_TRUE(read.ok()) << read.status();
  EXPECT_EQ(read->method, "slang");
  EXPECT_EQ(read->training.seed, snapshot.training.seed);
  EXPECT_EQ(Predictions(*read), Predictions(snapshot));
}

TEST_F(SnapshotStoreTest, MetadataDescribesTheSnapshot) {
  const Snapshot snapshot = TinySnapshot(3);
  std::unique_ptr<SnapshotStore> store = Open();
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
                                   PathOf(meta.snapshot_id()))));
  EXPECT_EQ(meta.format_version(), kSnapshotFormatVersion);
  EXPECT_EQ(meta.library_version(), snapshot.library_version);
  EXPECT_THAT(*store->GetMeta(meta.snapshot_id()), EqualsProto(meta));
  ASSERT_EQ(store->List().size(), 1u);
  EXPECT_THAT(*Open()->GetMeta(meta.snapshot_id()), EqualsProto(meta));
}

TEST_F(SnapshotStoreTest, ListsOldestFirst) {
  std::unique_ptr<SnapshotStore> store = Open();
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

TEST_F(SnapshotStoreTest, MissingOrStaleRecordIsRebuilt) {
  std::string a, b;
  store::SnapshotMeta meta_a;
  {
    std::unique_ptr<SnapshotStore> store = Open();
    meta_a = *store->Create(TinySnapshot(1));
    a = meta_a.snapshot_id();
    b = store->Create(TinySnapshot(2))->snapshot_id();
  }
  // A record that describes another snapshot.
  std::filesystem::copy_file(InfoPathOf(a), InfoPathOf(b),
                             std::filesystem::copy_options::overwrite_existing);
  // As written by a server without records, or interrupted by a crash.
  std::filesystem::remove(InfoPathOf(a));
  std::unique_ptr<SnapshotStore> store = Open();
  EXPECT_THAT(*store->GetMeta(a), EqualsProto(meta_a));
  EXPECT_TRUE(std::filesystem::exists(InfoPathOf(a)));
  EXPECT_EQ(store->GetMeta(b)->seed(), 2u);
  EXPECT_EQ(store->size(), 2);
}

TEST_F(SnapshotStoreTest, RecordWithoutSnapshotIsDeleted) {
  std::string id;
  {
    std::unique_ptr<SnapshotStore> store = Open();
    id = store->Create(TinySnapshot(1))->snapshot_id();
  }
  std::filesystem::remove(PathOf(id));
  std::unique_ptr<SnapshotStore> store = Open();
  EXPECT_EQ(store->size(), 0);
  EXPECT_FALSE(std::filesystem::exists(InfoPathOf(id)));
}

TEST_F(SnapshotStoreTest, UnknownIdIsNotFound) {
  std::unique_ptr<SnapshotStore> store = Open();
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

TEST_F(SnapshotStoreTest, CorruptFileIsDataLoss) {
  std::string id;
  {
    std::unique_ptr<SnapshotStore> store = Open();
    id = store->Create(TinySnapshot(1))->snapshot_id();
  }
  std::string bytes = ReadFileOrEmpty(PathOf(id));
  bytes[bytes.size() / 2] ^= 0x10;
  std::ofstream(PathOf(id), std::ios::binary | std::ios::trunc) << bytes;
  // Found by its record; detected when loaded.
  EXPECT_THAT(Open()->Read(id).status(),
              StatusIs(absl::StatusCode::kDataLoss,
                       "snapshot_id '" + id + "' cannot be loaded"));
  // Without a record it is detected when the store opens.
  std::filesystem::remove(InfoPathOf(id));
  std::unique_ptr<SnapshotStore> store = Open();
  EXPECT_THAT(store->GetMeta(id).status(),
              StatusIs(absl::StatusCode::kDataLoss, "checksum mismatch"));
  EXPECT_THAT(store->List(), IsEmpty());
  EXPECT_EQ(store->size(), 0);
  // It can still be deleted.
  EXPECT_TRUE(store->Delete(id).ok());
  EXPECT_EQ(NumFiles(), 0);
}

TEST_F(SnapshotStoreTest, DeleteRemovesTheFiles) {
  std::unique_ptr<SnapshotStore> store = Open();
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
  std::unique_ptr<SnapshotStore> store = Open();
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
  std::unique_ptr<SnapshotStore> store = Open();
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
