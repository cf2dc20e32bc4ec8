#include "tests/server/service_fixture.h"

#include <atomic>

#include <absl/strings/str_cat.h>
#include <absl/time/clock.h>

namespace bnn::server::testutil {

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

std::vector<v1::RowChunk> RowChunks(const Dataset& data, int chunk_rows) {
  std::vector<v1::RowChunk> chunks;
  for (int64_t i = 0; i < data.num_rows(); ++i) {
    if (i % chunk_rows == 0) chunks.emplace_back();
    v1::Example* example = chunks.back().add_rows();
    example->mutable_x()->Add(data.row(i), data.row(i) + data.num_features);
    example->set_y(data.targets[i]);
  }
  return chunks;
}

v1::UploadDatasetRequest HeaderMessage(v1::Task task, int num_features) {
  v1::UploadDatasetRequest message;
  v1::DatasetHeader* header = message.mutable_header();
  // Dataset names are unique on a server.
  static std::atomic<int> uploads{0};
  header->set_name(absl::StrCat("test data ", ++uploads));
  header->set_task(task);
  header->set_num_features(num_features);
  return message;
}

std::vector<v1::UploadDatasetRequest> UploadMessages(const Dataset& data,
                                                     v1::Task task,
                                                     int chunk_rows) {
  std::vector<v1::UploadDatasetRequest> messages = {
      HeaderMessage(task, static_cast<int>(data.num_features))};
  for (v1::RowChunk& chunk : RowChunks(data, chunk_rows)) {
    *messages.emplace_back().mutable_chunk() = std::move(chunk);
  }
  return messages;
}

std::vector<v1::AppendRowsRequest> AppendMessages(
    const std::string& dataset_id, const Dataset& data,
    std::optional<int64_t> expected_version) {
  std::vector<v1::AppendRowsRequest> messages(1);
  v1::AppendHeader* header = messages[0].mutable_header();
  header->set_dataset_id(dataset_id);
  if (expected_version.has_value()) {
    header->set_expected_version(*expected_version);
  }
  for (v1::RowChunk& chunk : RowChunks(data)) {
    *messages.emplace_back().mutable_chunk() = std::move(chunk);
  }
  return messages;
}

google::protobuf::RepeatedPtrField<v1::Features> FeatureRows(
    const Dataset& data) {
  google::protobuf::RepeatedPtrField<v1::Features> rows;
  for (int64_t i = 0; i < data.num_rows(); ++i) {
    rows.Add()->mutable_x()->Add(data.row(i), data.row(i) + data.num_features);
  }
  return rows;
}

namespace {

// Writes `messages` on a client stream and returns its status.
template <typename Request, typename Writer>
grpc::Status WriteAll(const std::vector<Request>& messages, Writer* writer) {
  for (const Request& message : messages) {
    if (!writer->Write(message)) break;  // the server already answered
  }
  writer->WritesDone();
  return writer->Finish();
}

}  // namespace

ServiceTest::ServiceTest() {
  options_.limits.max_upload_rows = 1000;
  options_.limits.max_predict_samples = 256;
  options_.limits.max_message_bytes = 1 << 20;
  options_.limits.max_snapshot_bytes = 8 << 20;
  // Training keeps the test's priority, as with ServerProcess
  // (tests/test_util/subprocess.h): jobs are waited for with timeouts.
  options_.training_nice = 0;
}

void ServiceTest::SetUp() {
  options_.data_dir = dir_.path();
  options_.listen = "127.0.0.1:0";
  options_.metrics_listen.clear();
  absl::StatusOr<std::unique_ptr<Server>> server = Server::Create(options_);
  ASSERT_TRUE(server.ok()) << server.status();
  server_ = *std::move(server);
  const absl::Status started = server_->Start();
  ASSERT_TRUE(started.ok()) << started;
  metrics_ = &server_->metrics();
  datasets_ = &server_->datasets();
  jobs_ = &server_->jobs();
  stub_ = v1::BnnService::NewStub(grpc::CreateChannel(
      server_->address(), grpc::InsecureChannelCredentials()));
}

void ServiceTest::TearDown() {
  if (server_ != nullptr) {
    EXPECT_TRUE(server_->Shutdown().ok());
  }
}

grpc::Status ServiceTest::Upload(
    const std::vector<v1::UploadDatasetRequest>& messages,
    v1::UploadDatasetResponse* response) {
  grpc::ClientContext context;
  auto writer = stub_->UploadDataset(&context, response);
  return WriteAll(messages, writer.get());
}

std::string ServiceTest::UploadOrDie(const Dataset& data, v1::Task task) {
  v1::UploadDatasetResponse response;
  const grpc::Status status = Upload(UploadMessages(data, task), &response);
  EXPECT_TRUE(status.ok()) << status.error_message();
  return response.dataset().dataset_id();
}

grpc::Status ServiceTest::Append(
    const std::vector<v1::AppendRowsRequest>& messages,
    v1::DatasetInfo* response) {
  grpc::ClientContext context;
  auto writer = stub_->AppendRows(&context, response);
  return WriteAll(messages, writer.get());
}

grpc::Status ServiceTest::GetDataset(const std::string& dataset_id,
                                     std::optional<int64_t> version,
                                     v1::DatasetInfo* response) {
  grpc::ClientContext context;
  v1::GetDatasetRequest request;
  request.set_dataset_id(dataset_id);
  if (version.has_value()) request.set_version(*version);
  return stub_->GetDataset(&context, request, response);
}

v1::StartTrainingRequest ServiceTest::Training(const std::string& dataset_id,
                                               int epochs) {
  v1::StartTrainingRequest request;
  request.set_dataset_id(dataset_id);
  request.set_method("slang");
  request.mutable_model()->add_hidden_sizes(8);
  request.mutable_slang()->set_batch_size(10);
  request.set_epochs(epochs);
  request.set_seed(1);
  return request;
}

grpc::Status ServiceTest::StartTraining(const v1::StartTrainingRequest& request,
                                        std::string* job_id) {
  grpc::ClientContext context;
  v1::StartTrainingResponse response;
  const grpc::Status status =
      stub_->StartTraining(&context, request, &response);
  *job_id = response.job_id();
  return status;
}

v1::Job ServiceTest::WaitForJob(const std::string& job_id, v1::JobState state) {
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

std::string ServiceTest::TrainOrDie(const v1::StartTrainingRequest& request) {
  std::string job_id;
  const grpc::Status status = StartTraining(request, &job_id);
  EXPECT_TRUE(status.ok()) << status.error_message();
  return WaitForJob(job_id, v1::JOB_STATE_SUCCEEDED).snapshot_id();
}

std::string ServiceTest::TrainedSnapshot(const Dataset& data, v1::Task task) {
  return TrainOrDie(Training(UploadOrDie(data, task), 20));
}

grpc::Status ServiceTest::Predict(const v1::PredictRequest& request,
                                  v1::PredictResponse* response) {
  grpc::ClientContext context;
  return stub_->Predict(&context, request, response);
}

grpc::Status ServiceTest::Acquire(const v1::AcquireRequest& request,
                                  v1::AcquireResponse* response) {
  grpc::ClientContext context;
  return stub_->Acquire(&context, request, response);
}

grpc::Status ServiceTest::GetSnapshot(const std::string& snapshot_id,
                                      v1::SnapshotInfo* response) {
  grpc::ClientContext context;
  v1::GetSnapshotRequest request;
  request.set_snapshot_id(snapshot_id);
  return stub_->GetSnapshot(&context, request, response);
}

grpc::Status ServiceTest::DeleteSnapshot(const std::string& snapshot_id) {
  grpc::ClientContext context;
  v1::DeleteSnapshotRequest request;
  request.set_snapshot_id(snapshot_id);
  v1::DeleteSnapshotResponse response;
  return stub_->DeleteSnapshot(&context, request, &response);
}

grpc::Status ServiceTest::Export(const std::string& snapshot_id,
                                 std::string* bytes,
                                 std::vector<size_t>* chunk_sizes) {
  grpc::ClientContext context;
  v1::ExportSnapshotRequest request;
  request.set_snapshot_id(snapshot_id);
  auto reader = stub_->ExportSnapshot(&context, request);
  v1::SnapshotChunk chunk;
  while (reader->Read(&chunk)) {
    bytes->append(chunk.data());
    if (chunk_sizes != nullptr) chunk_sizes->push_back(chunk.data().size());
  }
  return reader->Finish();
}

grpc::Status ServiceTest::Import(const std::string& bytes, size_t chunk_bytes,
                                 v1::SnapshotInfo* response) {
  std::vector<v1::SnapshotChunk> chunks;
  for (size_t offset = 0; offset < bytes.size(); offset += chunk_bytes) {
    chunks.emplace_back().set_data(bytes.substr(offset, chunk_bytes));
  }
  grpc::ClientContext context;
  auto writer = stub_->ImportSnapshot(&context, response);
  return WriteAll(chunks, writer.get());
}

void ServiceTest::WaitForFinishedRpcs(const std::string& rpc,
                                      const std::string& code, int count) {
  const std::string series =
      absl::StrCat("bnn_rpc_requests_total{code=\"", code, "\",rpc=\"", rpc,
                   "\"} ", count, "\n");
  const absl::Time deadline = absl::Now() + absl::Seconds(10);
  while (metrics_->registry().Serialize().find(series) == std::string::npos) {
    if (absl::Now() > deadline) {
      ADD_FAILURE() << "no " << series << " in\n"
                    << metrics_->registry().Serialize();
      return;
    }
    absl::SleepFor(absl::Milliseconds(5));
  }
}

}  // namespace bnn::server::testutil
