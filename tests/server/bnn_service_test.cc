// The service through a real gRPC server on loopback, with the real stores,
// job runner and core.
#include "server/bnn_service.h"

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

#include "tests/server/server_test_util.h"

namespace bnn::server {
namespace {

using ::bnn::server::testutil::CubicDataset;
using ::bnn::server::testutil::TempDir;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::SizeIs;

MATCHER_P2(GrpcStatusIs, code, substring, "") {
  *result_listener << "status is " << arg.error_code() << ": "
                   << arg.error_message();
  return arg.error_code() == code &&
         arg.error_message().find(substring) != std::string::npos;
}

v1::UploadDatasetRequest HeaderMessage(v1::Task task, int num_features) {
  v1::UploadDatasetRequest message;
  v1::DatasetHeader* header = message.mutable_header();
  header->set_name("test data");
  header->set_task(task);
  header->set_num_features(num_features);
  return message;
}

// A header, then `data`'s rows in chunks of `chunk_rows`.
std::vector<v1::UploadDatasetRequest> UploadMessages(const Dataset& data,
                                                     v1::Task task,
                                                     int chunk_rows = 7) {
  std::vector<v1::UploadDatasetRequest> messages = {
      HeaderMessage(task, static_cast<int>(data.num_features))};
  for (int64_t i = 0; i < data.num_rows(); ++i) {
    if (i % chunk_rows == 0) messages.emplace_back().mutable_chunk();
    v1::Example* example = messages.back().mutable_chunk()->add_rows();
    example->mutable_x()->Add(data.row(i), data.row(i) + data.num_features);
    example->set_y(data.targets[i]);
  }
  return messages;
}

// Labels 2 and 4, separable by the sign of the first feature.
Dataset TwoClasses() {
  Dataset data;
  data.num_features = 2;
  for (int i = 0; i < 40; ++i) {
    const double x = (i % 2 == 0 ? 1.0 : -1.0) * (1 + i % 5);
    data.features.push_back(x);
    data.features.push_back(0.1 * i);
    data.targets.push_back(x > 0 ? 4 : 2);
  }
  return data;
}

class BnnServiceTest : public ::testing::Test {
 protected:
  void SetUp() override {
    datasets_ = *DatasetStore::Open(dir_.path() + "/datasets");
    snapshots_ = *SnapshotStore::Open(dir_.path() + "/snapshots", {});
    jobs_ = *JobStore::Open(dir_.path() + "/jobs");
    runner_ =
        *JobRunner::Create({}, jobs_.get(), datasets_.get(), snapshots_.get(),
                           &MethodRegistry::Builtin(), &metrics_);
    BnnServiceImpl::Options options;
    options.limits.max_upload_rows = 1000;
    options.limits.max_predict_samples = 256;
    service_ = std::make_unique<BnnServiceImpl>(
        options, datasets_.get(), snapshots_.get(), runner_.get(),
        &MethodRegistry::Builtin(), &metrics_);
    grpc::ServerBuilder builder;
    int port = 0;
    builder.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(),
                             &port);
    builder.RegisterService(service_.get());
    server_ = builder.BuildAndStart();
    ASSERT_NE(server_, nullptr);
    stub_ = v1::BnnService::NewStub(grpc::CreateChannel(
        absl::StrCat("127.0.0.1:", port), grpc::InsecureChannelCredentials()));
  }

  void TearDown() override {
    server_->Shutdown();
    runner_->Shutdown();
  }

  grpc::Status Upload(const std::vector<v1::UploadDatasetRequest>& messages,
                      v1::UploadDatasetResponse* response) {
    grpc::ClientContext context;
    std::unique_ptr<grpc::ClientWriter<v1::UploadDatasetRequest>> writer =
        stub_->UploadDataset(&context, response);
    for (const auto& message : messages) {
      if (!writer->Write(message)) break;  // the server already answered
    }
    writer->WritesDone();
    return writer->Finish();
  }

  std::string UploadOrDie(const Dataset& data, v1::Task task) {
    v1::UploadDatasetResponse response;
    const grpc::Status status = Upload(UploadMessages(data, task), &response);
    EXPECT_TRUE(status.ok()) << status.error_message();
    return response.dataset().dataset_id();
  }

  v1::StartTrainingRequest Training(const std::string& dataset_id, int epochs) {
    v1::StartTrainingRequest request;
    request.set_dataset_id(dataset_id);
    request.set_method("slang");
    request.mutable_model()->add_hidden_sizes(8);
    request.mutable_slang()->set_batch_size(10);
    request.set_epochs(epochs);
    request.set_seed(1);
    return request;
  }

  v1::Job WaitForJob(const std::string& job_id, v1::JobState state) {
    const absl::Time deadline = absl::Now() + absl::Seconds(30);
    v1::Job job;
    while (absl::Now() < deadline) {
      grpc::ClientContext context;
      v1::GetJobRequest request;
      request.set_job_id(job_id);
      EXPECT_TRUE(stub_->GetJob(&context, request, &job).ok());
      if (job.state() == state) return job;
      absl::SleepFor(absl::Milliseconds(10));
    }
    ADD_FAILURE() << "job " << job_id << " is " << JobState_Name(job.state())
                  << ": " << job.error();
    return job;
  }

