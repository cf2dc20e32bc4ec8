#include "server/api/bnn_v1/predict_request.h"

#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "tests/server/server_test_util.h"

namespace bnn::server {
namespace {

using ::bnn::server::testutil::StatusIs;
using ::testing::ElementsAre;
using ::testing::IsEmpty;

// Only the schema matters to the request checks.
Snapshot Regression() {
  Snapshot snapshot;
  snapshot.model.input_dim = 2;
  snapshot.task = Task::kRegression;
  return snapshot;
}

Snapshot ThreeClasses() {
  Snapshot snapshot = Regression();
  snapshot.task = Task::kMulticlass;
  snapshot.class_values = {1, 5, 7};
  return snapshot;
}

v1::PredictRequest TwoRows() {
  v1::PredictRequest request;
  request.set_snapshot_id("snap-00000000000000aa");
  for (const double x : {1.0, 2.0}) {
    v1::Features* row = request.add_rows();
    row->add_x(x);
    row->add_x(-x);
  }
  return request;
}

TEST(PredictRowsTest, RowMajor) {
  const absl::StatusOr<RowMatrix> rows =
      PredictRows(TwoRows(), Regression(), ServerLimits());
  ASSERT_TRUE(rows.ok()) << rows.status();
  EXPECT_THAT(rows->features, ElementsAre(1, -1, 2, -2));
  EXPECT_EQ(rows->num_rows, 2);
}

TEST(BuildPredictOptionsTest, CopiesTheRequest) {
  v1::PredictRequest request = TwoRows();
  request.set_seed(17);
  request.set_linearized(true);
  request.add_quantiles(0.05);
  request.add_quantiles(0.95);
  request.set_per_sample(true);
  const absl::StatusOr<PredictOptions> options =
      BuildPredictOptions(request, 2, Regression(), ServerLimits());
  ASSERT_TRUE(options.ok()) << options.status();
  EXPECT_EQ(options->num_samples, kDefaultPredictSamples);
  EXPECT_EQ(options->seed, 17u);
  EXPECT_TRUE(options->linearized);
  EXPECT_THAT(options->quantiles, ElementsAre(0.05, 0.95));
  EXPECT_TRUE(options->per_sample);
  EXPECT_TRUE(options->cache_samples);
}

// A drawn seed is one-shot: its samples stay out of the predictor's cache
// (issue 10, finding 10).
TEST(BuildPredictOptionsTest, DrawsASeedWhenNoneIsGivenAndDoesNotCacheIt) {
  const PredictOptions a =
      *BuildPredictOptions(TwoRows(), 2, Regression(), ServerLimits());
  const PredictOptions b =
      *BuildPredictOptions(TwoRows(), 2, Regression(), ServerLimits());
  EXPECT_NE(a.seed, b.seed);
  EXPECT_FALSE(a.cache_samples);
}

TEST(BuildPredictOptionsTest, ChecksRowsAndSamples) {
  EXPECT_TRUE(
      BuildPredictOptions(TwoRows(), 2, ThreeClasses(), ServerLimits()).ok());
  Snapshot wide = Regression();
  wide.model.input_dim = 3;
  EXPECT_THAT(PredictRows(TwoRows(), wide, ServerLimits()).status(),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       "rows[0].x has 2 values; the snapshot has 3 features"));
  v1::PredictRequest many = TwoRows();
  many.set_num_samples(5000);
  EXPECT_THAT(
      BuildPredictOptions(many, 2, Regression(), ServerLimits()).status(),
      StatusIs(absl::StatusCode::kResourceExhausted, "--max-predict-samples"));
}

TEST(BuildPredictOptionsTest, BoundsTheResponse) {
  ServerLimits limits;
  // 2 rows x (9 scalars + 3 probabilities + 100 samples x 3 probabilities)
  // doubles = 4992 bytes.
  limits.max_message_bytes = 4992;
  v1::PredictRequest request = TwoRows();
  request.set_num_samples(100);
  request.set_per_sample(true);
  EXPECT_TRUE(BuildPredictOptions(request, 2, ThreeClasses(), limits).ok());
  request.set_num_samples(101);
  EXPECT_THAT(BuildPredictOptions(request, 2, ThreeClasses(), limits).status(),
              StatusIs(absl::StatusCode::kResourceExhausted,
                       "the response would hold 2 rows x 315 values"));
  request.set_per_sample(false);
  EXPECT_TRUE(BuildPredictOptions(request, 2, ThreeClasses(), limits).ok());
}

TEST(ToPredictResponseTest, RegressionRowsWithQuantilesAndSamples) {
  Prediction p;
  p.num_rows = 2;
  p.num_samples = 3;
  p.mean = {1, 2};
  p.variance = {3, 4};
  p.epistemic_variance = {1, 1.5};
  p.aleatoric_variance = {2, 2.5};
  p.quantiles = {-1, 3, 0, 4};  // rows x 2 levels
  // Sample-major: sample s of row i at s * 2 + i.
  p.sample_outputs = {10, 20, 11, 21, 12, 22};
  PredictOptions options;
  options.seed = 9;
  options.quantiles = {0.1, 0.9};
  v1::PredictResponse response;
  ToPredictResponse(p, options, "snap-00000000000000aa", Regression(),
                    /*packed=*/false, &response);
  EXPECT_EQ(response.snapshot_id(), "snap-00000000000000aa");
  EXPECT_EQ(response.num_samples(), 3);
  EXPECT_EQ(response.seed(), 9u);
  EXPECT_THAT(response.class_values(), IsEmpty());
  ASSERT_EQ(response.predictions_size(), 2);
  const v1::RowPrediction& second = response.predictions(1);
  EXPECT_EQ(second.mean(), 2);
  EXPECT_EQ(second.variance(), 4);
  EXPECT_EQ(second.epistemic_variance(), 1.5);
  EXPECT_EQ(second.aleatoric_variance(), 2.5);
  EXPECT_THAT(second.quantiles(), ElementsAre(0, 4));
  EXPECT_THAT(second.sample_outputs(), ElementsAre(20, 21, 22));
  EXPECT_THAT(response.predictions(0).sample_outputs(),
              ElementsAre(10, 11, 12));
  EXPECT_THAT(second.probabilities(), IsEmpty());
}

TEST(ToPredictResponseTest, ClassificationRows) {
  Prediction p;
  p.num_rows = 2;
  p.num_samples = 2;
  p.num_classes = 3;
  p.probabilities = {0.2, 0.3, 0.5, 0.6, 0.3, 0.1};
  p.predicted_class = {7, 1};
  p.entropy = {1.0, 0.9};
  p.expected_entropy = {0.8, 0.7};
  p.mutual_information = {0.2, 0.2};
  p.variation_ratio = {0.5, 0.0};
  // Sample-major, 3 probabilities per (sample, row).
  p.sample_outputs = {0.1, 0.1, 0.8, 0.7, 0.2, 0.1,   // sample 0
                      0.3, 0.5, 0.2, 0.5, 0.4, 0.1};  // sample 1
  v1::PredictResponse response;
  ToPredictResponse(p, PredictOptions(), "snap-00000000000000aa",
                    ThreeClasses(), /*packed=*/false, &response);
  EXPECT_THAT(response.class_values(), ElementsAre(1, 5, 7));
  ASSERT_EQ(response.predictions_size(), 2);
  const v1::RowPrediction& first = response.predictions(0);
  EXPECT_THAT(first.probabilities(), ElementsAre(0.2, 0.3, 0.5));
  EXPECT_EQ(first.predicted_class(), 7);
  EXPECT_EQ(first.entropy(), 1.0);
  EXPECT_EQ(first.expected_entropy(), 0.8);
  EXPECT_EQ(first.mutual_information(), 0.2);
  EXPECT_EQ(first.variation_ratio(), 0.5);
  EXPECT_THAT(first.sample_outputs(),
              ElementsAre(0.1, 0.1, 0.8, 0.3, 0.5, 0.2));
  EXPECT_THAT(response.predictions(1).sample_outputs(),
              ElementsAre(0.7, 0.2, 0.1, 0.5, 0.4, 0.1));
  EXPECT_EQ(first.mean(), 0.0);
}

v1::AcquireRequest Acquisition() {
  v1::AcquireRequest request;
  request.set_k(3);
  request.set_heuristic("bald");
  return request;
}

TEST(BuildAcquireOptionsTest, CopiesTheRequest) {
  v1::AcquireRequest request = Acquisition();
  request.set_num_samples(32);
  request.set_seed(5);
  request.set_diversity_power(2.0);
  const absl::StatusOr<AcquireOptions> options =
      BuildAcquireOptions(request, 10, ServerLimits());
  ASSERT_TRUE(options.ok()) << options.status();
  EXPECT_EQ(options->k, 3);
  EXPECT_EQ(options->heuristic, AcquisitionHeuristic::kBald);
  EXPECT_EQ(options->num_samples, 32);
  EXPECT_EQ(options->seed, 5u);
  EXPECT_EQ(options->diversity_power, 2.0);
  EXPECT_TRUE(options->cache_samples);
  const AcquireOptions unseeded =
      *BuildAcquireOptions(Acquisition(), 10, ServerLimits());
  EXPECT_EQ(unseeded.num_samples, kDefaultPredictSamples);
  EXPECT_FALSE(unseeded.cache_samples);
}

TEST(BuildAcquireOptionsTest, ChecksEveryField) {
  v1::AcquireRequest request = Acquisition();
  request.set_k(0);
  EXPECT_THAT(BuildAcquireOptions(request, 10, ServerLimits()).status(),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       "k = 0 must be in [1, 10], the pool's rows"));
  request.set_k(11);
  EXPECT_THAT(BuildAcquireOptions(request, 10, ServerLimits()).status(),
              StatusIs(absl::StatusCode::kInvalidArgument, "k = 11"));
  request = Acquisition();
  request.set_heuristic("variance");
  EXPECT_THAT(BuildAcquireOptions(request, 10, ServerLimits()).status(),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       "unknown heuristic 'variance'; known heuristics: "
                       "max_variance, entropy, bald, margin, random"));
  request = Acquisition();
  request.set_num_samples(-2);
  EXPECT_THAT(BuildAcquireOptions(request, 10, ServerLimits()).status(),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       "num_samples = -2 must be >= 1"));
  request = Acquisition();
  request.set_diversity_power(-1);
  EXPECT_THAT(BuildAcquireOptions(request, 10, ServerLimits()).status(),
              StatusIs(absl::StatusCode::kInvalidArgument, "diversity_power"));
}

}  // namespace
}  // namespace bnn::server
