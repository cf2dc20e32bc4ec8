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
#include "bnn/status.h"
#include "bnn/train/trainer.h"

#include "server/store/dataset_file.h"
#include "server/store/ids.h"
#include "server/store/job_store.h"
#include "server/store/snapshot_store.h"
#include "tests/server/server_test_util.h"
#include "tests/server/store/store_dir.h"

namespace bnn::server {
namespace {

using ::bnn::server::testutil::CubicDataset;
using ::bnn::server::testutil::ReadFileOrEmpty;
using ::bnn::server::testutil::StatusIs;
using ::bnn::server::testutil::StoreDir;
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
  // Reopens the data directory (verifying its blobs) and the store on it.
  DatasetStore* Open() {
    store_.reset();
    dir_.Reopen();
    store_ = std::make_unique<DatasetStore>(dir_.metadata(), dir_.blobs());
    return store_.get();
  }
  // The blob holding the rows of version `version` of `id`.
  std::string PathOf(const std::string& id, int version = 1) {
    const absl::StatusOr<DatasetVersionRecord> record = dir_.metadata()->Read(
        [&](MetadataReader& r) { return r.GetDataset(id, version); });
    EXPECT_TRUE(record.ok()) << record.status();
    return record.ok() ? *dir_.blobs()->PathOf(record->rows_blob) : "";
  }
  // Replaces a blob's bytes in place (no longer matching its name, as a
  // disk's corruption would; the next Open() quarantines it).
  static void Overwrite(const std::string& path, const std::string& bytes) {
    std::filesystem::remove(path);
    std::ofstream(path, std::ios::binary | std::ios::trunc) << bytes;
  }
  // The files under blobs/ (objects, quarantine and temporaries).
  int NumBlobFiles() const {
    int files = 0;
    for (const auto& entry : std::filesystem::recursive_directory_iterator(
             temp_.path() + "/data/blobs")) {
      if (entry.is_regular_file()) ++files;
    }
    return files;
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

  TempDir temp_;
  StoreDir dir_{temp_.path() + "/data"};
  std::unique_ptr<DatasetStore> store_;
};

TEST_F(DatasetStoreTest, CreateGetLoadRoundTrip) {
  DatasetStore* store = Open();
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
    DatasetStore* store = Open();
    first_id = store->Create(CubicDataset(30), "cubic")->dataset_id();
    absl::SleepFor(absl::Milliseconds(2));  // creation times are in ms
    second_id = store->Create(Classification(), "labels")->dataset_id();
  }
  DatasetStore* store = Open();
  EXPECT_EQ(store->size(), 2);
  std::vector<std::string> listed;
  for (const auto& meta : store->List()) listed.push_back(meta.dataset_id());
  EXPECT_THAT(listed, ElementsAre(first_id, second_id));  // oldest first
  EXPECT_EQ(store->Load(first_id)->features, CubicDataset(30).features);
}

TEST_F(DatasetStoreTest, UnknownIdIsNotFound) {
  DatasetStore* store = Open();
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
    DatasetStore* store = Open();
    id = store->Create(CubicDataset(30), "cubic")->dataset_id();
    store->Create(Classification(), "healthy").IgnoreError();
    FlipByte(PathOf(id), 100);  // inside the payload
    EXPECT_THAT(store->Load(id).status(),
                StatusIs(absl::StatusCode::kDataLoss, "checksum mismatch"));
  }
  DatasetStore* store = Open();
  // Its blob is quarantined: not "not found", but the dataset and the
  // cause, and it is not listed.
  ASSERT_EQ(dir_.dir().blob_report.quarantined.size(), 1u);
  EXPECT_THAT(store->Get(id).status(),
              StatusIs(absl::StatusCode::kDataLoss,
                       "dataset_id '" + id + "' version 1 cannot be read"));
  EXPECT_THAT(store->Get(id).status(),
              StatusIs(absl::StatusCode::kDataLoss, "quarantined"));
  EXPECT_THAT(store->Load(id).status(),
              StatusIs(absl::StatusCode::kDataLoss, "quarantined"));
  EXPECT_THAT(store->OpenRows(id).status(),
              StatusIs(absl::StatusCode::kDataLoss, "quarantined"));
  EXPECT_EQ(store->size(), 2);
  ASSERT_EQ(store->List().size(), 1u);
  EXPECT_EQ(store->List()[0].name(), "healthy");
}

