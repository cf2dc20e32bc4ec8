// A data directory written by bnn-server before the record format moved to
// bnn/io/record.h (tests/server/store/golden_data, made with
// `bnnctl upload` of 6 rows, `bnnctl append` of 1 row and `bnnctl train
// --method slang --hidden 2 --epochs 2 --seed 1 --param batch_size=7`) opens
// unchanged: every dataset version, job and snapshot reads back and serves.
#include <cmath>
#include <filesystem>
#include <memory>
#include <string>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "bnn/predict/predictor.h"

#include "server/server.h"
#include "tests/server/server_test_util.h"

namespace bnn::server {
namespace {

using ::bnn::server::testutil::TempDir;
using ::testing::ElementsAre;

constexpr char kDatasetId[] = "ds-d2f12dccf5712957";
constexpr char kJobId[] = "job-c5c7ec00269a648e";
constexpr char kSnapshotId[] = "snap-d50c100cac863123";

TEST(GoldenDataTest, OpensADataDirectoryOfTheEarlierFormat) {
  TempDir dir;
  // A copy: opening a store may rewrite records and deletes temporaries.
  std::filesystem::copy(
      std::string(BNN_SOURCE_DIR) + "/tests/server/store/golden_data",
      dir.path() + "/data", std::filesystem::copy_options::recursive);
  Server::Options options;
  options.data_dir = dir.path() + "/data";
  absl::StatusOr<std::unique_ptr<Server>> server = Server::Create(options);
  ASSERT_TRUE(server.ok()) << server.status();

  DatasetStore& datasets = (*server)->datasets();
  const absl::StatusOr<store::DatasetMeta> v1 = datasets.Get(kDatasetId, 1);
  ASSERT_TRUE(v1.ok()) << v1.status();
  EXPECT_EQ(v1->name(), "golden");
  EXPECT_EQ(v1->num_rows(), 6);
  const absl::StatusOr<Dataset> rows = datasets.Load(kDatasetId);
  ASSERT_TRUE(rows.ok()) << rows.status();
  EXPECT_THAT(rows->features, ElementsAre(-1, 0, 1, 2, -2, 0.5, 3));
  EXPECT_THAT(rows->targets, ElementsAre(-1, 0.1, 1.2, 7.9, -8.1, 0.2, 27.2));

  const absl::StatusOr<store::JobRecord> job = (*server)->jobs().Get(kJobId);
  ASSERT_TRUE(job.ok()) << job.status();
  EXPECT_EQ(job->state(), store::JobRecord::SUCCEEDED);
  EXPECT_EQ(job->snapshot_id(), kSnapshotId);
  EXPECT_EQ(job->dataset_version(), 2);

  const absl::StatusOr<store::SnapshotMeta> meta =
      (*server)->snapshots().GetMeta(kSnapshotId);
  ASSERT_TRUE(meta.ok()) << meta.status();
  EXPECT_EQ(meta->method(), "slang");
  EXPECT_EQ(meta->seed(), 1u);
  EXPECT_THAT(meta->hidden_sizes(), ElementsAre(2));
  const absl::StatusOr<std::shared_ptr<const Predictor>> predictor =
      (*server)->predictors().Get(kSnapshotId);
  ASSERT_TRUE(predictor.ok()) << predictor.status();
  EXPECT_EQ((*predictor)->snapshot().training.dataset_id, kDatasetId);
  PredictOptions predict;
  predict.num_samples = 10;
  predict.seed = 7;
  const absl::StatusOr<Prediction> prediction =
      (*predictor)->Predict({0.5}, 1, predict);
  ASSERT_TRUE(prediction.ok()) << prediction.status();
  EXPECT_TRUE(std::isfinite(prediction->mean[0]));
}

}  // namespace
}  // namespace bnn::server
