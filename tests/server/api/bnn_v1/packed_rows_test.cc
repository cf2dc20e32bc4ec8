// Packed tensors on the wire, through the real server: a packed request
// (float64 or float32) and a packed response give bit for bit what the
// per-row forms give, for Predict, Acquire and uploads; a bad shape, dtype,
// length or mix of forms is INVALID_ARGUMENT naming the field, and the row
// limits hold for packed rows (RESOURCE_EXHAUSTED).
#include <cmath>
#include <string>
#include <vector>

#include <gmock/gmock.h>
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>

#include "tests/server/service_fixture.h"

namespace bnn::server {
namespace {

using ::bnn::server::testutil::CubicDataset;
using ::bnn::server::testutil::GrpcStatusIs;
using ::bnn::server::testutil::ServiceTest;
using ::bnn::server::testutil::TwoClasses;
using ::bnn::server::testutil::UploadMessages;
using ::testing::ElementsAreArray;

using PackedRowsTest = ServiceTest;

// Rows exactly representable in float32, so both dtypes carry them alike.
const std::vector<std::vector<double>> kRows = {{-1.5}, {-0.25}, {0.0},
                                                {0.75}, {2.0},   {3.125}};

v1::Tensor Packed(const std::vector<std::vector<double>>& rows, bool f32) {
  v1::Tensor tensor;
  tensor.add_shape(static_cast<int64_t>(rows.size()));
  tensor.add_shape(static_cast<int64_t>(rows[0].size()));
  for (const auto& row : rows) {
    for (const double v : row) {
      if (f32) {
        tensor.add_f32(static_cast<float>(v));
      } else {
        tensor.add_f64(v);
      }
    }
  }
  return tensor;
}

v1::PredictRequest PerRow(const std::string& snapshot_id,
                          const std::vector<std::vector<double>>& rows) {
  v1::PredictRequest request;
  request.set_snapshot_id(snapshot_id);
  for (const auto& x : rows) {
    request.add_rows()->mutable_x()->Add(x.begin(), x.end());
  }
  request.set_seed(11);
  request.set_num_samples(8);
  return request;
}

std::vector<double> Values(const v1::Tensor& tensor) {
  return std::vector<double>(tensor.f64().begin(), tensor.f64().end());
}

TEST_F(PackedRowsTest, RegressionPackedEqualsPerRowBitForBit) {
  const std::string snapshot_id =
      TrainedSnapshot(CubicDataset(20), v1::TASK_REGRESSION);
  v1::PredictRequest per_row = PerRow(snapshot_id, kRows);
  per_row.add_quantiles(0.1);
  per_row.add_quantiles(0.9);
  per_row.set_per_sample(true);
  v1::PredictResponse expected;
  ASSERT_TRUE(Predict(per_row, &expected).ok());

  for (const bool f32 : {false, true}) {
    v1::PredictRequest packed = per_row;
    packed.clear_rows();
    *packed.mutable_features() = Packed(kRows, f32);
    // Packed in, per row out: the same message.
    v1::PredictResponse response;
    ASSERT_TRUE(Predict(packed, &response).ok());
    EXPECT_EQ(response.SerializeAsString(), expected.SerializeAsString());
    // Packed out: the same numbers, as arrays.
    packed.set_packed_response(true);
    ASSERT_TRUE(Predict(packed, &response).ok());
    EXPECT_EQ(response.predictions_size(), 0);
    const v1::PackedPredictions& out = response.packed();
    const int n = static_cast<int>(kRows.size());
    EXPECT_THAT(out.mean().shape(), ElementsAreArray({n}));
    EXPECT_THAT(out.quantiles().shape(), ElementsAreArray({n, 2}));
    EXPECT_THAT(out.sample_outputs().shape(), ElementsAreArray({8, n}));
    for (int i = 0; i < n; ++i) {
      const v1::RowPrediction& row = expected.predictions(i);
      EXPECT_EQ(out.mean().f64(i), row.mean());
      EXPECT_EQ(out.variance().f64(i), row.variance());
      EXPECT_EQ(out.epistemic_variance().f64(i), row.epistemic_variance());
      EXPECT_EQ(out.aleatoric_variance().f64(i), row.aleatoric_variance());
      EXPECT_EQ(out.quantiles().f64(2 * i), row.quantiles(0));
      EXPECT_EQ(out.quantiles().f64(2 * i + 1), row.quantiles(1));
      for (int s = 0; s < 8; ++s) {
        EXPECT_EQ(out.sample_outputs().f64(s * n + i), row.sample_outputs(s));
      }
    }
    EXPECT_FALSE(out.has_probabilities());
  }
}

TEST_F(PackedRowsTest, ClassificationPackedEqualsPerRowBitForBit) {
  const std::string snapshot_id =
      TrainedSnapshot(TwoClasses(), v1::TASK_CLASSIFICATION);
  const std::vector<std::vector<double>> rows = {
      {0.5, 1.0}, {-3, 2}, {1.25, -0.5}};
  v1::PredictRequest per_row = PerRow(snapshot_id, rows);
  v1::PredictResponse expected;
  ASSERT_TRUE(Predict(per_row, &expected).ok());
  v1::PredictRequest packed = per_row;
  packed.clear_rows();
  *packed.mutable_features() = Packed(rows, /*f32=*/false);
  packed.set_packed_response(true);
  v1::PredictResponse response;
  ASSERT_TRUE(Predict(packed, &response).ok());
  const v1::PackedPredictions& out = response.packed();
  EXPECT_THAT(out.probabilities().shape(), ElementsAreArray({3, 2}));
  std::vector<double> probabilities, entropy, mi, expected_entropy;
  for (const v1::RowPrediction& row : expected.predictions()) {
    probabilities.insert(probabilities.end(), row.probabilities().begin(),
                         row.probabilities().end());
    entropy.push_back(row.entropy());
    mi.push_back(row.mutual_information());
    expected_entropy.push_back(row.expected_entropy());
  }
  EXPECT_EQ(Values(out.probabilities()), probabilities);
  EXPECT_EQ(Values(out.entropy()), entropy);
  EXPECT_EQ(Values(out.mutual_information()), mi);
  EXPECT_EQ(Values(out.expected_entropy()), expected_entropy);
  EXPECT_EQ(out.predicted_class().f64(0),
            expected.predictions(0).predicted_class());
  EXPECT_FALSE(out.has_mean());
}

TEST_F(PackedRowsTest, BadPackedPredictRequestsNameTheField) {
  const std::string snapshot_id =
      TrainedSnapshot(CubicDataset(20), v1::TASK_REGRESSION);
  v1::PredictResponse response;
  const auto packed = [&](const v1::Tensor& tensor) {
    v1::PredictRequest request = PerRow(snapshot_id, {});
    *request.mutable_features() = tensor;
    return request;
  };
  // Both forms.
  v1::PredictRequest both = PerRow(snapshot_id, kRows);
  *both.mutable_features() = Packed(kRows, false);
  EXPECT_THAT(
      Predict(both, &response),
      GrpcStatusIs(grpc::StatusCode::INVALID_ARGUMENT, "rows and features"));
  // Neither.
  EXPECT_THAT(Predict(PerRow(snapshot_id, {}), &response),
              GrpcStatusIs(grpc::StatusCode::INVALID_ARGUMENT,
                           "rows is empty and features is not set"));
  v1::Tensor tensor = Packed(kRows, false);
  tensor.clear_shape();
  tensor.add_shape(6);
  EXPECT_THAT(Predict(packed(tensor), &response),
              GrpcStatusIs(grpc::StatusCode::INVALID_ARGUMENT,
                           "features.shape has 1 dimensions"));
  tensor = Packed(kRows, false);
  tensor.set_shape(0, 3);
  tensor.set_shape(1, 2);
  EXPECT_THAT(Predict(packed(tensor), &response),
              GrpcStatusIs(grpc::StatusCode::INVALID_ARGUMENT,
                           "features.shape[1] = 2; the snapshot has 1"));
  tensor = Packed(kRows, false);
  tensor.set_shape(0, 7);
  EXPECT_THAT(Predict(packed(tensor), &response),
              GrpcStatusIs(grpc::StatusCode::INVALID_ARGUMENT,
                           "features.f64 has 6 values; features.shape [7, 1] "
                           "needs 7"));
  tensor = Packed(kRows, false);
  tensor.add_f32(1.0f);
  EXPECT_THAT(Predict(packed(tensor), &response),
              GrpcStatusIs(grpc::StatusCode::INVALID_ARGUMENT,
                           "features.f64 and features.f32 are both set"));
  tensor = Packed(kRows, false);
  tensor.set_f64(4, std::nan(""));
  EXPECT_THAT(Predict(packed(tensor), &response),
              GrpcStatusIs(grpc::StatusCode::INVALID_ARGUMENT,
                           "features[4, 0] is NaN"));
  tensor = Packed(kRows, false);
  tensor.set_shape(0, -1);
  EXPECT_THAT(Predict(packed(tensor), &response),
              GrpcStatusIs(grpc::StatusCode::INVALID_ARGUMENT,
                           "features.shape[0] = -1 is negative"));
  // The row limit is checked on the shape, before the values.
  tensor = Packed(kRows, false);
  tensor.set_shape(0, options_.limits.max_predict_rows + 1);
  EXPECT_THAT(
      Predict(packed(tensor), &response),
      GrpcStatusIs(grpc::StatusCode::RESOURCE_EXHAUSTED, "--max-predict-rows"));
}

TEST_F(PackedRowsTest, PackedAcquirePoolEqualsPerRowPool) {
  const std::string snapshot_id =
      TrainedSnapshot(CubicDataset(20), v1::TASK_REGRESSION);
  v1::AcquireRequest request;
  request.set_snapshot_id(snapshot_id);
  request.set_k(3);
  request.set_heuristic("max_variance");
  request.set_num_samples(8);
  request.set_seed(2);
  for (const auto& x : kRows) {
    request.mutable_rows()->add_rows()->mutable_x()->Add(x.begin(), x.end());
  }
  v1::AcquireResponse expected, response;
  ASSERT_TRUE(Acquire(request, &expected).ok());
  request.mutable_rows()->clear_rows();
  *request.mutable_rows()->mutable_features() = Packed(kRows, true);
  ASSERT_TRUE(Acquire(request, &response).ok());
  EXPECT_EQ(response.SerializeAsString(), expected.SerializeAsString());
  // Both forms in the pool.
  request.mutable_rows()->add_rows()->add_x(1.0);
  EXPECT_THAT(Acquire(request, &response),
              GrpcStatusIs(grpc::StatusCode::INVALID_ARGUMENT,
                           "rows.rows and rows.features are both set"));
}

TEST_F(PackedRowsTest, PackedUploadStoresTheSameDataset) {
  Dataset data = CubicDataset(30);
  std::vector<v1::UploadDatasetRequest> per_row =
      UploadMessages(data, v1::TASK_REGRESSION);
  v1::UploadDatasetResponse expected, response;
  ASSERT_TRUE(Upload(per_row, &expected).ok());
  // Two packed chunks of 20 and 10 rows.
  std::vector<v1::UploadDatasetRequest> packed = {per_row[0]};
  packed[0].mutable_header()->set_name("packed");
  for (const auto& [begin, count] : {std::pair{0, 20}, std::pair{20, 10}}) {
    v1::RowChunk* chunk = packed.emplace_back().mutable_chunk();
    chunk->mutable_features()->add_shape(count);
    chunk->mutable_features()->add_shape(1);
    chunk->mutable_targets()->add_shape(count);
    for (int i = begin; i < begin + count; ++i) {
      chunk->mutable_features()->add_f64(data.features[i]);
      chunk->mutable_targets()->add_f64(data.targets[i]);
    }
  }
  ASSERT_TRUE(Upload(packed, &response).ok());
  EXPECT_EQ(response.dataset().hash(), expected.dataset().hash());
  EXPECT_EQ(response.dataset().num_rows(), 30);

  // Features without targets, and targets of the wrong length.
  packed[0].mutable_header()->set_name("bad");
  std::vector<v1::UploadDatasetRequest> bad = packed;
  bad[1].mutable_chunk()->clear_targets();
  EXPECT_THAT(Upload(bad, &response),
              GrpcStatusIs(grpc::StatusCode::INVALID_ARGUMENT,
                           "features and targets go together"));
  bad = packed;
  bad[2].mutable_chunk()->mutable_targets()->set_shape(0, 9);
  EXPECT_THAT(Upload(bad, &response),
              GrpcStatusIs(grpc::StatusCode::INVALID_ARGUMENT,
                           "targets.shape[0] = 9; features has 10 rows"));
  bad = packed;
  bad[2].mutable_chunk()->mutable_targets()->set_f64(3, INFINITY);
  EXPECT_THAT(
      Upload(bad, &response),
      GrpcStatusIs(grpc::StatusCode::INVALID_ARGUMENT, "targets[23] is +Inf"));
  // The upload row limit counts packed rows across chunks.
  bad = packed;
  v1::Tensor* features = bad[2].mutable_chunk()->mutable_features();
  features->set_shape(0, options_.limits.max_upload_rows);
  EXPECT_THAT(
      Upload(bad, &response),
      GrpcStatusIs(grpc::StatusCode::RESOURCE_EXHAUSTED, "--max-upload-rows"));
}

}  // namespace
}  // namespace bnn::server