TEST_F(DatasetStoreTest, TruncatedFileIsDataLoss) {
  std::string id;
  {
    DatasetStore* store = Open();
    id = store->Create(CubicDataset(30), "cubic")->dataset_id();
  }
  const std::string path = PathOf(id);
  const std::string bytes = ReadFileOrEmpty(path);
  Overwrite(path, bytes.substr(0, bytes.size() / 2));
  EXPECT_THAT(store_->Load(id).status(),
              StatusIs(absl::StatusCode::kDataLoss, "truncated"));
  EXPECT_THAT(Open()->Get(id).status(),
              StatusIs(absl::StatusCode::kDataLoss, "quarantined"));
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
  DatasetVersionRecord record{file.meta(), ""};
  record.meta.set_version(1);
  record.rows_blob = *dir_.blobs()->Put(
      EncodeRecord({"BNNDSET1", 1}, file.SerializeAsString()));
  ASSERT_TRUE(dir_.metadata()
                  ->Write([&](MetadataTransaction& tx) {
                    return tx.CreateDataset(record);
                  })
                  .ok());
  EXPECT_THAT(Open()->Load(id).status(),
              StatusIs(absl::StatusCode::kDataLoss,
                       "holds 1 rows; its metadata says 5"));
}

// Found by store_fuzz: a version whose file has another schema than
// version 1 (here version 1's metadata gained class values) made Load fail
// with InvalidArgument, blaming the request for a corrupt store.
TEST_F(DatasetStoreTest, VersionsOfAnotherSchemaAreDataLoss) {
  std::string id;
  {
    DatasetStore* store = Open();
    id = ThreeVersions(store);
    const std::string path = PathOf(id);
    const DatasetFileContents v1 = *ReadDatasetFile(path);
    store::DatasetFile file;
    *file.mutable_meta() = v1.meta;
    file.mutable_meta()->add_class_values(1.0);
    file.mutable_features()->Add(v1.rows.features.begin(),
                                 v1.rows.features.end());
    file.mutable_targets()->Add(v1.rows.targets.begin(), v1.rows.targets.end());
    Overwrite(path, EncodeRecord({"BNNDSET1", 1}, file.SerializeAsString()));
  }
  DatasetStore* store = store_.get();  // not reopened: that would quarantine
  EXPECT_TRUE(store->Load(id, 1).ok());
  EXPECT_THAT(store->Load(id, 2).status(),
              StatusIs(absl::StatusCode::kDataLoss,
                       absl::StrCat(PathOf(id, 2),
                                    ": its rows do not extend version 1")));
}

TEST_F(DatasetStoreTest, AppendsCreateImmutableVersions) {
  DatasetStore* store = Open();
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

  DatasetStore* reopened = Open();
  EXPECT_EQ(reopened->Get(v1.dataset_id())->SerializeAsString(),
            v2->SerializeAsString());
  EXPECT_EQ(reopened->Load(v1.dataset_id(), 2)->features, both.features);
  ASSERT_EQ(reopened->List().size(), 1u);
  EXPECT_EQ(reopened->List()[0].version(), 2);
}

