#include "server/store/predictor_cache.h"

#include <memory>
#include <string>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "bnn/predict/predictor.h"

#include "tests/server/server_test_util.h"
#include "tests/server/store/store_dir.h"

namespace bnn::server {
namespace {

using ::bnn::server::testutil::StatusIs;
using ::bnn::server::testutil::StoreDir;
using ::bnn::server::testutil::TempDir;
using ::bnn::server::testutil::TinySnapshot;

PredictOptions Seeded(uint64_t seed) {
  PredictOptions options;
  options.num_samples = 16;
  options.seed = seed;
  return options;
}

class PredictorCacheTest : public ::testing::Test {
 protected:
  void SetUp() override {
    store_ = std::make_unique<SnapshotStore>(dir_.metadata(), dir_.blobs());
  }

  std::unique_ptr<PredictorCache> Cache(int capacity) {
    PredictorCache::Options options;
    options.capacity = capacity;
    absl::StatusOr<std::unique_ptr<PredictorCache>> cache =
        PredictorCache::Create(options, store_.get());
    EXPECT_TRUE(cache.ok()) << cache.status();
    return cache.ok() ? *std::move(cache) : nullptr;
  }

  TempDir temp_;
  StoreDir dir_{temp_.path() + "/data"};
  std::unique_ptr<SnapshotStore> store_;
};

TEST_F(PredictorCacheTest, PredictsFromAStoredSnapshot) {
  const Snapshot snapshot = TinySnapshot(1);
  const std::string id = store_->Create(snapshot)->snapshot_id();
  const absl::StatusOr<std::shared_ptr<const Predictor>> predictor =
      Cache(8)->Get(id);
  ASSERT_TRUE(predictor.ok()) << predictor.status();
  EXPECT_EQ((*predictor)->num_features(), 1);
  EXPECT_EQ((*predictor)->snapshot().method, "slang");
  EXPECT_EQ((*predictor)->snapshot().training.seed, snapshot.training.seed);
  const absl::StatusOr<Prediction> prediction =
      (*predictor)->Predict({0.5, -0.5}, 2, PredictOptions());
  ASSERT_TRUE(prediction.ok()) << prediction.status();
  EXPECT_EQ(prediction->mean.size(), 2u);
}

TEST_F(PredictorCacheTest, CachesPredictorsUpToCapacity) {
  std::unique_ptr<PredictorCache> cache = Cache(/*capacity=*/1);
  const std::string a = store_->Create(TinySnapshot(1))->snapshot_id();
  const std::string b = store_->Create(TinySnapshot(2))->snapshot_id();
  const std::shared_ptr<const Predictor> first = *cache->Get(a);
  EXPECT_EQ(*cache->Get(a), first);  // cached
  EXPECT_EQ(cache->GetSnapshot(a)->get(), &first->snapshot());
  const std::shared_ptr<const Predictor> other = *cache->Get(b);
  EXPECT_NE(other, first);
  // `a` was evicted by `b`; the old predictor stays usable by its holder.
  EXPECT_NE(*cache->Get(a), first);
  EXPECT_TRUE(first->Predict({0.0}, 1, PredictOptions()).ok());
}

TEST_F(PredictorCacheTest, CacheCountsAreReportedOnce) {
  std::unique_ptr<PredictorCache> cache = Cache(/*capacity=*/1);
  const std::string a = store_->Create(TinySnapshot(1))->snapshot_id();
  const std::string b = store_->Create(TinySnapshot(2))->snapshot_id();
  const std::shared_ptr<const Predictor> predictor = *cache->Get(a);
  ASSERT_TRUE(predictor->Predict({0.0}, 1, Seeded(7)).ok());
  ASSERT_TRUE(predictor->Predict({1.0}, 1, Seeded(7)).ok());
  ASSERT_TRUE(predictor->Predict({1.0}, 1, Seeded(8)).ok());
  PredictorCache::CacheCounts counts = cache->TakeCacheCounts();
  EXPECT_EQ(counts.hits, 1);
  EXPECT_EQ(counts.misses, 2);
  counts = cache->TakeCacheCounts();
  EXPECT_EQ(counts.hits + counts.misses, 0);
  // Lookups made before an eviction are still reported.
  ASSERT_TRUE(predictor->Predict({1.0}, 1, Seeded(8)).ok());
  ASSERT_TRUE(cache->Get(b).ok());
  counts = cache->TakeCacheCounts();
  EXPECT_EQ(counts.hits, 1);
  EXPECT_EQ(counts.misses, 0);
}

TEST_F(PredictorCacheTest, DeletedSnapshotIsNotFoundAndHoldersFinish) {
  std::unique_ptr<PredictorCache> cache = Cache(8);
  const std::string id = store_->Create(TinySnapshot(1))->snapshot_id();
  const std::shared_ptr<const Predictor> held = *cache->Get(id);
  ASSERT_TRUE(store_->Delete(id).ok());
  // Even before the eviction the store's index decides.
  EXPECT_THAT(cache->Get(id).status(),
              StatusIs(absl::StatusCode::kNotFound, "not found"));
  cache->Evict(id);
  EXPECT_THAT(cache->GetSnapshot(id).status(),
              StatusIs(absl::StatusCode::kNotFound, "not found"));
  EXPECT_TRUE(held->Predict({0.0}, 1, PredictOptions()).ok());
  cache->Evict(id);  // evicting an absent entry is a no-op
}

TEST_F(PredictorCacheTest, UnknownIdIsNotFound) {
  EXPECT_THAT(Cache(8)->Get("snap-0000000000000000").status(),
              StatusIs(absl::StatusCode::kNotFound,
                       "snapshot_id 'snap-0000000000000000' not found"));
}

TEST_F(PredictorCacheTest, RejectsBadOptions) {
  PredictorCache::Options options;
  options.capacity = 0;
  EXPECT_THAT(
      PredictorCache::Create(options, store_.get()).status(),
      StatusIs(absl::StatusCode::kInvalidArgument, "capacity 0 must be >= 1"));
  options.capacity = 1;
  options.predictor.max_samples = 0;
  EXPECT_FALSE(PredictorCache::Create(options, store_.get()).ok());
}

}  // namespace
}  // namespace bnn::server
