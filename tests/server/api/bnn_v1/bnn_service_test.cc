// The unary RPCs through a real gRPC server on loopback, with the real
// stores, job runner and core.
#include "server/api/bnn_v1/bnn_service.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <memory>
#include <string>
#include <vector>

#include <absl/strings/str_cat.h>
#include <absl/time/clock.h>
#include <gmock/gmock.h>
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>

#include "bnn/methods/registry.h"

#include "tests/server/service_fixture.h"

namespace bnn::server {
namespace {

using ::bnn::server::testutil::AppendMessages;
using ::bnn::server::testutil::CubicDataset;
using ::bnn::server::testutil::ExpectRejections;
using ::bnn::server::testutil::FeatureRows;
using ::bnn::server::testutil::GrpcStatusIs;
using ::bnn::server::testutil::ServiceTest;
using ::bnn::server::testutil::TwoClasses;
using ::bnn::server::testutil::UploadMessages;
using ::testing::Each;
using ::testing::ElementsAre;
using ::testing::Gt;
using ::testing::HasSubstr;
using ::testing::IsEmpty;
using ::testing::SizeIs;

using BnnServiceTest = ServiceTest;

TEST_F(BnnServiceTest, RegressionEndToEnd) {
  const Dataset data = CubicDataset(30);
  v1::UploadDatasetResponse uploaded;
  ASSERT_TRUE(
      Upload(UploadMessages(data, v1::TASK_REGRESSION), &uploaded).ok());
  const v1::DatasetInfo& info = uploaded.dataset();
  EXPECT_EQ(info.num_rows(), 30);
  EXPECT_EQ(info.num_features(), 1);
  EXPECT_EQ(info.task(), v1::TASK_REGRESSION);
  EXPECT_EQ(info.version(), 1);
  EXPECT_THAT(info.hash(), SizeIs(64));
  EXPECT_THAT(info.name(), ::testing::StartsWith("test data "));

  {
    grpc::ClientContext context;
    v1::GetDatasetRequest request;
    request.set_dataset_id(info.dataset_id());
    v1::DatasetInfo got;
    ASSERT_TRUE(stub_->GetDataset(&context, request, &got).ok());
    EXPECT_EQ(got.SerializeAsString(), info.SerializeAsString());
    grpc::ClientContext list_context;
    v1::ListDatasetsResponse list;
    ASSERT_TRUE(stub_->ListDatasets(&list_context, {}, &list).ok());
    ASSERT_THAT(list.datasets(), SizeIs(1));
    EXPECT_EQ(list.datasets(0).dataset_id(), info.dataset_id());
  }

  grpc::ClientContext context;
  v1::StartTrainingResponse started;
  ASSERT_TRUE(
      stub_->StartTraining(&context, Training(info.dataset_id(), 20), &started)
          .ok());
  const v1::Job job = WaitForJob(started.job_id(), v1::JOB_STATE_SUCCEEDED);
  EXPECT_EQ(job.dataset_id(), info.dataset_id());
  EXPECT_EQ(job.method(), "slang");
  EXPECT_EQ(job.params().at("batch_size"), "10");
  EXPECT_EQ(job.params().at("epochs"), "20");
  EXPECT_EQ(job.step(), 60);
  EXPECT_EQ(job.total_steps(), 60);
  EXPECT_EQ(job.progress(), 1.0);

  v1::PredictRequest request;
  request.set_snapshot_id(job.snapshot_id());
  for (const double x : {-6.0, 0.0, 6.0}) request.add_rows()->add_x(x);
  request.set_seed(9);
  v1::PredictResponse first;
  const grpc::Status status = Predict(request, &first);
  ASSERT_TRUE(status.ok()) << status.error_message();
  EXPECT_EQ(first.num_samples(), kDefaultPredictSamples);
  EXPECT_EQ(first.seed(), 9u);
  ASSERT_THAT(first.predictions(), SizeIs(3));
  for (const v1::RowPrediction& p : first.predictions()) {
    EXPECT_TRUE(std::isfinite(p.mean()));
    EXPECT_GT(p.variance(), 0.0);
    EXPECT_NEAR(p.variance(), p.epistemic_variance() + p.aleatoric_variance(),
                1e-9 * p.variance());
  }
  // Same seed, same bits.
  v1::PredictResponse second;
  ASSERT_TRUE(Predict(request, &second).ok());
  EXPECT_EQ(second.SerializeAsString(), first.SerializeAsString());
  EXPECT_EQ(metrics_->predict_rows().Value(), 6);
  EXPECT_EQ(metrics_->datasets().Value(), 1);
}

TEST_F(BnnServiceTest, ClassificationLabelsAreEncoded) {
  const Dataset data = TwoClasses();
  v1::UploadDatasetResponse uploaded;
  ASSERT_TRUE(
      Upload(UploadMessages(data, v1::TASK_CLASSIFICATION), &uploaded).ok());
  EXPECT_EQ(uploaded.dataset().num_classes(), 2);
  EXPECT_THAT(uploaded.dataset().class_values(), ElementsAre(2, 4));
  EXPECT_EQ(uploaded.dataset().task(), v1::TASK_CLASSIFICATION);

  const std::string snapshot_id =
      TrainedSnapshot(data, v1::TASK_CLASSIFICATION);
  v1::PredictRequest request;
  request.set_snapshot_id(snapshot_id);
  request.set_num_samples(16);
  v1::Features* row = request.add_rows();
  row->add_x(5.0);
  row->add_x(0.0);
  v1::PredictResponse response;
  ASSERT_TRUE(Predict(request, &response).ok());
  EXPECT_THAT(response.class_values(), ElementsAre(2, 4));
  EXPECT_EQ(response.num_samples(), 16);
  ASSERT_THAT(response.predictions(), SizeIs(1));
  const v1::RowPrediction& p = response.predictions(0);
  ASSERT_THAT(p.probabilities(), SizeIs(2));
  EXPECT_NEAR(p.probabilities(0) + p.probabilities(1), 1.0, 1e-9);
  EXPECT_THAT(p.predicted_class(), ::testing::AnyOf(2.0, 4.0));
  EXPECT_GE(p.entropy(), 0.0);
}

TEST_F(BnnServiceTest, UnknownIdsAreNotFoundAndMissingOnesInvalid) {
  const std::string ds = "ds-0123456789abcdef";
  grpc::ClientContext c1, c2, c3, c4, c5, c6;
  v1::GetDatasetRequest get_dataset;
  get_dataset.set_dataset_id(ds);
  v1::DatasetInfo info;
  EXPECT_THAT(stub_->GetDataset(&c1, get_dataset, &info),
              GrpcStatusIs(grpc::StatusCode::NOT_FOUND,
                           "dataset_id 'ds-0123456789abcdef' not found"));
  v1::StartTrainingResponse started;
  EXPECT_THAT(stub_->StartTraining(&c2, Training(ds, 1), &started),
              GrpcStatusIs(grpc::StatusCode::NOT_FOUND, "dataset_id"));
  v1::GetJobRequest get_job;
  get_job.set_job_id("job-0123456789abcdef");
  v1::Job job;
  EXPECT_THAT(stub_->GetJob(&c3, get_job, &job),
              GrpcStatusIs(grpc::StatusCode::NOT_FOUND,
                           "job_id 'job-0123456789abcdef' not found"));
  v1::CancelJobRequest cancel;
  cancel.set_job_id("job-0123456789abcdef");
  EXPECT_THAT(stub_->CancelJob(&c4, cancel, &job),
              GrpcStatusIs(grpc::StatusCode::NOT_FOUND, "job_id"));
  v1::PredictRequest predict;
  predict.set_snapshot_id("snap-0123456789abcdef");
  predict.add_rows()->add_x(1.0);
  v1::PredictResponse predicted;
  EXPECT_THAT(stub_->Predict(&c5, predict, &predicted),
              GrpcStatusIs(grpc::StatusCode::NOT_FOUND,
                           "snapshot_id 'snap-0123456789abcdef' not found"));
  EXPECT_THAT(
      stub_->GetJob(&c6, v1::GetJobRequest(), &job),
      GrpcStatusIs(grpc::StatusCode::INVALID_ARGUMENT, "job_id is required"));
  EXPECT_THAT(metrics_->registry().Serialize(),
              HasSubstr("bnn_rpc_requests_total{code=\"NOT_FOUND\",rpc="
                        "\"GetDataset\"} 1\n"));
}

TEST_F(BnnServiceTest, BadTrainingRequestsFailTheRpc) {
  const std::string dataset_id =
      UploadOrDie(CubicDataset(20), v1::TASK_REGRESSION);
  v1::StartTrainingRequest unknown_method = Training(dataset_id, 1);
  unknown_method.set_method("gibbs");
  unknown_method.clear_slang();
  v1::StartTrainingRequest unknown_param = Training(dataset_id, 1);
  (*unknown_param.mutable_params())["rnak"] = "2";
  v1::StartTrainingRequest bad_model = Training(dataset_id, 1);
  bad_model.mutable_model()->add_hidden_sizes(-3);
  v1::StartTrainingRequest bad_activation = Training(dataset_id, 1);
  bad_activation.mutable_model()->add_activations("sigmoid");
  for (const auto& [request, message] :
       std::vector<std::pair<v1::StartTrainingRequest, std::string>>{
           {unknown_method, "slang"},
           {unknown_param, "unknown parameter 'rnak'"},
           {bad_model, "model.hidden_sizes[1] = -3"},
           {bad_activation, "model.activations[0] = 'sigmoid'"}}) {
    grpc::ClientContext context;
    v1::StartTrainingResponse response;
    EXPECT_THAT(stub_->StartTraining(&context, request, &response),
                GrpcStatusIs(grpc::StatusCode::INVALID_ARGUMENT, message));
  }
  EXPECT_TRUE(jobs_->CountByState().empty());  // no job was created
}

TEST_F(BnnServiceTest, BadPredictRequests) {
  const std::string snapshot_id =
      TrainedSnapshot(CubicDataset(20), v1::TASK_REGRESSION);
  v1::PredictRequest wide;
  wide.set_snapshot_id(snapshot_id);
  wide.add_rows()->add_x(1.0);
  v1::Features* two = wide.add_rows();
  two->add_x(1.0);
  two->add_x(2.0);
  v1::PredictRequest many_samples;
  many_samples.set_snapshot_id(snapshot_id);
  many_samples.add_rows()->add_x(1.0);
  many_samples.set_num_samples(100000);
  v1::PredictRequest infinite;
  infinite.set_snapshot_id(snapshot_id);
  infinite.add_rows()->add_x(std::numeric_limits<double>::infinity());
  v1::PredictRequest empty;
  empty.set_snapshot_id(snapshot_id);
  v1::PredictResponse response;
  EXPECT_THAT(Predict(wide, &response),
              GrpcStatusIs(grpc::StatusCode::INVALID_ARGUMENT,
                           "rows[1].x has 2 values; the snapshot has 1 "
                           "features"));
  EXPECT_THAT(Predict(many_samples, &response),
              GrpcStatusIs(grpc::StatusCode::RESOURCE_EXHAUSTED,
                           "num_samples 100000 exceeds the server limit 256 "
                           "(--max-predict-samples)"));
  EXPECT_THAT(
      Predict(infinite, &response),
      GrpcStatusIs(grpc::StatusCode::INVALID_ARGUMENT, "rows[0].x[0] is +Inf"));
  EXPECT_THAT(
      Predict(empty, &response),
      GrpcStatusIs(grpc::StatusCode::INVALID_ARGUMENT, "rows is empty"));
}

TEST_F(BnnServiceTest, CancelJobStopsTraining) {
  const std::string dataset_id =
      UploadOrDie(CubicDataset(20), v1::TASK_REGRESSION);
  grpc::ClientContext context;
  v1::StartTrainingResponse started;
  ASSERT_TRUE(
      stub_->StartTraining(&context, Training(dataset_id, 1000000), &started)
          .ok());
  WaitForJob(started.job_id(), v1::JOB_STATE_RUNNING);
  grpc::ClientContext cancel_context;
  v1::CancelJobRequest cancel;
  cancel.set_job_id(started.job_id());
  v1::Job job;
  ASSERT_TRUE(stub_->CancelJob(&cancel_context, cancel, &job).ok());
  EXPECT_EQ(job.job_id(), started.job_id());
  const v1::Job done = WaitForJob(started.job_id(), v1::JOB_STATE_CANCELLED);
  EXPECT_EQ(done.snapshot_id(), "");
  EXPECT_GT(done.finished_unix_ms(), 0);
}

TEST_F(BnnServiceTest, ListMethodsDescribesSlang) {
  grpc::ClientContext context;
  v1::ListMethodsResponse response;
  ASSERT_TRUE(stub_->ListMethods(&context, {}, &response).ok());
  const auto slang =
      std::find_if(response.methods().begin(), response.methods().end(),
                   [](const v1::MethodInfo& m) { return m.name() == "slang"; });
  ASSERT_NE(slang, response.methods().end());
  EXPECT_FALSE(slang->description().empty());
  const auto rank =
      std::find_if(slang->params().begin(), slang->params().end(),
                   [](const v1::MethodParam& p) { return p.name() == "rank"; });
  ASSERT_NE(rank, slang->params().end());
  EXPECT_EQ(rank->type(), "int");
  EXPECT_FALSE(rank->default_value().empty());
  EXPECT_FALSE(rank->help().empty());
}

v1::PredictRequest PredictAt(const std::string& snapshot_id,
                             const std::vector<std::vector<double>>& rows) {
  v1::PredictRequest request;
  request.set_snapshot_id(snapshot_id);
  for (const auto& x : rows) {
    request.add_rows()->mutable_x()->Add(x.begin(), x.end());
  }
  request.set_seed(3);
  return request;
}

TEST_F(BnnServiceTest, PredictFillsEveryRegressionField) {
  const std::string snapshot_id =
      TrainedSnapshot(CubicDataset(20), v1::TASK_REGRESSION);
  v1::PredictRequest request = PredictAt(snapshot_id, {{-1.0}, {2.0}});
  request.set_num_samples(8);
  for (const double level : {0.1, 0.5, 0.9}) request.add_quantiles(level);
  request.set_per_sample(true);
  v1::PredictResponse response;
  const grpc::Status status = Predict(request, &response);
  ASSERT_TRUE(status.ok()) << status.error_message();
  EXPECT_EQ(response.num_samples(), 8);
  ASSERT_THAT(response.predictions(), SizeIs(2));
  for (const v1::RowPrediction& p : response.predictions()) {
    ASSERT_THAT(p.quantiles(), SizeIs(3));
    EXPECT_LT(p.quantiles(0), p.quantiles(1));
    EXPECT_LT(p.quantiles(1), p.quantiles(2));
    ASSERT_THAT(p.sample_outputs(), SizeIs(8));
    double sum = 0;
    for (const double v : p.sample_outputs()) sum += v;
    EXPECT_NEAR(sum / 8, p.mean(), 1e-9 * (1 + std::abs(p.mean())));
    EXPECT_GT(p.epistemic_variance(), 0.0);
    EXPECT_GT(p.aleatoric_variance(), 0.0);
  }

  // Linearised: no samples, the same decomposition.
  v1::PredictRequest linearized = PredictAt(snapshot_id, {{-1.0}, {2.0}});
  linearized.set_linearized(true);
  linearized.add_quantiles(0.5);
  ASSERT_TRUE(Predict(linearized, &response).ok());
  EXPECT_EQ(response.num_samples(), 0);
  for (const v1::RowPrediction& p : response.predictions()) {
    EXPECT_NEAR(p.variance(), p.epistemic_variance() + p.aleatoric_variance(),
                1e-9 * p.variance());
    EXPECT_NEAR(p.quantiles(0), p.mean(), 1e-6 * (1 + std::abs(p.mean())));
    EXPECT_THAT(p.sample_outputs(), IsEmpty());
  }
}

TEST_F(BnnServiceTest, PredictFillsEveryClassificationField) {
  const std::string snapshot_id =
      TrainedSnapshot(TwoClasses(), v1::TASK_CLASSIFICATION);
  v1::PredictRequest request = PredictAt(snapshot_id, {{0.5, 1.0}, {-3, 2}});
  request.set_num_samples(16);
  request.set_per_sample(true);
  v1::PredictResponse response;
  ASSERT_TRUE(Predict(request, &response).ok());
  for (const v1::RowPrediction& p : response.predictions()) {
    ASSERT_THAT(p.probabilities(), SizeIs(2));
    EXPECT_GE(p.entropy(), p.expected_entropy());
    EXPECT_NEAR(p.mutual_information(), p.entropy() - p.expected_entropy(),
                1e-9);
    EXPECT_GE(p.variation_ratio(), 0.0);
    EXPECT_LE(p.variation_ratio(), 0.5);
    EXPECT_THAT(p.sample_outputs(), SizeIs(16 * 2));
  }
}

TEST_F(BnnServiceTest, BadPredictOptions) {
  const std::string regression =
      TrainedSnapshot(CubicDataset(20), v1::TASK_REGRESSION);
  const std::string classifier =
      TrainedSnapshot(TwoClasses(), v1::TASK_CLASSIFICATION);
  v1::PredictRequest linearized_classifier = PredictAt(classifier, {{1, 1}});
  linearized_classifier.set_linearized(true);
  v1::PredictRequest classifier_quantiles = PredictAt(classifier, {{1, 1}});
  classifier_quantiles.add_quantiles(0.5);
  v1::PredictRequest bad_level = PredictAt(regression, {{1}});
  bad_level.add_quantiles(0.5);
  bad_level.add_quantiles(1.5);
  v1::PredictRequest linearized_samples = PredictAt(regression, {{1}});
  linearized_samples.set_linearized(true);
  linearized_samples.set_per_sample(true);
  // 1000 rows x 256 samples of 8 bytes: 2 MB, above the fixture's 1 MiB.
  v1::PredictRequest huge = PredictAt(regression, {});
  for (int i = 0; i < 1000; ++i) huge.add_rows()->add_x(i * 0.001);
  huge.set_num_samples(256);
  huge.set_per_sample(true);
  ExpectRejections<v1::PredictRequest>(
      {
          {linearized_classifier, grpc::StatusCode::INVALID_ARGUMENT,
           "linearized predictive is for regression"},
          {classifier_quantiles, grpc::StatusCode::INVALID_ARGUMENT,
           "quantiles are for regression"},
          {bad_level, grpc::StatusCode::INVALID_ARGUMENT,
           "quantiles[1] = 1.5 must be in (0, 1)"},
          {linearized_samples, grpc::StatusCode::INVALID_ARGUMENT,
           "per_sample outputs need Monte Carlo prediction"},
          {huge, grpc::StatusCode::RESOURCE_EXHAUSTED, "--max-message-bytes"},
      },
      [&](const v1::PredictRequest& request) {
        v1::PredictResponse response;
        return Predict(request, &response);
      });
}

TEST_F(BnnServiceTest, PredictorCacheIsSharedAcrossRequests) {
  const std::string snapshot_id =
      TrainedSnapshot(CubicDataset(20), v1::TASK_REGRESSION);
  v1::PredictResponse response;
  ASSERT_TRUE(Predict(PredictAt(snapshot_id, {{1.0}}), &response).ok());
  EXPECT_EQ(metrics_->predictor_cache_misses().Value(), 1);
  EXPECT_EQ(metrics_->predictor_cache_hits().Value(), 0);
  // Another request with the same samples and seed reuses the draw.
  ASSERT_TRUE(Predict(PredictAt(snapshot_id, {{2.0}}), &response).ok());
  EXPECT_EQ(metrics_->predictor_cache_hits().Value(), 1);
  EXPECT_EQ(metrics_->predictor_cache_misses().Value(), 1);
}

// A regression snapshot and a 40-row pool dataset of the same schema.
class AcquireTest : public ServiceTest {
 protected:
  void SetUp() override {
    ServiceTest::SetUp();
    snapshot_id_ = TrainedSnapshot(CubicDataset(20), v1::TASK_REGRESSION);
    pool_ = CubicDataset(40, 7);
    for (double& x : pool_.features) x *= 2;  // partly beyond the data
    pool_id_ = UploadOrDie(pool_, v1::TASK_REGRESSION);
  }