TEST_F(DatasetStoreTest, AppendedLabelsKeepTheClasses) {
  DatasetStore* store = Open();
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
  DatasetStore* store = Open();
  const store::DatasetMeta v1 = *store->Create(CubicDataset(10), "cubic");
  ASSERT_TRUE(
      store->Append(v1.dataset_id(), AppendOf(v1, CubicDataset(2)), 1).ok());
  EXPECT_THAT(
      store->Append(v1.dataset_id(), AppendOf(v1, CubicDataset(2)), 1).status(),
      StatusIs(absl::StatusCode::kFailedPrecondition,
               "dataset_id '" + v1.dataset_id() +
                   "' is at version 2; the append expected version 1"));
  EXPECT_EQ(store->Get(v1.dataset_id())->version(), 2);
  EXPECT_THAT(store->Get(v1.dataset_id(), 3).status(),
              StatusIs(absl::StatusCode::kNotFound, "has no version 3"));
  EXPECT_EQ(NumBlobFiles(), 2);
}

TEST_F(DatasetStoreTest, BadAppendsStoreNothing) {
  DatasetStore* store = Open();
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
  DatasetStore* store = Open();
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
    DatasetStore* store = Open();
    id = ThreeVersions(store);
  }
  FlipByte(PathOf(id, 2), 20);
  DatasetStore* store = Open();
  EXPECT_EQ(store->Load(id, 1)->num_rows(), 10);
  EXPECT_THAT(store->Get(id, 2).status(),
              StatusIs(absl::StatusCode::kDataLoss,
                       "version 2 cannot be read: the rows of version 2"));
  EXPECT_THAT(store->Get(id, 3).status(),
              StatusIs(absl::StatusCode::kDataLoss,
                       "version 3 cannot be read: the rows of version 2"));
  EXPECT_THAT(store->Get(id).status(),
              StatusIs(absl::StatusCode::kDataLoss, "version 3"));
  EXPECT_THAT(store->Load(id).status(),
              StatusIs(absl::StatusCode::kDataLoss, "version 3"));
  EXPECT_EQ(store->size(), 1);
  EXPECT_THAT(store->List(), IsEmpty());
}

TEST_F(DatasetStoreTest, MissingVersionFileBreaksLaterOnes) {
  std::string id;
  {
    DatasetStore* store = Open();
    id = ThreeVersions(store);
  }
  std::filesystem::remove(PathOf(id, 2));
  DatasetStore* store = Open();
  EXPECT_TRUE(store->Load(id, 1).ok());
  EXPECT_THAT(
      store->Load(id).status(),
      StatusIs(absl::StatusCode::kDataLoss, "version 2 cannot be read: blob"));
}

TEST_F(DatasetStoreTest, RowsPoolReadsEveryVersionInPlace) {
  DatasetStore* store = Open();
  const std::string id = ThreeVersions(store);
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
  DatasetStore* store = Open();
  const std::string id = ThreeVersions(store);
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
  DatasetStore* store = Open();
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
  EXPECT_EQ(NumBlobFiles(), 1);
}

// Raw classification labels written as they arrive are encoded at the end.
TEST_F(DatasetStoreTest, StreamedLabelsAreEncoded) {
  DatasetStore* store = Open();
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
  DatasetStore* store = Open();
  {
    std::unique_ptr<DatasetFileWriter> writer = *store->NewVersionWriter(1);
    ASSERT_TRUE(writer->AddRows({1.0, 2.0}, {3.0, 4.0}).ok());
  }
  EXPECT_EQ(NumBlobFiles(), 0);
}

// An append costs its own rows: the hash continues from the state kept with
// the latest version, so the earlier versions' files are not read at all
// (here one is even corrupt, which a read would report).
TEST_F(DatasetStoreTest, AppendDoesNotReadEarlierVersions) {
  DatasetStore* store = Open();
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
    DatasetStore* store = Open();
    id = store->Create(first, "cubic")->dataset_id();
  }
  // Version 1 without its state, as an older server wrote it (its record
  // and its file).
  store::DatasetFile file;
  ASSERT_TRUE(
      ReadRecordFile(PathOf(id), {"BNNDSET1", 1, "dataset file"}, &file).ok());
  file.mutable_meta()->clear_hash_state();
  ASSERT_TRUE(dir_.metadata()
                  ->Write([&](MetadataTransaction& tx) -> absl::Status {
                    BNN_ASSIGN_OR_RETURN(DatasetVersionRecord record,
                                         tx.GetDataset(id, std::nullopt));
                    record.meta = file.meta();
                    BNN_RETURN_IF_ERROR(tx.DeleteDataset(id));
                    return tx.CreateDataset(record);
                  })
                  .ok());
  DatasetStore* store = Open();
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
  DatasetStore* store = Open();
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
using ::bnn::server::testutil::StoreDir;
using ::bnn::server::testutil::TempDir;
using ::bnn::server::testutil::TinySnapshot;

