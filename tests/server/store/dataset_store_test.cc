#include "server/store/dataset_store.h"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include <absl/strings/str_cat.h>
#include <absl/time/clock.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "bnn/io/file.h"
#include "bnn/io/record.h"
#include "bnn/train/trainer.h"

#include "server/store/dataset_file.h"
#include "server/store/ids.h"
#include "server/store/job_store.h"
#include "server/store/snapshot_store.h"
#include "tests/server/server_test_util.h"

namespace bnn::server {
namespace {

using ::bnn::server::testutil::CubicDataset;
using ::bnn::server::testutil::ReadFileOrEmpty;
using ::bnn::server::testutil::StatusIs;
using ::bnn::server::testutil::TempDir;
using ::testing::ElementsAre;
using ::testing::IsEmpty;

Dataset Classification() {
  Dataset data;
  data.num_features = 2;
  data.features = {0, 1, 2, 3, 4, 5};
  data.targets = {-1, 1, -1};
  data.feature_names = {"a", "b"};
  data.target_name = "label";
  EXPECT_TRUE(EncodeClassLabels(&data).ok());
  return data;
}

void FlipByte(const std::string& path, size_t offset_from_end) {
  std::string bytes = ReadFileOrEmpty(path);
  ASSERT_GT(bytes.size(), offset_from_end);
  bytes[bytes.size() - 1 - offset_from_end] ^= 0x20;
  std::ofstream(path, std::ios::binary | std::ios::trunc) << bytes;
}

// The rows of `data` with the schema of the stored dataset `meta`.
Dataset AppendOf(const store::DatasetMeta& meta, const Dataset& data) {
  Dataset rows = *DatasetSchema(meta);
  rows.features = data.features;
  rows.targets = data.targets;
  return rows;
}

Dataset Concatenated(Dataset a, const Dataset& b) {
  EXPECT_TRUE(a.Append(b).ok());
  return a;
}

class DatasetStoreTest : public ::testing::Test {
 protected:
  std::unique_ptr<DatasetStore> Open() {
    absl::StatusOr<std::unique_ptr<DatasetStore>> store =
        DatasetStore::Open(dir_.path() + "/datasets");
    EXPECT_TRUE(store.ok()) << store.status();
    return store.ok() ? *std::move(store) : nullptr;
  }
  std::string PathOf(const std::string& id) const {
    return dir_.path() + "/datasets/" + id + ".dataset";
  }
  std::string PathOf(const std::string& id, int version) const {
    return absl::StrCat(dir_.path(), "/datasets/", id, ".v", version,
                        ".dataset");
  }
  // A dataset of 10 rows with versions 2 and 3 adding 5 and 7 rows; returns
  // its id.
  std::string ThreeVersions(DatasetStore* store) {
    const store::DatasetMeta v1 = *store->Create(CubicDataset(10, 1), "cubic");
    const store::DatasetMeta v2 = *store->Append(
        v1.dataset_id(), AppendOf(v1, CubicDataset(5, 2)), std::nullopt);
    EXPECT_TRUE(store
                    ->Append(v1.dataset_id(), AppendOf(v2, CubicDataset(7, 3)),
                             std::nullopt)
                    .ok());
    return v1.dataset_id();
  }