  v1::AcquireRequest FromDataset() const {
    v1::AcquireRequest request;
    request.set_snapshot_id(snapshot_id_);
    request.set_dataset_id(pool_id_);
    request.set_k(5);
    request.set_heuristic("max_variance");
    request.set_num_samples(16);
    request.set_seed(4);
    return request;
  }

  v1::AcquireRequest FromRows() const {
    v1::AcquireRequest request = FromDataset();
    *request.mutable_rows()->mutable_rows() = FeatureRows(pool_);
    return request;
  }

  std::string snapshot_id_;
  Dataset pool_;
  std::string pool_id_;
};

TEST_F(AcquireTest, StoredPoolEqualsRowsInTheRequest) {
  for (const double diversity : {0.0, 1.0}) {
    v1::AcquireRequest stored = FromDataset();
    v1::AcquireRequest sent = FromRows();
    stored.set_diversity_power(diversity);
    sent.set_diversity_power(diversity);
    v1::AcquireResponse a, b;
    grpc::Status status = Acquire(stored, &a);
    ASSERT_TRUE(status.ok()) << status.error_message();
    ASSERT_TRUE(Acquire(sent, &b).ok());
    EXPECT_EQ(a.SerializeAsString(), b.SerializeAsString()) << diversity;
    EXPECT_EQ(a.pool_rows(), 40);
    EXPECT_EQ(a.seed(), 4u);
    ASSERT_THAT(a.indices(), SizeIs(5));
    ASSERT_THAT(a.scores(), SizeIs(5));
    EXPECT_THAT(a.scores(), Each(Gt(0.0)));
  }
  // Deterministic top-k: best first, and the largest epistemic variances.
  v1::AcquireResponse top;
  ASSERT_TRUE(Acquire(FromDataset(), &top).ok());
  EXPECT_TRUE(std::is_sorted(top.scores().rbegin(), top.scores().rend()));
  EXPECT_EQ(metrics_->acquire_rows_scored().Value(), 5 * 40);
  EXPECT_THAT(
      metrics_->registry().Serialize(),
      HasSubstr("bnn_rpc_requests_total{code=\"OK\",rpc=\"Acquire\"} 5"));
  EXPECT_GT(metrics_->predictor_cache_hits().Value(), 0);
}

TEST_F(AcquireTest, PoolVersionAndRandomSeed) {
  v1::DatasetInfo appended;
  ASSERT_TRUE(
      Append(AppendMessages(pool_id_, CubicDataset(10, 8)), &appended).ok());
  v1::AcquireRequest latest = FromDataset();
  latest.clear_seed();
  v1::AcquireRequest first = FromDataset();
  first.set_dataset_version(1);
  v1::AcquireResponse a, b, c;
  ASSERT_TRUE(Acquire(latest, &a).ok());
  ASSERT_TRUE(Acquire(latest, &b).ok());
  ASSERT_TRUE(Acquire(first, &c).ok());
  EXPECT_EQ(a.pool_rows(), 50);
  EXPECT_EQ(c.pool_rows(), 40);
  EXPECT_NE(a.seed(), b.seed());  // drawn, and returned
}

TEST_F(AcquireTest, BadAcquireRequests) {
  const std::string wide = UploadOrDie(TwoClasses(), v1::TASK_CLASSIFICATION);
  v1::AcquireRequest no_pool = FromDataset();
  no_pool.clear_pool();
  v1::AcquireRequest unknown = FromDataset();
  unknown.set_dataset_id("ds-0123456789abcdef");
  v1::AcquireRequest two_features = FromDataset();
  two_features.set_dataset_id(wide);
  v1::AcquireRequest ragged = FromRows();
  ragged.mutable_rows()->mutable_rows(3)->add_x(1.0);
  v1::AcquireRequest version_of_rows = FromRows();
  version_of_rows.set_dataset_version(1);
  v1::AcquireRequest missing_version = FromDataset();
  missing_version.set_dataset_version(7);
  v1::AcquireRequest zero_version = FromDataset();
  zero_version.set_dataset_version(0);
  v1::AcquireRequest zero_k = FromDataset();
  zero_k.set_k(0);
  v1::AcquireRequest big_k = FromRows();
  big_k.set_k(41);
  v1::AcquireRequest classifier_heuristic = FromDataset();
  classifier_heuristic.set_heuristic("bald");
  v1::AcquireRequest unknown_heuristic = FromDataset();
  unknown_heuristic.set_heuristic("");
  v1::AcquireRequest many_samples = FromDataset();
  many_samples.set_num_samples(1000);
  v1::AcquireRequest no_snapshot = FromDataset();
  no_snapshot.clear_snapshot_id();
  ExpectRejections<v1::AcquireRequest>(
      {
          {no_pool, grpc::StatusCode::INVALID_ARGUMENT, "the pool is required"},
          {unknown, grpc::StatusCode::NOT_FOUND,
           "dataset_id 'ds-0123456789abcdef' not found"},
          {two_features, grpc::StatusCode::INVALID_ARGUMENT,
           "dataset_id '" + wide + "' has 2 features; the snapshot has 1"},
          {ragged, grpc::StatusCode::INVALID_ARGUMENT,
           "rows.rows[3].x has 2 values; the snapshot has 1 features"},
          {version_of_rows, grpc::StatusCode::INVALID_ARGUMENT,
           "dataset_version is set but the pool is rows in the request"},
          {missing_version, grpc::StatusCode::NOT_FOUND,
           "has no version 7 (its latest is 1)"},
          {zero_version, grpc::StatusCode::INVALID_ARGUMENT,
           "dataset_version = 0 must be >= 1"},
          {zero_k, grpc::StatusCode::INVALID_ARGUMENT,
           "k = 0 must be in [1, 40], the pool's rows"},
          {big_k, grpc::StatusCode::INVALID_ARGUMENT,
           "k = 41 must be in [1, 40]"},
          {classifier_heuristic, grpc::StatusCode::INVALID_ARGUMENT,
           "heuristic bald needs a classifier"},
          {unknown_heuristic, grpc::StatusCode::INVALID_ARGUMENT,
           "unknown heuristic ''"},
          {many_samples, grpc::StatusCode::RESOURCE_EXHAUSTED,
           "--max-predict-samples"},
          {no_snapshot, grpc::StatusCode::INVALID_ARGUMENT,
           "snapshot_id is required"},
      },
      [&](const v1::AcquireRequest& request) {
        v1::AcquireResponse response;
        return Acquire(request, &response);
      });
  EXPECT_EQ(metrics_->acquire_rows_scored().Value(), 0);
}

TEST_F(BnnServiceTest, SnapshotsAreListedDescribedAndDeleted) {
  const std::string dataset_id =
      UploadOrDie(CubicDataset(20), v1::TASK_REGRESSION);
  const std::string first = TrainOrDie(Training(dataset_id, 2));
  const std::string other =
      TrainedSnapshot(CubicDataset(20, 2), v1::TASK_REGRESSION);

  v1::SnapshotInfo info;
  ASSERT_TRUE(GetSnapshot(first, &info).ok());
  EXPECT_EQ(info.snapshot_id(), first);
  EXPECT_EQ(info.method(), "slang");
  EXPECT_EQ(info.params().at("batch_size"), "10");
  EXPECT_EQ(info.dataset_id(), dataset_id);
  EXPECT_EQ(info.dataset_version(), 1);
  EXPECT_THAT(info.dataset_hash(), SizeIs(64));
  EXPECT_EQ(info.task(), v1::TASK_REGRESSION);
  EXPECT_THAT(info.model().hidden_sizes(), ElementsAre(8));
  EXPECT_THAT(info.model().activations(), ElementsAre("relu"));
  EXPECT_EQ(info.num_features(), 1);
  EXPECT_EQ(info.num_parameters(), 2 * 8 + 9);
  EXPECT_EQ(info.posterior_family(), "low_rank");
  EXPECT_EQ(info.steps(), 4);
  EXPECT_EQ(info.epochs(), 2);
  EXPECT_EQ(info.seed(), 1u);
  EXPECT_GT(info.size_bytes(), 0);
  EXPECT_EQ(info.format_version(), 1u);
  EXPECT_FALSE(info.library_version().empty());
  EXPECT_EQ(info.parent_snapshot_id(), "");

  const auto list = [&](const std::string& dataset) {
    grpc::ClientContext context;
    v1::ListSnapshotsRequest request;
    request.set_dataset_id(dataset);
    v1::ListSnapshotsResponse response;
    EXPECT_TRUE(stub_->ListSnapshots(&context, request, &response).ok());
    std::vector<std::string> ids;
    for (const auto& s : response.snapshots()) ids.push_back(s.snapshot_id());
    return ids;
  };
  EXPECT_THAT(list(""), ::testing::UnorderedElementsAre(first, other));
  EXPECT_THAT(list(dataset_id), ElementsAre(first));

  ASSERT_TRUE(DeleteSnapshot(first).ok());
  EXPECT_THAT(list(""), ElementsAre(other));
  EXPECT_EQ(metrics_->snapshots().Value(), 1);
  v1::PredictResponse predicted;
  EXPECT_THAT(Predict(PredictAt(first, {{1.0}}), &predicted),
              GrpcStatusIs(grpc::StatusCode::NOT_FOUND,
                           "snapshot_id '" + first + "' not found"));
  EXPECT_THAT(GetSnapshot(first, &info),
              GrpcStatusIs(grpc::StatusCode::NOT_FOUND, "not found"));
  EXPECT_THAT(DeleteSnapshot(first),
              GrpcStatusIs(grpc::StatusCode::NOT_FOUND, "not found"));
  EXPECT_THAT(DeleteSnapshot(""),
              GrpcStatusIs(grpc::StatusCode::INVALID_ARGUMENT,
                           "snapshot_id is required"));
  EXPECT_THAT(GetSnapshot("", &info),
              GrpcStatusIs(grpc::StatusCode::INVALID_ARGUMENT,
                           "snapshot_id is required"));
  const std::string metrics = metrics_->registry().Serialize();
  for (const char* series :
       {"bnn_rpc_requests_total{code=\"OK\",rpc=\"DeleteSnapshot\"} 1",
        "bnn_rpc_requests_total{code=\"NOT_FOUND\",rpc=\"DeleteSnapshot\"} 1",
        "bnn_rpc_requests_total{code=\"OK\",rpc=\"GetSnapshot\"} 1",
        "bnn_rpc_requests_total{code=\"OK\",rpc=\"ListSnapshots\"} 3",
        "bnn_rpc_latency_seconds_count{rpc=\"DeleteSnapshot\"} 3"}) {
    EXPECT_THAT(metrics, HasSubstr(series));
  }
}

TEST_F(BnnServiceTest, TrainsOnTheRequestedDatasetVersion) {
  const std::string dataset_id =
      UploadOrDie(CubicDataset(20), v1::TASK_REGRESSION);
  v1::DatasetInfo v2;
  ASSERT_TRUE(
      Append(AppendMessages(dataset_id, CubicDataset(10, 5)), &v2).ok());
  v1::DatasetInfo v1_info;
  ASSERT_TRUE(GetDataset(dataset_id, 1, &v1_info).ok());

  v1::StartTrainingRequest on_first = Training(dataset_id, 1);
  on_first.set_dataset_version(1);
  v1::SnapshotInfo info;
  ASSERT_TRUE(GetSnapshot(TrainOrDie(on_first), &info).ok());
  EXPECT_EQ(info.dataset_version(), 1);
  EXPECT_EQ(info.dataset_hash(), v1_info.hash());
  EXPECT_EQ(info.steps(), 2);  // 20 rows, batches of 10
  ASSERT_TRUE(GetSnapshot(TrainOrDie(Training(dataset_id, 1)), &info).ok());
  EXPECT_EQ(info.dataset_version(), 2);
  EXPECT_EQ(info.dataset_hash(), v2.hash());
  EXPECT_EQ(info.steps(), 3);

  v1::StartTrainingRequest missing = Training(dataset_id, 1);
  missing.set_dataset_version(3);
  v1::StartTrainingRequest zero = Training(dataset_id, 1);
  zero.set_dataset_version(0);
  std::string job_id;
  EXPECT_THAT(StartTraining(missing, &job_id),
              GrpcStatusIs(grpc::StatusCode::NOT_FOUND,
                           "dataset_id '" + dataset_id +
                               "' has no version 3 (its latest is 2)"));
  EXPECT_THAT(StartTraining(zero, &job_id),
              GrpcStatusIs(grpc::StatusCode::INVALID_ARGUMENT,
                           "dataset_version = 0 must be >= 1"));
}

TEST_F(BnnServiceTest, WarmStartFromAParentSnapshot) {
  const std::string dataset_id =
      UploadOrDie(CubicDataset(20), v1::TASK_REGRESSION);
  const std::string parent = TrainOrDie(Training(dataset_id, 5));
  v1::DatasetInfo appended;
  ASSERT_TRUE(
      Append(AppendMessages(dataset_id, CubicDataset(10, 5)), &appended).ok());
  v1::StartTrainingRequest warm = Training(dataset_id, 2);
  warm.clear_model();
  warm.set_parent_snapshot_id(parent);
  warm.set_prior_from_parent(true);
  v1::SnapshotInfo info;
  ASSERT_TRUE(GetSnapshot(TrainOrDie(warm), &info).ok());
  EXPECT_EQ(info.parent_snapshot_id(), parent);
  EXPECT_TRUE(info.prior_from_parent());
  EXPECT_EQ(info.dataset_version(), 2);
  EXPECT_THAT(info.model().hidden_sizes(), ElementsAre(8));

  const std::string wide = UploadOrDie(TwoClasses(), v1::TASK_CLASSIFICATION);
  v1::StartTrainingRequest unknown = warm;
  unknown.set_parent_snapshot_id("snap-0123456789abcdef");
  v1::StartTrainingRequest other_dataset = warm;
  other_dataset.set_dataset_id(wide);
  v1::StartTrainingRequest other_model = warm;
  other_model.mutable_model()->add_hidden_sizes(16);
  v1::StartTrainingRequest no_parent = Training(dataset_id, 1);
  no_parent.set_prior_from_parent(true);
  ExpectRejections<v1::StartTrainingRequest>(
      {
          {unknown, grpc::StatusCode::NOT_FOUND,
           "snapshot_id 'snap-0123456789abcdef' not found"},
          {other_dataset, grpc::StatusCode::INVALID_ARGUMENT,
           "parent_snapshot_id '" + parent + "' takes 1 features"},
          {other_model, grpc::StatusCode::INVALID_ARGUMENT,
           "hidden_sizes [16] differ from the parent snapshot's [8]"},
          {no_parent, grpc::StatusCode::INVALID_ARGUMENT,
           "prior_from_parent is set without parent_snapshot_id"},
      },
      [&](const v1::StartTrainingRequest& request) {
        std::string job_id;
        return StartTraining(request, &job_id);
      });
}

TEST_F(BnnServiceTest, DeletedParentFailsTheQueuedJob) {
  const std::string dataset_id =
      UploadOrDie(CubicDataset(20), v1::TASK_REGRESSION);
  const std::string parent = TrainOrDie(Training(dataset_id, 1));
  // Occupies the only job worker so that the warm start stays queued.
  std::string blocker;
  ASSERT_TRUE(StartTraining(Training(dataset_id, 1000000), &blocker).ok());
  WaitForJob(blocker, v1::JOB_STATE_RUNNING);
  v1::StartTrainingRequest warm = Training(dataset_id, 1);
  warm.set_parent_snapshot_id(parent);
  std::string job_id;
  ASSERT_TRUE(StartTraining(warm, &job_id).ok());
  ASSERT_TRUE(DeleteSnapshot(parent).ok());
  grpc::ClientContext context;
  v1::CancelJobRequest cancel;
  cancel.set_job_id(blocker);
  v1::Job job;
  ASSERT_TRUE(stub_->CancelJob(&context, cancel, &job).ok());
  job = WaitForJob(job_id, v1::JOB_STATE_FAILED);
  EXPECT_THAT(job.error(), HasSubstr("snapshot_id '" + parent + "' not found"));
}

}  // namespace
}  // namespace bnn::server