  // Uploads, trains and returns the snapshot id.
  std::string TrainedSnapshot(const Dataset& data, v1::Task task) {
    const std::string dataset_id = UploadOrDie(data, task);
    grpc::ClientContext context;
    v1::StartTrainingResponse started;
    const grpc::Status status =
        stub_->StartTraining(&context, Training(dataset_id, 20), &started);
    EXPECT_TRUE(status.ok()) << status.error_message();
    return WaitForJob(started.job_id(), v1::JOB_STATE_SUCCEEDED).snapshot_id();
  }

  grpc::Status Predict(const v1::PredictRequest& request,
                       v1::PredictResponse* response) {
    grpc::ClientContext context;
    return stub_->Predict(&context, request, response);
  }

  TempDir dir_;
  ServerMetrics metrics_;
  std::unique_ptr<DatasetStore> datasets_;
  std::unique_ptr<SnapshotStore> snapshots_;
  std::unique_ptr<JobStore> jobs_;
  std::unique_ptr<JobRunner> runner_;
  std::unique_ptr<BnnServiceImpl> service_;
  std::unique_ptr<grpc::Server> server_;  // after the service: stops first
  std::unique_ptr<v1::BnnService::Stub> stub_;
};

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
  EXPECT_EQ(info.name(), "test data");

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
  EXPECT_EQ(metrics_.predict_rows().value(), 6);
  EXPECT_EQ(metrics_.datasets().value(), 1);
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

TEST_F(BnnServiceTest, BadUploadsStoreNothing) {
  const Dataset data = CubicDataset(10);
  std::vector<v1::UploadDatasetRequest> ragged =
      UploadMessages(data, v1::TASK_REGRESSION, /*chunk_rows=*/2);
  ragged[2].mutable_chunk()->mutable_rows(1)->add_x(1.0);  // row 3
  std::vector<v1::UploadDatasetRequest> with_nan =
      UploadMessages(data, v1::TASK_REGRESSION);
  with_nan[1].mutable_chunk()->mutable_rows(4)->set_x(
      0, std::numeric_limits<double>::quiet_NaN());
  std::vector<v1::UploadDatasetRequest> chunk_first =
      UploadMessages(data, v1::TASK_REGRESSION);
  std::swap(chunk_first[0], chunk_first[1]);
  std::vector<v1::UploadDatasetRequest> two_headers =
      UploadMessages(data, v1::TASK_REGRESSION);
  two_headers.push_back(two_headers[0]);
  Dataset one_label = CubicDataset(10);
  for (double& y : one_label.targets) y = 1.0;
  Dataset too_long = CubicDataset(1001);

  const struct {
    std::vector<v1::UploadDatasetRequest> messages;
    grpc::StatusCode code;
    std::string message;
  } cases[] = {
      {{}, grpc::StatusCode::INVALID_ARGUMENT, "upload has no header"},
      {{HeaderMessage(v1::TASK_REGRESSION, 1)},
       grpc::StatusCode::INVALID_ARGUMENT,
       "upload has no rows"},
      {ragged, grpc::StatusCode::INVALID_ARGUMENT,
       "rows[3].x has 2 values; the dataset has 1 features"},
      {with_nan, grpc::StatusCode::INVALID_ARGUMENT, "rows[4].x[0] is NaN"},
      {chunk_first, grpc::StatusCode::INVALID_ARGUMENT,
       "upload message 0 is a row chunk before the header"},
      {two_headers, grpc::StatusCode::INVALID_ARGUMENT, "second header"},
      {{HeaderMessage(v1::TASK_UNSPECIFIED, 1)},
       grpc::StatusCode::INVALID_ARGUMENT,
       "header.task must be"},
      {UploadMessages(one_label, v1::TASK_CLASSIFICATION),
       grpc::StatusCode::INVALID_ARGUMENT, "at least 2 distinct labels"},
      {UploadMessages(too_long, v1::TASK_REGRESSION, 100),
       grpc::StatusCode::RESOURCE_EXHAUSTED, "--max-upload-rows"},
  };
  for (const auto& c : cases) {
    v1::UploadDatasetResponse response;
    EXPECT_THAT(Upload(c.messages, &response), GrpcStatusIs(c.code, c.message));
  }
  grpc::ClientContext context;
  v1::ListDatasetsResponse list;
  ASSERT_TRUE(stub_->ListDatasets(&context, {}, &list).ok());
  EXPECT_THAT(list.datasets(), SizeIs(0));
  // Still serving.
  EXPECT_FALSE(UploadOrDie(data, v1::TASK_REGRESSION).empty());
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
  EXPECT_THAT(metrics_.registry().Serialize(),
              HasSubstr("bnn_rpc_requests_total{rpc=\"GetDataset\",code=\"NOT_"
                        "FOUND\"} 1\n"));
}

TEST_F(BnnServiceTest, BadTrainingRequestsFailTheRpc) {
  const std::string dataset_id =
      UploadOrDie(CubicDataset(20), v1::TASK_REGRESSION);
  v1::StartTrainingRequest unknown_method = Training(dataset_id, 1);
  unknown_method.set_method("hmc");
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

}  // namespace
}  // namespace bnn::server
