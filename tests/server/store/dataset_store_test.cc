#include "server/store/dataset_store.h"

#include <fstream>
#include <memory>
#include <string>

#include <absl/time/clock.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "bnn/train/trainer.h"

#include "server/store/ids.h"
#include "server/store/record_file.h"
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
                       PathOf(id) + ": record checksum mismatch"));
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

}  // namespace
}  // namespace bnn::server
