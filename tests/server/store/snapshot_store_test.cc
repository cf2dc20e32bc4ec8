#include "server/store/snapshot_store.h"

#include <fstream>
#include <memory>
#include <string>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "bnn/methods/registry.h"
#include "bnn/train/trainer.h"

#include "server/store/ids.h"
#include "tests/server/server_test_util.h"

namespace bnn::server {
namespace {

using ::bnn::server::testutil::CubicDataset;
using ::bnn::server::testutil::ReadFileOrEmpty;
using ::bnn::server::testutil::StatusIs;
using ::bnn::server::testutil::TempDir;

Snapshot TinySnapshot(uint64_t seed) {
  TrainRequest request;
  request.method = "slang";
  request.hidden_sizes = {4};
  request.params = {{"batch_size", "10"}, {"epochs", "1"}};
  request.options.seed = seed;
  absl::StatusOr<Snapshot> snapshot =
      Train(request, CubicDataset(20), MethodRegistry::Builtin());
  EXPECT_TRUE(snapshot.ok()) << snapshot.status();
  return *std::move(snapshot);
}

class SnapshotStoreTest : public ::testing::Test {
 protected:
  std::unique_ptr<SnapshotStore> Open(int cache_capacity = 8) {
    SnapshotStore::Options options;
    options.cache_capacity = cache_capacity;
    absl::StatusOr<std::unique_ptr<SnapshotStore>> store =
        SnapshotStore::Open(dir_.path() + "/snapshots", options);
    EXPECT_TRUE(store.ok()) << store.status();
    return store.ok() ? *std::move(store) : nullptr;
  }
  std::string PathOf(const std::string& id) const {
    return dir_.path() + "/snapshots/" + id + ".snap";
  }

  TempDir dir_;
};

TEST_F(SnapshotStoreTest, CreateThenPredictAfterReopening) {
  const Snapshot snapshot = TinySnapshot(1);
  std::string id;
  {
    std::unique_ptr<SnapshotStore> store = Open();
    const absl::StatusOr<std::string> created = store->Create(snapshot);
    ASSERT_TRUE(created.ok()) << created.status();
    id = *created;
    EXPECT_TRUE(IsId(kSnapshotIdPrefix, id));
    EXPECT_EQ(store->size(), 1);
  }
  std::unique_ptr<SnapshotStore> store = Open();
  EXPECT_EQ(store->size(), 1);
  const absl::StatusOr<std::shared_ptr<const Predictor>> predictor =
      store->GetPredictor(id);
  ASSERT_TRUE(predictor.ok()) << predictor.status();
  EXPECT_EQ((*predictor)->num_features(), 1);
  EXPECT_EQ((*predictor)->snapshot().method, "slang");
  EXPECT_EQ((*predictor)->snapshot().training.seed, snapshot.training.seed);
  const absl::StatusOr<Prediction> prediction =
      (*predictor)->Predict({0.5, -0.5}, 2, PredictOptions());
  ASSERT_TRUE(prediction.ok()) << prediction.status();
  EXPECT_EQ(prediction->mean.size(), 2u);
}

TEST_F(SnapshotStoreTest, CachesPredictorsUpToCapacity) {
  std::unique_ptr<SnapshotStore> store = Open(/*cache_capacity=*/1);
  const std::string a = *store->Create(TinySnapshot(1));
  const std::string b = *store->Create(TinySnapshot(2));
  const std::shared_ptr<const Predictor> first = *store->GetPredictor(a);
  EXPECT_EQ(*store->GetPredictor(a), first);  // cached
  const std::shared_ptr<const Predictor> other = *store->GetPredictor(b);
  EXPECT_NE(other, first);
  // `a` was evicted by `b`; the old predictor stays usable by its holder.
  EXPECT_NE(*store->GetPredictor(a), first);
  EXPECT_TRUE(first->Predict({0.0}, 1, PredictOptions()).ok());
}

TEST_F(SnapshotStoreTest, UnknownIdIsNotFound) {
  EXPECT_THAT(Open()->GetPredictor("snap-0000000000000000").status(),
              StatusIs(absl::StatusCode::kNotFound,
                       "snapshot_id 'snap-0000000000000000' not found"));
}

TEST_F(SnapshotStoreTest, CorruptFileIsDataLoss) {
  std::string id;
  {
    std::unique_ptr<SnapshotStore> store = Open();
    id = *store->Create(TinySnapshot(1));
  }
  std::string bytes = ReadFileOrEmpty(PathOf(id));
  bytes[bytes.size() / 2] ^= 0x10;
  std::ofstream(PathOf(id), std::ios::binary | std::ios::trunc) << bytes;
  EXPECT_THAT(Open()->GetPredictor(id).status(),
              StatusIs(absl::StatusCode::kDataLoss,
                       "snapshot_id '" + id + "' cannot be loaded"));
}

TEST_F(SnapshotStoreTest, RejectsBadOptions) {
  SnapshotStore::Options options;
  options.cache_capacity = 0;
  EXPECT_THAT(SnapshotStore::Open(dir_.path(), options).status(),
              StatusIs(absl::StatusCode::kInvalidArgument, "cache_capacity"));
}

}  // namespace
}  // namespace bnn::server
