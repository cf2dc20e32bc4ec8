// Evaluate through the real server against a direct core computation on the
// exported snapshot with the same seed (equal to 1e-12), for regression and
// classification (with out-of-distribution rows), for every way of sending
// the rows (per row, packed, a stored dataset), and its rejections.
#include <cmath>
#include <memory>
#include <string>
#include <vector>

#include <gmock/gmock.h>
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>

#include "bnn/io/snapshot.h"
#include "bnn/predict/metrics.h"
#include "bnn/predict/predictor.h"

#include "tests/server/service_fixture.h"

namespace bnn::server {
namespace {

using ::bnn::server::testutil::CubicDataset;
using ::bnn::server::testutil::GrpcStatusIs;
using ::bnn::server::testutil::RowChunks;
using ::bnn::server::testutil::ServiceTest;
using ::bnn::server::testutil::TwoClasses;

constexpr int kSamples = 16;
constexpr uint64_t kSeed = 21;

class EvaluateTest : public ServiceTest {
 protected:
  grpc::Status Evaluate(const v1::EvaluateRequest& request,
                        v1::EvaluateResponse* response) {
    grpc::ClientContext context;
    return stub_->Evaluate(&context, request, response);
  }
  // The snapshot as the core sees it, from its exported bytes, computed in
  // the server's arithmetic (--predict-precision).
  std::unique_ptr<Predictor> CorePredictor(const std::string& snapshot_id) {
    std::string bytes;
    EXPECT_TRUE(Export(snapshot_id, &bytes).ok());
    absl::StatusOr<Snapshot> snapshot = DecodeSnapshot(bytes);
    EXPECT_TRUE(snapshot.ok()) << snapshot.status();
    PredictorOptions options;
    options.cache_bytes = 0;
    options.precision = options_.predict_precision;
    return *Predictor::Create(
        std::make_shared<const Snapshot>(*std::move(snapshot)), options);
  }
  static v1::EvaluateRequest Request(const std::string& snapshot_id,
                                     const Dataset& data) {
    v1::EvaluateRequest request;
    request.set_snapshot_id(snapshot_id);
    request.set_num_samples(kSamples);
    request.set_seed(kSeed);
    for (const v1::RowChunk& chunk : RowChunks(data, 1000)) {
      *request.mutable_rows() = chunk;
    }
    return request;
  }
};

// The rows of a one-feature `data` as one packed chunk (features and
// targets as arrays).
v1::RowChunk PackedRows(const Dataset& data) {
  v1::RowChunk rows;
  rows.mutable_features()->add_shape(data.num_rows());
  rows.mutable_features()->add_shape(1);
  rows.mutable_targets()->add_shape(data.num_rows());
  rows.mutable_features()->mutable_f64()->Add(data.features.begin(),
                                              data.features.end());
  rows.mutable_targets()->mutable_f64()->Add(data.targets.begin(),
                                             data.targets.end());
  return rows;
}

void ExpectClose(double got, double want) {
  EXPECT_NEAR(got, want, 1e-12 * (1 + std::abs(want)));
}

TEST_F(EvaluateTest, RegressionEqualsTheCoreInEveryForm) {
  const Dataset data = CubicDataset(25, /*seed=*/3);
  const std::string snapshot_id =
      TrainedSnapshot(CubicDataset(20), v1::TASK_REGRESSION);
  v1::EvaluateResponse response;
  const grpc::Status status = Evaluate(Request(snapshot_id, data), &response);
  ASSERT_TRUE(status.ok()) << status.error_message();

  const std::unique_ptr<Predictor> predictor = CorePredictor(snapshot_id);
  PredictOptions options;
  options.num_samples = kSamples;
  options.seed = kSeed;
  options.per_sample = true;
  const Prediction p =
      *predictor->Predict(data.features, data.num_rows(), options);
  const Snapshot& snap = predictor->snapshot();
  const double std = snap.standardization.target_std;
  const double ll =
      GaussianMixtureLogLikelihood(p.sample_outputs, kSamples, data.targets,
                                   snap.noise_precision / (std * std));
  ExpectClose(response.rmse(), Rmse(p.mean, data.targets));
  ExpectClose(response.log_likelihood(), ll);
  ExpectClose(response.nll(), -ll);
  EXPECT_EQ(response.task(), v1::TASK_REGRESSION);
  EXPECT_EQ(response.num_rows(), 25);
  EXPECT_EQ(response.num_samples(), kSamples);
  EXPECT_EQ(response.seed(), kSeed);
  EXPECT_FALSE(response.has_accuracy());
  EXPECT_FALSE(response.has_ece());
  EXPECT_EQ(response.reliability_size(), 0);

  // Packed rows: the same bits.
  v1::EvaluateRequest packed = Request(snapshot_id, data);
  *packed.mutable_rows() = PackedRows(data);
  v1::EvaluateResponse again;
  ASSERT_TRUE(Evaluate(packed, &again).ok());
  EXPECT_EQ(again.SerializeAsString(), response.SerializeAsString());

  // A stored dataset: the same bits.
  v1::EvaluateRequest stored = Request(snapshot_id, data);
  stored.set_dataset_id(UploadOrDie(data, v1::TASK_REGRESSION));
  ASSERT_TRUE(Evaluate(stored, &again).ok());
  EXPECT_EQ(again.SerializeAsString(), response.SerializeAsString());

  // OOD rows are for classifiers.
  v1::EvaluateRequest ood = Request(snapshot_id, data);
  ood.mutable_ood_rows()->add_rows()->add_x(1.0);
  EXPECT_THAT(
      Evaluate(ood, &again),
      GrpcStatusIs(grpc::StatusCode::INVALID_ARGUMENT, "regression model"));
}

TEST_F(EvaluateTest, ClassificationWithOodRowsEqualsTheCore) {
  const Dataset data = TwoClasses();
  const std::string snapshot_id =
      TrainedSnapshot(data, v1::TASK_CLASSIFICATION);
  v1::EvaluateRequest request = Request(snapshot_id, data);
  request.set_ece_bins(5);
  std::vector<double> ood_features;
  for (int i = 0; i < 12; ++i) {
    ood_features.push_back(0.3 * (i - 6));
    ood_features.push_back(8.0 + i);
  }
  v1::Tensor* ood = request.mutable_ood_rows()->mutable_features();
  ood->add_shape(12);
  ood->add_shape(2);
  ood->mutable_f64()->Add(ood_features.begin(), ood_features.end());
  v1::EvaluateResponse response;
  const grpc::Status status = Evaluate(request, &response);
  ASSERT_TRUE(status.ok()) << status.error_message();

  const std::unique_ptr<Predictor> predictor = CorePredictor(snapshot_id);
  PredictOptions options;
  options.num_samples = kSamples;
  options.seed = kSeed;
  const Prediction p =
      *predictor->Predict(data.features, data.num_rows(), options);
  const Prediction q = *predictor->Predict(ood_features, 12, options);
  // Labels 2 and 4 are classes 0 and 1.
  std::vector<double> labels;
  for (const double y : data.targets) labels.push_back(y == 4 ? 1 : 0);
  ExpectClose(response.accuracy(), Accuracy(p.probabilities, 2, labels));
  ExpectClose(response.nll(), LogLoss(p.probabilities, 2, labels));
  ExpectClose(response.brier(), Brier(p.probabilities, 2, labels));
  ExpectClose(response.ece(),
              ExpectedCalibrationError(p.probabilities, 2, labels, 5));
  const std::vector<ReliabilityBin> bins =
      ReliabilityDiagram(p.probabilities, 2, labels, 5);
  ASSERT_EQ(response.reliability_size(), 5);
  for (int b = 0; b < 5; ++b) {
    EXPECT_EQ(response.reliability(b).count(), bins[b].count);
    ExpectClose(response.reliability(b).mean_confidence(), bins[b].confidence);
    ExpectClose(response.reliability(b).accuracy(), bins[b].accuracy);
    ExpectClose(response.reliability(b).upper(), 0.2 * (b + 1));
  }
  const int n = static_cast<int>(data.num_rows());
  std::vector<double> entropy = p.entropy, mi = p.mutual_information;
  entropy.insert(entropy.end(), q.entropy.begin(), q.entropy.end());
  mi.insert(mi.end(), q.mutual_information.begin(), q.mutual_information.end());
  std::unique_ptr<bool[]> positive(new bool[n + 12]);
  for (int i = 0; i < n + 12; ++i) positive[i] = i >= n;
  ExpectClose(response.auroc_entropy(),
              Auroc(entropy, absl::MakeConstSpan(positive.get(), n + 12)));
  ExpectClose(response.auroc_mutual_information(),
              Auroc(mi, absl::MakeConstSpan(positive.get(), n + 12)));
  EXPECT_EQ(response.ood_rows(), 12);
  EXPECT_EQ(response.task(), v1::TASK_CLASSIFICATION);
  EXPECT_FALSE(response.has_rmse());
  EXPECT_FALSE(response.has_log_likelihood());
}

// Deadline admission (server/admission/compute_rate.h) covers Evaluate: once
// the server has computed an Evaluate of a size, the same call with a
// deadline far shorter than it took is refused before it computes, with a
// message naming the call.
TEST_F(EvaluateTest, ACallThatCannotFinishBeforeItsDeadlineIsRefused) {
  const std::string snapshot_id =
      TrainedSnapshot(CubicDataset(20), v1::TASK_REGRESSION);
  // Packed rows: the request parses as two arrays, so it reaches the handler
  // in milliseconds even under a sanitizer on a loaded machine.
  v1::EvaluateRequest request = Request(snapshot_id, CubicDataset(20, 4));
  *request.mutable_rows() = PackedRows(CubicDataset(20000, 4));
  request.set_num_samples(256);
  v1::EvaluateResponse response;
  const grpc::Status first = Evaluate(request, &response);
  ASSERT_TRUE(first.ok()) << first.error_message();
  // The server's bound is the computing thread's CPU time for that call:
  // 219 ms optimised and 1.6 s under ASan here. The deadlines below are all
  // under the optimised bound, so each must be refused by admission; a
  // deadline that passes before the request even reaches the handler (a CI
  // machine running the sanitizer pass ~10x slower) ends in gRPC's own
  // "Deadline Exceeded" and the next, longer one is tried.
  grpc::Status refused;
  for (const int ms : {20, 50, 100}) {
    grpc::ClientContext context;
    context.set_deadline(
        absl::ToChronoTime(absl::Now() + absl::Milliseconds(ms)));
    refused = stub_->Evaluate(&context, request, &response);
    ASSERT_EQ(refused.error_code(), grpc::StatusCode::DEADLINE_EXCEEDED)
        << "with a " << ms << " ms deadline: " << refused.error_message();
    if (refused.error_message() != "Deadline Exceeded") break;
  }
  EXPECT_THAT(refused,
              GrpcStatusIs(grpc::StatusCode::DEADLINE_EXCEEDED,
                           "Evaluate of 20000 rows x 256 samples needs at "
                           "least"));
}

TEST_F(EvaluateTest, BadRequestsNameTheField) {
  const Dataset data = TwoClasses();
  const std::string snapshot_id =
      TrainedSnapshot(data, v1::TASK_CLASSIFICATION);
  v1::EvaluateResponse response;
  v1::EvaluateRequest request = Request(snapshot_id, data);
  request.clear_rows();
  EXPECT_THAT(Evaluate(request, &response),
              GrpcStatusIs(grpc::StatusCode::INVALID_ARGUMENT,
                           "the labelled rows are required"));
  request = Request(snapshot_id, data);
  request.mutable_rows()->mutable_rows(3)->set_y(7);
  EXPECT_THAT(Evaluate(request, &response),
              GrpcStatusIs(grpc::StatusCode::INVALID_ARGUMENT,
                           "rows.rows[3].y = 7 is not a class"));
  request = Request(snapshot_id, data);
  request.set_ece_bins(1001);
  EXPECT_THAT(Evaluate(request, &response),
              GrpcStatusIs(grpc::StatusCode::INVALID_ARGUMENT, "ece_bins"));
  request = Request(snapshot_id, data);
  request.set_dataset_id("ds-0000000000000000");
  EXPECT_THAT(Evaluate(request, &response),
              GrpcStatusIs(grpc::StatusCode::NOT_FOUND, "ds-0000000000000000"));
  request = Request(snapshot_id, data);
  request.set_dataset_id(UploadOrDie(CubicDataset(10), v1::TASK_REGRESSION));
  EXPECT_THAT(Evaluate(request, &response),
              GrpcStatusIs(grpc::StatusCode::INVALID_ARGUMENT, "features"));
  request = Request(snapshot_id, data);
  request.set_num_samples(options_.limits.max_predict_samples + 1);
  EXPECT_THAT(Evaluate(request, &response),
              GrpcStatusIs(grpc::StatusCode::RESOURCE_EXHAUSTED,
                           "--max-predict-samples"));
  request = Request("snap-0000000000000000", data);
  EXPECT_THAT(
      Evaluate(request, &response),
      GrpcStatusIs(grpc::StatusCode::NOT_FOUND, "snap-0000000000000000"));
}

}  // namespace
}  // namespace bnn::server