  TempDir dir_;
};

TEST_F(DatasetStoreTest, CreateGetLoadRoundTrip) {
  std::unique_ptr<DatasetStore> store = Open();
  const Dataset data = Classification();
  const absl::StatusOr<store::DatasetMeta> meta = store->Create(data, "iris");
  ASSERT_TRUE(meta.ok()) << meta.status();
  EXPECT_TRUE(IsId(kDatasetIdPrefix, meta->dataset_id()));
  EXPECT_EQ(meta->version(), 1);
  EXPECT_EQ(meta->name(), "iris");
  EXPECT_EQ(meta->task(), "binary");
  EXPECT_EQ(meta->num_rows(), 3);
  EXPECT_EQ(meta->num_features(), 2);
  EXPECT_EQ(meta->num_classes(), 2);
  EXPECT_THAT(meta->class_values(), ElementsAre(-1, 1));
  EXPECT_THAT(meta->feature_names(), ElementsAre("a", "b"));
  EXPECT_EQ(meta->target_name(), "label");
  EXPECT_EQ(meta->hash(), DatasetHash(data));
  EXPECT_GT(meta->created_unix_ms(), 0);

  EXPECT_EQ(store->Get(meta->dataset_id())->SerializeAsString(),
            meta->SerializeAsString());
  const absl::StatusOr<Dataset> loaded = store->Load(meta->dataset_id());
  ASSERT_TRUE(loaded.ok()) << loaded.status();
  EXPECT_EQ(loaded->task, Task::kBinary);
  EXPECT_EQ(loaded->features, data.features);
  EXPECT_EQ(loaded->targets, data.targets);
  EXPECT_EQ(loaded->class_values, data.class_values);
  EXPECT_EQ(loaded->feature_names, data.feature_names);
  EXPECT_EQ(DatasetHash(*loaded), meta->hash());
}

TEST_F(DatasetStoreTest, SurvivesReopening) {
  std::string first_id, second_id;
  {
    std::unique_ptr<DatasetStore> store = Open();
    first_id = store->Create(CubicDataset(30), "cubic")->dataset_id();
    absl::SleepFor(absl::Milliseconds(2));  // creation times are in ms
    second_id = store->Create(Classification(), "labels")->dataset_id();
  }
  std::unique_ptr<DatasetStore> store = Open();
  EXPECT_EQ(store->size(), 2);
  std::vector<std::string> listed;
  for (const auto& meta : store->List()) listed.push_back(meta.dataset_id());
  EXPECT_THAT(listed, ElementsAre(first_id, second_id));  // oldest first
  EXPECT_EQ(store->Load(first_id)->features, CubicDataset(30).features);
}

TEST_F(DatasetStoreTest, UnknownIdIsNotFound) {
  std::unique_ptr<DatasetStore> store = Open();
  EXPECT_THAT(store->Get("ds-0000000000000000").status(),
              StatusIs(absl::StatusCode::kNotFound,
                       "dataset_id 'ds-0000000000000000' not found"));
  EXPECT_THAT(store->Load("../etc/passwd").status(),
              StatusIs(absl::StatusCode::kNotFound, "not found"));
  EXPECT_THAT(store->List(), IsEmpty());
}

TEST_F(DatasetStoreTest, CorruptionIsReportedOnLoadAndAfterRestart) {
  std::string id;
  {
    std::unique_ptr<DatasetStore> store = Open();
    id = store->Create(CubicDataset(30), "cubic")->dataset_id();
    store->Create(Classification(), "healthy").IgnoreError();
    FlipByte(PathOf(id), 100);  // inside the payload
    EXPECT_THAT(store->Load(id).status(),
                StatusIs(absl::StatusCode::kDataLoss, "checksum mismatch"));
  }
  std::unique_ptr<DatasetStore> store = Open();
  // Indexed with its error: not "not found", but the file and the cause.
  EXPECT_THAT(store->Get(id).status(),
              StatusIs(absl::StatusCode::kDataLoss,
                       PathOf(id) + ": dataset file checksum mismatch"));
  EXPECT_THAT(store->Load(id).status(),
              StatusIs(absl::StatusCode::kDataLoss, "checksum mismatch"));
  EXPECT_EQ(store->size(), 1);
  ASSERT_EQ(store->List().size(), 1u);
  EXPECT_EQ(store->List()[0].name(), "healthy");
}

TEST_F(DatasetStoreTest, TruncatedFileIsDataLoss) {
  std::string id;
  {
    std::unique_ptr<DatasetStore> store = Open();
    id = store->Create(CubicDataset(30), "cubic")->dataset_id();
  }
  const std::string bytes = ReadFileOrEmpty(PathOf(id));
  std::ofstream(PathOf(id), std::ios::binary | std::ios::trunc)
      << bytes.substr(0, bytes.size() / 2);
  EXPECT_THAT(Open()->Get(id).status(),
              StatusIs(absl::StatusCode::kDataLoss, "truncated"));
}

TEST_F(DatasetStoreTest, ValidFrameWithInvalidContentsIsDataLoss) {
  // A well-formed, checksummed file whose rows disagree with its metadata.
  store::DatasetFile file;
  const std::string id = "ds-00000000000000ab";
  file.mutable_meta()->set_dataset_id(id);
  file.mutable_meta()->set_task("regression");
  file.mutable_meta()->set_num_features(2);
  file.mutable_meta()->set_num_rows(5);
  file.add_features(1.0);
  file.add_features(2.0);
  file.add_targets(0.5);
  Open();  // creates the directory
  ASSERT_TRUE(
      WriteFileAtomically(
          PathOf(id), EncodeRecord({"BNNDSET1", 1}, file.SerializeAsString()))
          .ok());
  EXPECT_THAT(Open()->Get(id).status(),
              StatusIs(absl::StatusCode::kDataLoss,
                       "holds 1 rows; its metadata says 5"));
}

// Found by store_fuzz: a version whose file has another schema than
// version 1 (here version 1's metadata gained class values) made Load fail
// with InvalidArgument, blaming the request for a corrupt store.
TEST_F(DatasetStoreTest, VersionsOfAnotherSchemaAreDataLoss) {
  std::string id;
  {
    std::unique_ptr<DatasetStore> store = Open();
    id = ThreeVersions(store.get());
    const DatasetFileContents v1 = *ReadDatasetFile(PathOf(id));
    store::DatasetFile file;
    *file.mutable_meta() = v1.meta;
    file.mutable_meta()->add_class_values(1.0);
    file.mutable_features()->Add(v1.rows.features.begin(),
                                 v1.rows.features.end());
    file.mutable_targets()->Add(v1.rows.targets.begin(), v1.rows.targets.end());
    ASSERT_TRUE(
        WriteFileAtomically(
            PathOf(id), EncodeRecord({"BNNDSET1", 1}, file.SerializeAsString()))
            .ok());
  }
  std::unique_ptr<DatasetStore> store = Open();
  EXPECT_TRUE(store->Load(id, 1).ok());
  EXPECT_THAT(store->Load(id, 2).status(),
              StatusIs(absl::StatusCode::kDataLoss,
                       absl::StrCat(PathOf(id, 2),
                                    ": its rows do not extend version 1")));
}

TEST_F(DatasetStoreTest, AppendsCreateImmutableVersions) {
  std::unique_ptr<DatasetStore> store = Open();
  const Dataset first = CubicDataset(10, 1);
  const Dataset more = CubicDataset(5, 2);
  const store::DatasetMeta v1 = *store->Create(first, "cubic");
  const absl::StatusOr<store::DatasetMeta> v2 =
      store->Append(v1.dataset_id(), AppendOf(v1, more), 1);
  ASSERT_TRUE(v2.ok()) << v2.status();
  EXPECT_EQ(v2->dataset_id(), v1.dataset_id());
  EXPECT_EQ(v2->version(), 2);
  EXPECT_EQ(v2->num_rows(), 15);
  EXPECT_EQ(v2->first_row(), 10);
  EXPECT_EQ(v2->name(), "cubic");
  const Dataset both = Concatenated(first, more);
  EXPECT_EQ(v2->hash(), DatasetHash(both));
  EXPECT_NE(v2->hash(), v1.hash());

  EXPECT_EQ(store->Get(v1.dataset_id())->version(), 2);
  EXPECT_EQ(store->Get(v1.dataset_id(), 1)->SerializeAsString(),
            v1.SerializeAsString());
  EXPECT_EQ(store->Load(v1.dataset_id(), 1)->features, first.features);
  EXPECT_EQ(store->Load(v1.dataset_id())->features, both.features);
  EXPECT_EQ(store->Load(v1.dataset_id())->targets, both.targets);
  // Only the appended rows are written again.
  EXPECT_TRUE(std::filesystem::exists(PathOf(v1.dataset_id(), 2)));

  std::unique_ptr<DatasetStore> reopened = Open();
  EXPECT_EQ(reopened->Get(v1.dataset_id())->SerializeAsString(),
            v2->SerializeAsString());
  EXPECT_EQ(reopened->Load(v1.dataset_id(), 2)->features, both.features);
  ASSERT_EQ(reopened->List().size(), 1u);
  EXPECT_EQ(reopened->List()[0].version(), 2);
}

TEST_F(DatasetStoreTest, AppendedLabelsKeepTheClasses) {
  std::unique_ptr<DatasetStore> store = Open();
  const store::DatasetMeta v1 = *store->Create(Classification(), "labels");
  Dataset rows = *DatasetSchema(v1);
  rows.features = {6, 7};
  rows.targets = {1};  // the class index of label 1
  const store::DatasetMeta v2 = *store->Append(v1.dataset_id(), rows, 1);
  EXPECT_THAT(v2.class_values(), ElementsAre(-1, 1));
  const Dataset loaded = *store->Load(v1.dataset_id());
  EXPECT_THAT(loaded.targets, ElementsAre(0, 1, 0, 1));
  EXPECT_EQ(loaded.task, Task::kBinary);
}

TEST_F(DatasetStoreTest, StaleExpectedVersionStoresNothing) {
  std::unique_ptr<DatasetStore> store = Open();
  const store::DatasetMeta v1 = *store->Create(CubicDataset(10), "cubic");
  ASSERT_TRUE(
      store->Append(v1.dataset_id(), AppendOf(v1, CubicDataset(2)), 1).ok());
  EXPECT_THAT(
      store->Append(v1.dataset_id(), AppendOf(v1, CubicDataset(2)), 1).status(),
      StatusIs(absl::StatusCode::kFailedPrecondition,
               "dataset_id '" + v1.dataset_id() +
                   "' is at version 2; the append expected version 1"));
  EXPECT_EQ(store->Get(v1.dataset_id())->version(), 2);
  EXPECT_FALSE(std::filesystem::exists(PathOf(v1.dataset_id(), 3)));
}

TEST_F(DatasetStoreTest, BadAppendsStoreNothing) {
  std::unique_ptr<DatasetStore> store = Open();
  const store::DatasetMeta v1 = *store->Create(CubicDataset(10), "cubic");
  Dataset wide = AppendOf(v1, CubicDataset(2));
  wide.num_features = 2;
  wide.features.push_back(0.0);
  wide.features.push_back(0.0);
  EXPECT_THAT(store->Append(v1.dataset_id(), wide, std::nullopt).status(),
              StatusIs(absl::StatusCode::kInvalidArgument, "schema mismatch"));
  EXPECT_THAT(
      store->Append(v1.dataset_id(), *DatasetSchema(v1), std::nullopt).status(),
      StatusIs(absl::StatusCode::kInvalidArgument, "at least one row"));
  EXPECT_THAT(store
                  ->Append("ds-0000000000000000", AppendOf(v1, CubicDataset(2)),
                           std::nullopt)
                  .status(),
              StatusIs(absl::StatusCode::kNotFound, "not found"));
  EXPECT_EQ(store->Get(v1.dataset_id())->version(), 1);
}

TEST_F(DatasetStoreTest, MissingVersionIsNotFound) {
  std::unique_ptr<DatasetStore> store = Open();
  const store::DatasetMeta v1 = *store->Create(CubicDataset(10), "cubic");
  EXPECT_THAT(store->Get(v1.dataset_id(), 5).status(),
              StatusIs(absl::StatusCode::kNotFound,
                       "dataset_id '" + v1.dataset_id() +
                           "' has no version 5 (its latest is 1)"));
  EXPECT_THAT(store->Load(v1.dataset_id(), 2).status(),
              StatusIs(absl::StatusCode::kNotFound, "has no version 2"));
}

TEST_F(DatasetStoreTest, CorruptVersionBreaksItAndLaterOnes) {
  std::string id;
  {
    std::unique_ptr<DatasetStore> store = Open();
    id = ThreeVersions(store.get());
  }
  FlipByte(PathOf(id, 2), 20);
  std::unique_ptr<DatasetStore> store = Open();
  EXPECT_EQ(store->Load(id, 1)->num_rows(), 10);
  EXPECT_THAT(store->Get(id, 2).status(),
              StatusIs(absl::StatusCode::kDataLoss,
                       PathOf(id, 2) + ": dataset file checksum mismatch"));
  EXPECT_THAT(store->Get(id, 3).status(),
              StatusIs(absl::StatusCode::kDataLoss,
                       "version 3 cannot be read: it builds on version 2, "
                       "which is unreadable"));
  EXPECT_THAT(store->Get(id).status(),
              StatusIs(absl::StatusCode::kDataLoss, "version 3"));
  EXPECT_THAT(store->Load(id).status(),
              StatusIs(absl::StatusCode::kDataLoss, "version 3"));
  EXPECT_EQ(store->size(), 0);
  EXPECT_THAT(store->List(), IsEmpty());
}

TEST_F(DatasetStoreTest, MissingVersionFileBreaksLaterOnes) {
  std::string id;
  {
    std::unique_ptr<DatasetStore> store = Open();
    id = ThreeVersions(store.get());
  }
  std::filesystem::remove(PathOf(id, 2));
  std::unique_ptr<DatasetStore> store = Open();
  EXPECT_TRUE(store->Get(id, 1).ok());
  EXPECT_THAT(store->Get(id).status(),
              StatusIs(absl::StatusCode::kDataLoss,
                       "version 3 cannot be read: version 2 is missing"));
}

TEST_F(DatasetStoreTest, RowsPoolReadsEveryVersionInPlace) {
  std::unique_ptr<DatasetStore> store = Open();
  const std::string id = ThreeVersions(store.get());
  const Dataset all = *store->Load(id);
  const absl::StatusOr<std::unique_ptr<PoolSource>> pool = store->OpenRows(id);
  ASSERT_TRUE(pool.ok()) << pool.status();
  EXPECT_EQ((*pool)->num_rows(), 22);
  EXPECT_EQ((*pool)->num_features(), 1);
  // Chunks crossing the boundaries between the version files.
  std::vector<double> read;
  for (int64_t begin = 0; begin < 22; begin += 4) {
    const int64_t count = std::min<int64_t>(4, 22 - begin);
    std::vector<double> chunk;
    ASSERT_TRUE((*pool)->Read(begin, count, &chunk).ok());
    EXPECT_EQ(chunk.size(), static_cast<size_t>(count));
    read.insert(read.end(), chunk.begin(), chunk.end());
  }
  EXPECT_EQ(read, all.features);
  std::vector<double> chunk;
  EXPECT_THAT((*pool)->Read(20, 3, &chunk),
              StatusIs(absl::StatusCode::kOutOfRange, "exceed 22"));
  // An earlier version ends earlier.
  EXPECT_EQ((*store->OpenRows(id, 2))->num_rows(), 15);
}

TEST_F(DatasetStoreTest, RowsPoolVerifiesTheFiles) {
  std::unique_ptr<DatasetStore> store = Open();
  const std::string id = ThreeVersions(store.get());
  FlipByte(PathOf(id, 3), 20);
  EXPECT_THAT(store->OpenRows(id).status(),
              StatusIs(absl::StatusCode::kDataLoss,
                       PathOf(id, 3) + ": dataset file checksum mismatch"));
  EXPECT_TRUE(store->OpenRows(id, 2).ok());
}

// Rows written in many runs (more than DatasetFileWriter::kRunBytes of
// features) read back exactly, through Load and the in-place pool, and
// nothing is left in the directory but the version file.
TEST_F(DatasetStoreTest, StreamedVersionsSpanManyRuns) {
  std::unique_ptr<DatasetStore> store = Open();
  const Dataset data = CubicDataset(300'000);  // 2.4 MB of features: 3 runs
  absl::StatusOr<std::unique_ptr<DatasetFileWriter>> writer =
      store->NewVersionWriter(1);
  ASSERT_TRUE(writer.ok()) << writer.status();
  // In uneven pieces, as chunks arrive.
  const absl::Span<const double> x = data.features, y = data.targets;
  for (int64_t first = 0; first < data.num_rows(); first += 70'001) {
    const int64_t n = std::min<int64_t>(70'001, data.num_rows() - first);
    ASSERT_TRUE(
        (*writer)->AddRows(x.subspan(first, n), y.subspan(first, n)).ok());
  }
  Dataset schema = data;
  schema.features.clear();
  schema.targets.clear();
  const absl::StatusOr<store::DatasetMeta> v1 =
      store->Create(*std::move(writer), schema, "big");
  ASSERT_TRUE(v1.ok()) << v1.status();
  EXPECT_EQ(v1->num_rows(), 300'000);
  EXPECT_EQ(v1->hash(), DatasetHash(data));
  const absl::StatusOr<Dataset> loaded = store->Load(v1->dataset_id());
  ASSERT_TRUE(loaded.ok()) << loaded.status();
  EXPECT_EQ(loaded->features, data.features);
  EXPECT_EQ(loaded->targets, data.targets);
  const absl::StatusOr<std::unique_ptr<PoolSource>> pool =
      store->OpenRows(v1->dataset_id());
  ASSERT_TRUE(pool.ok()) << pool.status();
  std::vector<double> rows;
  ASSERT_TRUE((*pool)->Read(131'000, 2'000, &rows).ok());
  EXPECT_EQ(rows, std::vector<double>(data.features.begin() + 131'000,
                                      data.features.begin() + 133'000));
  std::vector<std::string> files;
  for (const auto& entry :
       std::filesystem::directory_iterator(dir_.path() + "/datasets")) {
    files.push_back(entry.path().filename().string());
  }
  EXPECT_THAT(files, ElementsAre(v1->dataset_id() + ".dataset"));
}

// Raw classification labels written as they arrive are encoded at the end.
TEST_F(DatasetStoreTest, StreamedLabelsAreEncoded) {
  std::unique_ptr<DatasetStore> store = Open();
  const Dataset encoded = Classification();  // labels -1, 1, -1
  std::unique_ptr<DatasetFileWriter> writer = *store->NewVersionWriter(2);
  ASSERT_TRUE(writer->AddRows(encoded.features, {-1, 1, -1}).ok());
  Dataset schema = encoded;
  schema.features.clear();
  schema.targets.clear();
  const absl::StatusOr<store::DatasetMeta> meta =
      store->Create(std::move(writer), schema, "labels");
  ASSERT_TRUE(meta.ok()) << meta.status();
  EXPECT_EQ(meta->hash(), DatasetHash(encoded));
  EXPECT_EQ(store->Load(meta->dataset_id())->targets, encoded.targets);
}

TEST_F(DatasetStoreTest, DroppedWriterLeavesNoFile) {
  std::unique_ptr<DatasetStore> store = Open();
  {
    std::unique_ptr<DatasetFileWriter> writer = *store->NewVersionWriter(1);
    ASSERT_TRUE(writer->AddRows({1.0, 2.0}, {3.0, 4.0}).ok());
  }
  EXPECT_TRUE(std::filesystem::is_empty(dir_.path() + "/datasets"));
}

// An append costs its own rows: the hash continues from the state kept with
// the latest version, so the earlier versions' files are not read at all
// (here one is even corrupt, which a read would report).
TEST_F(DatasetStoreTest, AppendDoesNotReadEarlierVersions) {
  std::unique_ptr<DatasetStore> store = Open();
  const Dataset first = CubicDataset(100, 1);
  const Dataset second = CubicDataset(20, 2);
  const store::DatasetMeta v1 = *store->Create(first, "cubic");
  FlipByte(PathOf(v1.dataset_id()), 100);
  const absl::StatusOr<store::DatasetMeta> v2 =
      store->Append(v1.dataset_id(), AppendOf(v1, second), std::nullopt);
  ASSERT_TRUE(v2.ok()) << v2.status();
  EXPECT_EQ(v2->hash(), DatasetHash(Concatenated(first, second)));
}

// Versions stored before hash states were kept are hashed once on append.
TEST_F(DatasetStoreTest, AppendToAVersionWithoutHashState) {
  const Dataset first = CubicDataset(10, 1);
  const Dataset second = CubicDataset(5, 2);
  std::string id;
  {
    std::unique_ptr<DatasetStore> store = Open();
    id = store->Create(first, "cubic")->dataset_id();
  }
  // Rewrite version 1 without its state, as an older server wrote it.
  store::DatasetFile file;
  ASSERT_TRUE(
      ReadRecordFile(PathOf(id), {"BNNDSET1", 1, "dataset file"}, &file).ok());
  file.mutable_meta()->clear_hash_state();
  ASSERT_TRUE(
      WriteRecordFile(PathOf(id), {"BNNDSET1", 1, "dataset file"}, file).ok());
  std::unique_ptr<DatasetStore> store = Open();
  const absl::StatusOr<store::DatasetMeta> v2 =
      store->Append(id, AppendOf(*store->Get(id), second), std::nullopt);
  ASSERT_TRUE(v2.ok()) << v2.status();
  EXPECT_EQ(v2->hash(), DatasetHash(Concatenated(first, second)));
  EXPECT_FALSE(v2->hash_state().empty());
}

// An append is checked with the rows before it: their ranges are kept with
// each version, so the store refuses rows that make a column's max - min
// overflow (standardisation would give NaN) without reading the dataset.
TEST_F(DatasetStoreTest, AppendThatOverflowsAColumnRangeIsRefused) {
  std::unique_ptr<DatasetStore> store = Open();
  Dataset data = CubicDataset(4, 1);
  data.targets[0] = -1e308;
  const store::DatasetMeta v1 = *store->Create(data, "edge");
  EXPECT_EQ(v1.range_min_size(), 2);
  EXPECT_EQ(v1.range_min(1), -1e308);
  Dataset rows = AppendOf(v1, CubicDataset(2, 2));
  rows.targets[1] = 1e308;
  EXPECT_THAT(store->Append(v1.dataset_id(), rows, std::nullopt).status(),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       "target spans [-1e+308, 1e+308]"));
  EXPECT_EQ(store->Get(v1.dataset_id())->version(), 1);
  rows.targets[1] = 1;
  EXPECT_TRUE(store->Append(v1.dataset_id(), rows, std::nullopt).ok());
}

}  // namespace
}  // namespace bnn::server

namespace bnn::server {
namespace {

using ::bnn::server::testutil::CubicDataset;
using ::bnn::server::testutil::StatusIs;
using ::bnn::server::testutil::TempDir;
using ::bnn::server::testutil::TinySnapshot;

class DatasetNamesTest : public ::testing::Test {
 protected:
  std::unique_ptr<DatasetStore> Open(const std::string& sub = "datasets") {
    absl::StatusOr<std::unique_ptr<DatasetStore>> store =
        DatasetStore::Open(dir_.path() + "/" + sub);
    EXPECT_TRUE(store.ok()) << store.status();
    return store.ok() ? *std::move(store) : nullptr;
  }

  TempDir dir_;
};

TEST_F(DatasetNamesTest, NamesAreUniqueAndWorkAsIds) {
  std::unique_ptr<DatasetStore> store = Open();
  const std::string id = store->Create(CubicDataset(10), "cubic")->dataset_id();
  EXPECT_THAT(store->Create(CubicDataset(10), "cubic").status(),
              StatusIs(absl::StatusCode::kAlreadyExists,
                       "a dataset named 'cubic' exists: " + id));
  EXPECT_THAT(store->CheckNameFree("cubic"),
              StatusIs(absl::StatusCode::kAlreadyExists, id));
  EXPECT_TRUE(store->CheckNameFree("other").ok());
  EXPECT_EQ(store->Get("cubic")->dataset_id(), id);
  EXPECT_EQ(*store->ResolveId("cubic"), id);
  EXPECT_EQ(*store->ResolveId(id), id);
  EXPECT_EQ(store->Load("cubic")->num_rows(), 10);
  const store::DatasetMeta v2 =
      *store->Append("cubic", CubicDataset(3, 2), std::nullopt);
  EXPECT_EQ(v2.dataset_id(), id);
  EXPECT_EQ(v2.version(), 2);
  EXPECT_EQ((*store->OpenRows("cubic"))->num_rows(), 13);
  EXPECT_THAT(
      store->Get("nothing").status(),
      StatusIs(absl::StatusCode::kNotFound, "dataset_id 'nothing' not found"));
  EXPECT_EQ(store->size(), 1);
}

// A data directory of an older server may hold two datasets of one name:
// both stay readable by id, the name is refused as ambiguous.
TEST_F(DatasetNamesTest, DuplicateNamesOfOldDirectoriesAreAmbiguous) {
  std::string first, second;
  {
    std::unique_ptr<DatasetStore> a = Open("a");
    std::unique_ptr<DatasetStore> b = Open("b");
    first = a->Create(CubicDataset(10), "twin")->dataset_id();
    second = b->Create(CubicDataset(12), "twin")->dataset_id();
  }
  std::filesystem::create_directories(dir_.path() + "/old");
  for (const auto& [sub, id] : {std::pair{"a", first}, {"b", second}}) {
    std::filesystem::copy_file(
        absl::StrCat(dir_.path(), "/", sub, "/", id, ".dataset"),
        absl::StrCat(dir_.path(), "/old/", id, ".dataset"));
  }
  std::unique_ptr<DatasetStore> store = Open("old");
  EXPECT_EQ(store->Get(first)->num_rows(), 10);
  EXPECT_EQ(store->Get(second)->num_rows(), 12);
  EXPECT_THAT(store->Get("twin").status(),
              StatusIs(absl::StatusCode::kFailedPrecondition,
                       "dataset name 'twin' is ambiguous"));
  EXPECT_THAT(store->Delete("twin").status(),
              StatusIs(absl::StatusCode::kFailedPrecondition, "ambiguous"));
  EXPECT_EQ(store->List().size(), 2u);
  // Deleting one by id makes the name unique again.
  ASSERT_TRUE(store->Delete(second).ok());
  EXPECT_EQ(store->Get("twin")->dataset_id(), first);
}

TEST_F(DatasetNamesTest, DeleteRemovesEveryVersionDurably) {
  std::string id;
  {
    std::unique_ptr<DatasetStore> store = Open();
    id = store->Create(CubicDataset(10), "gone")->dataset_id();
    ASSERT_TRUE(store->Append(id, CubicDataset(3, 2), std::nullopt).ok());
    ASSERT_TRUE(store->Create(CubicDataset(5), "kept").ok());
    EXPECT_EQ(*store->Delete("gone"), id);
    EXPECT_THAT(store->Get(id).status(),
                StatusIs(absl::StatusCode::kNotFound, ""));
    EXPECT_THAT(store->Delete(id).status(),
                StatusIs(absl::StatusCode::kNotFound, ""));
    // The name is free again.
    EXPECT_TRUE(store->Create(CubicDataset(4), "gone").ok());
  }
  int files_of_id = 0;
  for (const auto& entry :
       std::filesystem::directory_iterator(dir_.path() + "/datasets")) {
    files_of_id += entry.path().filename().string().rfind(id, 0) == 0 ? 1 : 0;
  }
  EXPECT_EQ(files_of_id, 0);
  std::unique_ptr<DatasetStore> store = Open();
  EXPECT_THAT(store->Get(id).status(),
              StatusIs(absl::StatusCode::kNotFound, ""));
  EXPECT_EQ(store->size(), 2);
}

TEST_F(DatasetNamesTest, DependentsAreSnapshotsAndQueuedOrRunningJobs) {
  std::unique_ptr<DatasetStore> datasets = Open();
  std::unique_ptr<SnapshotStore> snapshots =
      *SnapshotStore::Open(dir_.path() + "/snapshots");
  std::unique_ptr<JobStore> jobs = *JobStore::Open(dir_.path() + "/jobs");
  const std::string id =
      datasets->Create(CubicDataset(10), "used")->dataset_id();
  EXPECT_TRUE(CheckDatasetUnused(id, *snapshots, *jobs).ok());

  // TinySnapshot records ds-00000000000000aa as its dataset.
  const std::string snapshot_id =
      snapshots->Create(TinySnapshot(1))->snapshot_id();
  EXPECT_THAT(CheckDatasetUnused("ds-00000000000000aa", *snapshots, *jobs),
              StatusIs(absl::StatusCode::kFailedPrecondition,
                       "dataset_id 'ds-00000000000000aa' is used by "
                       "snapshots " +
                           snapshot_id));
  store::JobRecord job;
  job.set_dataset_id(id);
  job.set_method("slang");
  const std::string queued = jobs->Create(job)->job_id();
  EXPECT_THAT(CheckDatasetUnused(id, *snapshots, *jobs),
              StatusIs(absl::StatusCode::kFailedPrecondition,
                       "is used by queued or running jobs " + queued));
  // A finished job does not hold the dataset.
  ASSERT_TRUE(jobs->Update(queued,
                           [](store::JobRecord* r) {
                             r->set_state(store::JobRecord::SUCCEEDED);
                             return true;
                           })
                  .ok());
  EXPECT_TRUE(CheckDatasetUnused(id, *snapshots, *jobs).ok());
}

}  // namespace
}  // namespace bnn::server