class DatasetNamesTest : public ::testing::Test {
 protected:
  DatasetStore* Open() {
    store_.reset();
    dir_.Reopen();
    store_ = std::make_unique<DatasetStore>(dir_.metadata(), dir_.blobs());
    return store_.get();
  }

  TempDir temp_;
  StoreDir dir_{temp_.path() + "/data"};
  std::unique_ptr<DatasetStore> store_;
};

TEST_F(DatasetNamesTest, NamesAreUniqueAndWorkAsIds) {
  DatasetStore* store = Open();
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

TEST_F(DatasetNamesTest, DeleteRemovesEveryVersionDurably) {
  std::string id;
  {
    DatasetStore* store = Open();
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
  // Only the blobs of "kept" and the new "gone" are left.
  int blobs = 0;
  for (const auto& entry : std::filesystem::recursive_directory_iterator(
           temp_.path() + "/data/blobs")) {
    if (entry.is_regular_file()) ++blobs;
  }
  EXPECT_EQ(blobs, 2);
  DatasetStore* store = Open();
  EXPECT_EQ(dir_.dir().blobs_swept, 0);
  EXPECT_THAT(store->Get(id).status(),
              StatusIs(absl::StatusCode::kNotFound, ""));
  EXPECT_EQ(store->size(), 2);
}

TEST_F(DatasetNamesTest, DependentsAreSnapshotsAndQueuedOrRunningJobs) {
  DatasetStore* datasets = Open();
  SnapshotStore snapshots(dir_.metadata(), dir_.blobs());
  std::unique_ptr<JobStore> jobs =
      *JobStore::Open(dir_.metadata(), temp_.path() + "/data/checkpoints");
  const auto unused = [&](const std::string& id) {
    return dir_.metadata()->Read(
        [&](MetadataReader& r) { return CheckDatasetUnused(id, r); });
  };
  const std::string id =
      datasets->Create(CubicDataset(10), "used")->dataset_id();
  EXPECT_TRUE(unused(id).ok());

  // TinySnapshot records ds-00000000000000aa as its dataset.
  const std::string snapshot_id =
      snapshots.Create(TinySnapshot(1))->snapshot_id();
  EXPECT_THAT(unused("ds-00000000000000aa"),
              StatusIs(absl::StatusCode::kFailedPrecondition,
                       "dataset_id 'ds-00000000000000aa' is used by "
                       "snapshots " +
                           snapshot_id));
  store::JobRecord job;
  job.set_dataset_id(id);
  job.set_method("slang");
  const std::string queued = jobs->Create(job)->job_id();
  EXPECT_THAT(unused(id),
              StatusIs(absl::StatusCode::kFailedPrecondition,
                       "is used by queued or running jobs " + queued));
  // Delete checks it in its transaction, unless forced.
  EXPECT_THAT(datasets->Delete(id, /*force=*/false).status(),
              StatusIs(absl::StatusCode::kFailedPrecondition, queued));
  EXPECT_TRUE(datasets->Get(id).ok());
  // A finished job does not hold the dataset.
  ASSERT_TRUE(jobs->Update(queued,
                           [](store::JobRecord* r) {
                             r->set_state(store::JobRecord::SUCCEEDED);
                             return true;
                           })
                  .ok());
  EXPECT_TRUE(unused(id).ok());
  EXPECT_EQ(*datasets->Delete(id, /*force=*/false), id);
}

}  // namespace
}  // namespace bnn::server
