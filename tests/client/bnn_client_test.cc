// BnnClient against an in-process fake of the service: the chunking of the
// client-streaming calls, the reassembly of ExportSnapshot's stream, the
// deadline over a whole stream, the request fields of the new RPCs, the
// bearer token, and TLS against the fake served with certificates made by
// openssl. The real server is exercised by tests/integration.
#include "client/bnn_client.h"

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include <absl/strings/str_cat.h>
#include <absl/time/clock.h>
#include <absl/time/time.h>
#include <gmock/gmock.h>
#include <grpcpp/security/server_credentials.h>
#include <grpcpp/server.h>
#include <grpcpp/server_builder.h>
#include <grpcpp/support/channel_arguments.h>
#include <gtest/gtest.h>

namespace bnn::client {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

// Serves one stored snapshot, records what the client streams in, and
// answers the unary calls with what it was asked.
class FakeService final : public v1::BnnService::Service {
 public:
  // ExportSnapshot of "snap" streams `bytes` in chunks of `chunk_size`,
  // sleeping `chunk_delay` before each.
  std::string bytes;
  size_t chunk_size = 1;
  absl::Duration chunk_delay;

  grpc::Status ExportSnapshot(
      grpc::ServerContext* context, const v1::ExportSnapshotRequest* request,
      grpc::ServerWriter<v1::SnapshotChunk>* writer) override {
    // The model reference "m@stable" names "snap", version 3 of "m".
    const bool by_model = request->model() == "m@stable";
    if (request->snapshot_id() != "snap" && !by_model) {
      return NotFound(*request);
    }
    for (size_t at = 0; at < bytes.size(); at += chunk_size) {
      absl::SleepFor(chunk_delay);
      if (context->IsCancelled()) return grpc::Status::CANCELLED;
      v1::SnapshotChunk chunk;
      if (at == 0) {
        chunk.set_snapshot_id("snap");
        if (by_model) {
          chunk.set_model_name("m");
          chunk.set_model_version(3);
        }
      }
      chunk.set_data(bytes.substr(at, chunk_size));
      if (!writer->Write(chunk)) break;
    }
    return grpc::Status::OK;
  }

  grpc::Status ImportSnapshot(grpc::ServerContext* context,
                              grpc::ServerReader<v1::SnapshotChunk>* reader,
                              v1::SnapshotInfo* response) override {
    RecordAuthorization(*context);
    std::lock_guard<std::mutex> lock(mu_);
    imported_.clear();
    import_chunk_sizes_.clear();
    v1::SnapshotChunk chunk;
    while (reader->Read(&chunk)) {
      import_chunk_sizes_.push_back(chunk.data().size());
      imported_ += chunk.data();
    }
    response->set_snapshot_id("snap-imported");
    response->set_size_bytes(static_cast<int64_t>(imported_.size()));
    return grpc::Status::OK;
  }

  grpc::Status AppendRows(grpc::ServerContext*,
                          grpc::ServerReader<v1::AppendRowsRequest>* reader,
                          v1::DatasetInfo* response) override {
    std::lock_guard<std::mutex> lock(mu_);
    append_header_.reset();
    append_chunk_rows_.clear();
    v1::AppendRowsRequest request;
    int64_t rows = 0;
    while (reader->Read(&request)) {
      if (request.has_header()) {
        append_header_ = request.header();
      } else {
        append_chunk_rows_.push_back(request.chunk().rows_size());
        rows += request.chunk().rows_size();
      }
    }
    response->set_dataset_id(append_header_ ? append_header_->dataset_id()
                                            : "");
    response->set_num_rows(rows);
    response->set_version(2);
    return grpc::Status::OK;
  }

  grpc::Status GetDataset(grpc::ServerContext* context,
                          const v1::GetDatasetRequest* request,
                          v1::DatasetInfo* response) override {
    RecordAuthorization(*context);
    response->set_dataset_id(request->dataset_id());
    // Unset means the latest, which this fake calls version 7.
    response->set_version(request->has_version() ? request->version() : 7);
    return grpc::Status::OK;
  }

  grpc::Status ListSnapshots(grpc::ServerContext*,
                             const v1::ListSnapshotsRequest* request,
                             v1::ListSnapshotsResponse* response) override {
    for (const char* dataset : {"ds-a", "ds-b", "ds-a"}) {
      if (request->dataset_id().empty() || request->dataset_id() == dataset) {
        response->add_snapshots()->set_dataset_id(dataset);
      }
    }
    return grpc::Status::OK;
  }

  grpc::Status DeleteSnapshot(grpc::ServerContext*,
                              const v1::DeleteSnapshotRequest* request,
                              v1::DeleteSnapshotResponse*) override {
    // "published" needs force, as a snapshot a model version points at.
    if (request->snapshot_id() == "published" && !request->force()) {
      return grpc::Status(grpc::StatusCode::FAILED_PRECONDITION,
                          "published as model m version 1");
    }
    if (request->snapshot_id() != "snap" &&
        request->snapshot_id() != "published") {
      return NotFound(*request);
    }
    return grpc::Status::OK;
  }

  // Five models, "m0".."m4", two per page.
  grpc::Status ListModels(grpc::ServerContext*,
                          const v1::ListModelsRequest* request,
                          v1::ListModelsResponse* response) override {
    int next = 0;
    if (!request->page_token().empty())
      next = request->page_token()[1] - '0' + 1;
    for (int i = next; i < 5 && i < next + 2; ++i) {
      response->add_models()->set_name("m" + std::to_string(i));
    }
    if (next + 2 < 5)
      response->set_next_page_token("m" + std::to_string(next + 1));
    return grpc::Status::OK;
  }

  grpc::Status DeleteDataset(grpc::ServerContext*,
                             const v1::DeleteDatasetRequest* request,
                             v1::DeleteDatasetResponse* response) override {
    // Names resolve to ids.
    response->set_dataset_id(request->dataset_id() == "cubic"
                                 ? "ds-0000000000000001"
                                 : request->dataset_id());
    return grpc::Status::OK;
  }

  grpc::Status Acquire(grpc::ServerContext*, const v1::AcquireRequest* request,
                       v1::AcquireResponse* response) override {
    // Echoes the pool size so the test can see which pool arrived.
    response->set_pool_rows(request->has_rows() ? request->rows().rows_size()
                                                : -1);
    for (int i = 0; i < request->k(); ++i) response->add_indices(i);
    return grpc::Status::OK;
  }

  // Echoes what arrived: the dense Predict's packed rows, Evaluate's
  // packed rows and targets.
  grpc::Status Predict(grpc::ServerContext*, const v1::PredictRequest* request,
                       v1::PredictResponse* response) override {
    if (request->rows_size() > 0 || !request->has_features()) {
      return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT,
                          "expected packed features");
    }
    response->set_snapshot_id(request->snapshot_id());
    response->set_num_samples(request->features().shape(0));
    response->mutable_class_values()->Add(request->features().f64().begin(),
                                          request->features().f64().end());
    return grpc::Status::OK;
  }
  grpc::Status Evaluate(grpc::ServerContext*,
                        const v1::EvaluateRequest* request,
                        v1::EvaluateResponse* response) override {
    response->set_num_rows(request->rows().targets().shape(0));
    response->set_rmse(request->rows().targets().f64(0));
    return grpc::Status::OK;
  }

  // 15 jobs, job-14 first; page tokens are the index of the next job.
  grpc::Status ListJobs(grpc::ServerContext*,
                        const v1::ListJobsRequest* request,
                        v1::ListJobsResponse* response) override {
    constexpr int kJobs = 15;
    int next =
        request->page_token().empty() ? 0 : std::stoi(request->page_token());
    {
      std::lock_guard<std::mutex> lock(mu_);
      page_sizes_.push_back(request->page_size());
    }
    for (int i = 0; i < request->page_size() && next < kJobs; ++i, ++next) {
      response->add_jobs()->set_job_id("job-" +
                                       std::to_string(kJobs - 1 - next));
    }
    if (next < kJobs) response->set_next_page_token(std::to_string(next));
    return grpc::Status::OK;
  }

  // A job of 6 steps whose first stream breaks (UNAVAILABLE, as a server
  // restarting) after step 3; later streams continue after after_step.
  grpc::Status WatchJob(grpc::ServerContext*,
                        const v1::WatchJobRequest* request,
                        grpc::ServerWriter<v1::JobEvent>* writer) override {
    int watches = 0;
    {
      std::lock_guard<std::mutex> lock(mu_);
      after_steps_.push_back(request->has_after_step() ? request->after_step()
                                                       : -1);
      watches = static_cast<int>(after_steps_.size());
    }
    v1::JobEvent current;
    current.set_kind(v1::JobEvent::KIND_CURRENT);
    current.set_state(v1::JOB_STATE_RUNNING);
    writer->Write(current);
    const int64_t after = request->has_after_step() ? request->after_step() : 0;
    for (int64_t step = after + 1; step <= 6; ++step) {
      if (watches == 1 && step > 3) {
        return grpc::Status(grpc::StatusCode::UNAVAILABLE, "restarting");
      }
      v1::JobEvent progress;
      progress.set_kind(v1::JobEvent::KIND_PROGRESS);
      progress.set_state(v1::JOB_STATE_RUNNING);
      progress.set_step(step);
      writer->Write(progress);
    }
    v1::JobEvent done;
    done.set_kind(v1::JobEvent::KIND_STATE);
    done.set_state(v1::JOB_STATE_SUCCEEDED);
    writer->Write(done);
    return grpc::Status::OK;
  }

  grpc::Status GetJob(grpc::ServerContext*, const v1::GetJobRequest* request,
                      v1::Job* response) override {
    response->set_job_id(request->job_id());
    response->set_state(v1::JOB_STATE_SUCCEEDED);
    return grpc::Status::OK;
  }

  std::vector<int> page_sizes() const {
    std::lock_guard<std::mutex> lock(mu_);
    return page_sizes_;
  }
  std::vector<int64_t> after_steps() const {
    std::lock_guard<std::mutex> lock(mu_);
    return after_steps_;
  }

  // The authorization metadata of the last GetDataset or ImportSnapshot
  // call, "(none)" if it had none.
  std::string authorization() const {
    std::lock_guard<std::mutex> lock(mu_);
    return authorization_;
  }
  std::string imported() const {
    std::lock_guard<std::mutex> lock(mu_);
    return imported_;
  }
  std::vector<size_t> import_chunk_sizes() const {
    std::lock_guard<std::mutex> lock(mu_);
    return import_chunk_sizes_;
  }
  std::optional<v1::AppendHeader> append_header() const {
    std::lock_guard<std::mutex> lock(mu_);
    return append_header_;
  }
  std::vector<int> append_chunk_rows() const {
    std::lock_guard<std::mutex> lock(mu_);
    return append_chunk_rows_;
  }

 private:
  void RecordAuthorization(const grpc::ServerContext& context) {
    const auto& metadata = context.client_metadata();
    const auto it = metadata.find("authorization");
    std::lock_guard<std::mutex> lock(mu_);
    authorization_ = it == metadata.end()
                         ? "(none)"
                         : std::string(it->second.data(), it->second.size());
  }

  template <typename Request>
  static grpc::Status NotFound(const Request& request) {
    return grpc::Status(
        grpc::StatusCode::NOT_FOUND,
        "snapshot_id '" + request.snapshot_id() + "' not found");
  }

  mutable std::mutex mu_;
  std::string authorization_;
  std::string imported_;
  std::vector<size_t> import_chunk_sizes_;
  std::optional<v1::AppendHeader> append_header_;
  std::vector<int> append_chunk_rows_;
  std::vector<int> page_sizes_;
  std::vector<int64_t> after_steps_;
};

class BnnClientTest : public ::testing::Test {
 protected:
  void SetUp() override {
    grpc::ServerBuilder builder;
    builder.RegisterService(&service_);
    server_ = builder.BuildAndStart();
    ASSERT_NE(server_, nullptr);
    options_.chunk_bytes = 1000;
    options_.chunk_rows = 2;
    options_.rpc_timeout = absl::Seconds(10);
    dir_ = testing::TempDir() + "/bnn_client_test";
    std::filesystem::create_directories(dir_);
  }

  void TearDown() override {
    server_->Shutdown();
    std::filesystem::remove_all(dir_);
  }

  std::unique_ptr<BnnClient> Client() {
    absl::StatusOr<std::unique_ptr<BnnClient>> client = BnnClient::Create(
        server_->InProcessChannel(grpc::ChannelArguments()), options_);
    EXPECT_TRUE(client.ok()) << client.status();
    return client.ok() ? *std::move(client) : nullptr;
  }

  // 2500 bytes covering every byte value, NULs included.
  static std::string SnapshotBytes() {
    std::string bytes(2500, '\0');
    for (size_t i = 0; i < bytes.size(); ++i) {
      bytes[i] = static_cast<char>(i * 7 % 256);
    }
    return bytes;
  }

  FakeService service_;
  std::unique_ptr<grpc::Server> server_;
  BnnClient::Options options_;
  std::string dir_;
};

TEST_F(BnnClientTest, ListAllJobsPagesUpToTheLimit) {
  std::unique_ptr<BnnClient> client = Client();
  absl::StatusOr<std::vector<v1::Job>> jobs = client->ListAllJobs({}, 12);
  ASSERT_TRUE(jobs.ok()) << jobs.status();
  ASSERT_EQ(jobs->size(), 12u);
  EXPECT_EQ(jobs->front().job_id(), "job-14");
  EXPECT_EQ(jobs->back().job_id(), "job-3");
  // All of them, fewer than asked for.
  jobs = client->ListAllJobs({}, 2000);
  ASSERT_TRUE(jobs.ok()) << jobs.status();
  EXPECT_EQ(jobs->size(), 15u);
  // One page of 12, then pages of at most 1000 (the server's limit).
  EXPECT_THAT(service_.page_sizes(), ElementsAre(12, 1000));
}

TEST_F(BnnClientTest, WatchReconnectsAfterTheLastStepItSaw) {
  std::unique_ptr<BnnClient> client = Client();
  std::vector<int64_t> steps;
  int currents = 0;
  absl::StatusOr<v1::Job> job = client->WatchJobUntilDone(
      "job-1", absl::Seconds(10),
      [&](const v1::JobEvent& event) {
        if (event.kind() == v1::JobEvent::KIND_PROGRESS) {
          steps.push_back(event.step());
        }
        currents += event.kind() == v1::JobEvent::KIND_CURRENT;
      },
      absl::Milliseconds(1));
  ASSERT_TRUE(job.ok()) << job.status();
  EXPECT_EQ(job->state(), v1::JOB_STATE_SUCCEEDED);
  EXPECT_THAT(steps, ElementsAre(1, 2, 3, 4, 5, 6));
  EXPECT_EQ(currents, 2);
  EXPECT_THAT(service_.after_steps(), ElementsAre(-1, 3));
}

TEST_F(BnnClientTest, AWatchCanBeStoppedByItsCallback) {
  std::unique_ptr<BnnClient> client = Client();
  int seen = 0;
  EXPECT_TRUE(client
                  ->WatchJob("job-1", 2, absl::Seconds(10),
                             [&](const v1::JobEvent&) { return ++seen < 2; })
                  .ok());
  EXPECT_EQ(seen, 2);
}

TEST_F(BnnClientTest, ImportSendsTheFileInChunksOfChunkBytes) {
  const std::string path = dir_ + "/snap.bin";
  std::ofstream(path, std::ios::binary) << SnapshotBytes();
  std::unique_ptr<BnnClient> client = Client();
  absl::StatusOr<v1::SnapshotInfo> info = client->ImportSnapshotFromFile(path);
  ASSERT_TRUE(info.ok()) << info.status();
  EXPECT_EQ(info->snapshot_id(), "snap-imported");
  EXPECT_EQ(service_.imported(), SnapshotBytes());
  EXPECT_THAT(service_.import_chunk_sizes(), ElementsAre(1000, 1000, 500));

  info = client->ImportSnapshot(SnapshotBytes().substr(0, 2000));
  ASSERT_TRUE(info.ok()) << info.status();
  EXPECT_EQ(service_.imported(), SnapshotBytes().substr(0, 2000));
  EXPECT_THAT(service_.import_chunk_sizes(), ElementsAre(1000, 1000));
}

TEST_F(BnnClientTest, ListModelsFollowsEveryPage) {
  absl::StatusOr<std::vector<v1::ModelInfo>> models = Client()->ListModels();
  ASSERT_TRUE(models.ok()) << models.status();
  std::vector<std::string> names;
  for (const v1::ModelInfo& model : *models) names.push_back(model.name());
  EXPECT_THAT(names, ElementsAre("m0", "m1", "m2", "m3", "m4"));
}

TEST_F(BnnClientTest, ExportByModelReferenceSaysWhatWasSent) {
  service_.bytes = SnapshotBytes();
  service_.chunk_size = 1000;
  const std::string path = dir_ + "/model.bin";
  v1::ExportSnapshotRequest request;
  request.set_model("m@stable");
  v1::SnapshotChunk sent;
  absl::StatusOr<int64_t> written =
      Client()->ExportSnapshotToFile(request, path, &sent);
  ASSERT_TRUE(written.ok()) << written.status();
  EXPECT_EQ(*written, 2500);
  EXPECT_EQ(sent.snapshot_id(), "snap");
  EXPECT_EQ(sent.model_name(), "m");
  EXPECT_EQ(sent.model_version(), 3);
  EXPECT_TRUE(sent.data().empty());
}

TEST_F(BnnClientTest, DeletesSendForce) {
  std::unique_ptr<BnnClient> client = Client();
  EXPECT_EQ(client->DeleteSnapshot("published").code(),
            absl::StatusCode::kFailedPrecondition);
  EXPECT_TRUE(client->DeleteSnapshot("published", /*force=*/true).ok());
  absl::StatusOr<std::string> deleted = client->DeleteDataset("cubic", true);
  ASSERT_TRUE(deleted.ok()) << deleted.status();
  EXPECT_EQ(*deleted, "ds-0000000000000001");
}

TEST_F(BnnClientTest, ImportOfAMissingFileFailsLocally) {
  absl::StatusOr<v1::SnapshotInfo> info =
      Client()->ImportSnapshotFromFile(dir_ + "/missing.bin");
  EXPECT_EQ(info.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(info.status().message(), HasSubstr("missing.bin"));
}

TEST_F(BnnClientTest, ExportReassemblesTheStream) {
  service_.bytes = SnapshotBytes();
  service_.chunk_size = 333;
  std::unique_ptr<BnnClient> client = Client();
  absl::StatusOr<std::string> bytes = client->ExportSnapshotToString("snap");
  ASSERT_TRUE(bytes.ok()) << bytes.status();
  EXPECT_EQ(*bytes, SnapshotBytes());

  const std::string path = dir_ + "/exported.bin";
  absl::StatusOr<int64_t> written = client->ExportSnapshotToFile("snap", path);
  ASSERT_TRUE(written.ok()) << written.status();
  EXPECT_EQ(*written, 2500);
  std::ifstream in(path, std::ios::binary);
  EXPECT_EQ(std::string(std::istreambuf_iterator<char>(in), {}),
            SnapshotBytes());
  EXPECT_FALSE(std::filesystem::exists(path + ".partial"));
}

TEST_F(BnnClientTest, AFailedExportLeavesNoFile) {
  const std::string path = dir_ + "/never.bin";
  absl::StatusOr<int64_t> written =
      Client()->ExportSnapshotToFile("no-such-snapshot", path);
  EXPECT_EQ(written.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(written.status().message(), HasSubstr("no-such-snapshot"));
  EXPECT_FALSE(std::filesystem::exists(path));
  EXPECT_FALSE(std::filesystem::exists(path + ".partial"));
}

TEST_F(BnnClientTest, TheDeadlineCoversTheWholeExportStream) {
  // Every chunk arrives well within the timeout, the whole stream does not.
  service_.bytes = SnapshotBytes();
  service_.chunk_size = 500;
  service_.chunk_delay = absl::Milliseconds(150);
  options_.rpc_timeout = absl::Milliseconds(400);
  const std::string path = dir_ + "/slow.bin";
  absl::StatusOr<int64_t> written =
      Client()->ExportSnapshotToFile("snap", path);
  EXPECT_EQ(written.status().code(), absl::StatusCode::kDeadlineExceeded)
      << written.status();
  EXPECT_FALSE(std::filesystem::exists(path));
  EXPECT_FALSE(std::filesystem::exists(path + ".partial"));
}

TEST_F(BnnClientTest, ASinkErrorStopsTheExport) {
  service_.bytes = SnapshotBytes();
  service_.chunk_size = 100;
  int calls = 0;
  absl::Status status =
      Client()->ExportSnapshot("snap", [&calls](absl::string_view) {
        return ++calls == 2 ? absl::ResourceExhaustedError("disk full")
                            : absl::OkStatus();
      });
  EXPECT_EQ(status, absl::ResourceExhaustedError("disk full"));
  EXPECT_EQ(calls, 2);
}

TEST_F(BnnClientTest, AppendRowsSendsTheHeaderThenChunks) {
  std::unique_ptr<BnnClient> client = Client();
  const std::vector<double> features = {1, 2, 3, 4, 5};
  const std::vector<double> targets = {10, 20, 30, 40, 50};
  absl::StatusOr<v1::DatasetInfo> info =
      client->AppendRows("ds-1", features, /*num_features=*/1, targets,
                         /*expected_version=*/3);
  ASSERT_TRUE(info.ok()) << info.status();
  EXPECT_EQ(info->num_rows(), 5);
  EXPECT_EQ(info->version(), 2);
  ASSERT_TRUE(service_.append_header().has_value());
  EXPECT_EQ(service_.append_header()->dataset_id(), "ds-1");
  EXPECT_EQ(service_.append_header()->expected_version(), 3);
  EXPECT_THAT(service_.append_chunk_rows(), ElementsAre(2, 2, 1));

  v1::Example row;
  row.add_x(1);
  row.set_y(2);
  info = client->AppendRows("ds-1", std::vector<v1::Example>{row});
  ASSERT_TRUE(info.ok()) << info.status();
  EXPECT_FALSE(service_.append_header()->has_expected_version());
  EXPECT_THAT(service_.append_chunk_rows(), ElementsAre(1));
}

TEST_F(BnnClientTest, DenseAppendChecksSizesLocally) {
  const std::vector<double> features = {1, 2, 3};
  const std::vector<double> targets = {1, 2};
  absl::StatusOr<v1::DatasetInfo> info =
      Client()->AppendRows("ds-1", features, /*num_features=*/1, targets);
  EXPECT_EQ(info.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(info.status().message(), HasSubstr("features"));
  EXPECT_FALSE(service_.append_header().has_value()) << "nothing was sent";
}

TEST_F(BnnClientTest, UnaryCallsCarryTheirFields) {
  std::unique_ptr<BnnClient> client = Client();
  absl::StatusOr<v1::DatasetInfo> latest = client->GetDataset("ds-1");
  ASSERT_TRUE(latest.ok()) << latest.status();
  EXPECT_EQ(latest->version(), 7);
  absl::StatusOr<v1::DatasetInfo> second = client->GetDataset("ds-1", 2);
  ASSERT_TRUE(second.ok()) << second.status();
  EXPECT_EQ(second->version(), 2);

  absl::StatusOr<std::vector<v1::SnapshotInfo>> all = client->ListSnapshots();
  ASSERT_TRUE(all.ok()) << all.status();
  EXPECT_EQ(all->size(), 3u);
  absl::StatusOr<std::vector<v1::SnapshotInfo>> of_b =
      client->ListSnapshots("ds-b");
  ASSERT_TRUE(of_b.ok()) << of_b.status();
  ASSERT_EQ(of_b->size(), 1u);
  EXPECT_EQ(of_b->front().dataset_id(), "ds-b");

  EXPECT_TRUE(client->DeleteSnapshot("snap").ok());
  const absl::Status missing = client->DeleteSnapshot("gone");
  EXPECT_EQ(missing.code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(missing.message(), "snapshot_id 'gone' not found");

  v1::AcquireRequest request;
  request.set_k(2);
  ASSERT_TRUE(
      AddFeatureRows({0.0, 1.0, 2.0}, 1, request.mutable_rows()->mutable_rows())
          .ok());
  absl::StatusOr<v1::AcquireResponse> acquired = client->Acquire(request);
  ASSERT_TRUE(acquired.ok()) << acquired.status();
  EXPECT_EQ(acquired->pool_rows(), 3);
  EXPECT_THAT(acquired->indices(), ElementsAre(0, 1));
}

TEST_F(BnnClientTest, DensePredictSendsPackedRowsAndEvaluateIsCalled) {
  std::unique_ptr<BnnClient> client = Client();
  absl::StatusOr<v1::PredictResponse> predicted =
      client->Predict("snap-1", {1, 2, 3, 4, 5, 6}, 2, 8);
  ASSERT_TRUE(predicted.ok()) << predicted.status();
  EXPECT_EQ(predicted->snapshot_id(), "snap-1");
  EXPECT_EQ(predicted->num_samples(), 3);  // shape[0], the rows
  EXPECT_THAT(predicted->class_values(), ElementsAre(1, 2, 3, 4, 5, 6));

  v1::EvaluateRequest request;
  v1::Tensor* targets = request.mutable_rows()->mutable_targets();
  targets->add_shape(1);
  targets->add_f64(2.5);
  absl::StatusOr<v1::EvaluateResponse> evaluated = client->Evaluate(request);
  ASSERT_TRUE(evaluated.ok()) << evaluated.status();
  EXPECT_EQ(evaluated->num_rows(), 1);
  EXPECT_EQ(evaluated->rmse(), 2.5);
}

TEST(SetPackedRowsTest, ShapeAndValues) {
  v1::Tensor tensor;
  tensor.add_f32(9);  // replaced
  ASSERT_TRUE(SetPackedRows({1, 2, 3, 4, 5, 6}, 3, &tensor).ok());
  EXPECT_THAT(tensor.shape(), ElementsAre(2, 3));
  EXPECT_THAT(tensor.f64(), ElementsAre(1, 2, 3, 4, 5, 6));
  EXPECT_EQ(tensor.f32_size(), 0);
  EXPECT_EQ(SetPackedRows({1, 2, 3}, 2, &tensor).code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(AddFeatureRowsTest, SplitsRowMajorValuesIntoRows) {
  v1::PredictRequest request;
  ASSERT_TRUE(AddFeatureRows({1, 2, 3, 4}, 2, request.mutable_rows()).ok());
  ASSERT_EQ(request.rows_size(), 2);
  EXPECT_THAT(request.rows(1).x(), ElementsAre(3, 4));

  const absl::Status ragged =
      AddFeatureRows({1, 2, 3}, 2, request.mutable_rows());
  EXPECT_EQ(ragged.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(ragged.message(), HasSubstr("3 values"));
  EXPECT_EQ(AddFeatureRows({1}, 0, request.mutable_rows()).code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(request.rows_size(), 2) << "a failed call adds nothing";
}

// ------------------------------------------------------------ token, TLS

TEST_F(BnnClientTest, TheTokenIsSentAsBearerAuthorizationOnEveryCall) {
  options_.token = "s3cr3t-token";
  std::unique_ptr<BnnClient> client = Client();
  ASSERT_TRUE(client->GetDataset("ds-1").ok());
  EXPECT_EQ(service_.authorization(), "Bearer s3cr3t-token");
  // A client-streaming call too.
  ASSERT_TRUE(client->ImportSnapshot("bytes").ok());
  EXPECT_EQ(service_.authorization(), "Bearer s3cr3t-token");

  options_.token.clear();
  ASSERT_TRUE(Client()->GetDataset("ds-1").ok());
  EXPECT_EQ(service_.authorization(), "(none)");
}

TEST(BnnClientOptionsTest, TokenAndTlsFilesAreValidated) {
  BnnClient::Options options;
  options.token = "two words";
  EXPECT_EQ(options.Validate().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(options.Validate().message(), HasSubstr("token"));
  options.token = "line\nbreak";
  EXPECT_EQ(options.Validate().code(), absl::StatusCode::kInvalidArgument);

  options = BnnClient::Options();
  options.tls_cert_file = "client.pem";
  EXPECT_EQ(options.Validate().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(options.Validate().message(), HasSubstr("tls_key_file"));

  options = BnnClient::Options();
  options.tls_ca_file = testing::TempDir() + "/no-such-ca.pem";
  absl::StatusOr<std::unique_ptr<BnnClient>> client =
      BnnClient::Create(options);
  EXPECT_EQ(client.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(client.status().message(), HasSubstr("tls_ca_file"));
  EXPECT_THAT(client.status().message(), HasSubstr("no-such-ca.pem"));
}

// Certificates made with the openssl command line for this test: two
// authorities, a server certificate for "localhost" signed by the first and
// a client certificate signed by the first.
class TlsTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new std::string(testing::TempDir() + "/bnn_client_tls_test");
    std::filesystem::create_directories(*dir_);
    const std::string script = absl::StrCat(
        "set -e; cd '", *dir_, "'\n",
        "key() { openssl genpkey -algorithm EC "
        "-pkeyopt ec_paramgen_curve:prime256v1 -out \"$1\"; }\n",
        "for ca in ca other-ca; do key $ca.key; openssl req -x509 -new "
        "-key $ca.key -subj /CN=$ca -days 2 -out $ca.pem; done\n",
        "printf 'subjectAltName=DNS:localhost\\n' > server.ext\n",
        "printf 'extendedKeyUsage=clientAuth\\n' > client.ext\n",
        "for who in server client; do key $who.key; openssl req -new "
        "-key $who.key -subj /CN=$who -out $who.csr; openssl x509 -req "
        "-in $who.csr -CA ca.pem -CAkey ca.key -CAcreateserial -days 2 "
        "-extfile $who.ext -out $who.pem; done\n");
    std::ofstream(Path("make_certs.sh")) << script;
    const std::string command = absl::StrCat(
        "sh '", Path("make_certs.sh"), "' >'", Path("openssl.log"), "' 2>&1");
    if (std::system(command.c_str()) != 0) {
      openssl_error_ = new std::string(
          absl::StrCat("openssl failed: ", Read(*dir_ + "/openssl.log")));
    }
  }
  static void TearDownTestSuite() {
    std::filesystem::remove_all(*dir_);
    delete dir_;
  }

  void SetUp() override {
    ASSERT_EQ(openssl_error_, nullptr) << *openssl_error_;
  }
  void TearDown() override {
    if (server_ != nullptr) server_->Shutdown();
  }

  static std::string Path(const std::string& name) {
    return absl::StrCat(*dir_, "/", name);
  }
  static std::string Read(const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    return std::string(std::istreambuf_iterator<char>(in), {});
  }

  // Starts a TLS server on a free loopback port; with
  // `require_client_certificate` it accepts only clients with a
  // certificate signed by "ca".
  void StartServer(bool require_client_certificate) {
    grpc::SslServerCredentialsOptions ssl(
        require_client_certificate
            ? GRPC_SSL_REQUEST_AND_REQUIRE_CLIENT_CERTIFICATE_AND_VERIFY
            : GRPC_SSL_DONT_REQUEST_CLIENT_CERTIFICATE);
    ssl.pem_root_certs = Read(Path("ca.pem"));
    ssl.pem_key_cert_pairs.push_back(
        {Read(Path("server.key")), Read(Path("server.pem"))});
    grpc::ServerBuilder builder;
    int port = 0;
    builder.AddListeningPort("127.0.0.1:0", grpc::SslServerCredentials(ssl),
                             &port);
    builder.RegisterService(&service_);
    server_ = builder.BuildAndStart();
    ASSERT_NE(server_, nullptr);
    ASSERT_GT(port, 0);
    options_.target = absl::StrCat("localhost:", port);
    options_.rpc_timeout = absl::Seconds(10);
  }

  // A GetDataset call with `options` (target and timeout filled in).
  absl::Status Call(BnnClient::Options options) {
    options.target = options_.target;
    options.rpc_timeout = options_.rpc_timeout;
    absl::StatusOr<std::unique_ptr<BnnClient>> client =
        BnnClient::Create(options);
    if (!client.ok()) return client.status();
    return (*client)->GetDataset("ds-1").status();
  }

  static std::string* dir_;
  static std::string* openssl_error_;
  FakeService service_;
  std::unique_ptr<grpc::Server> server_;
  BnnClient::Options options_;
};

std::string* TlsTest::dir_ = nullptr;
std::string* TlsTest::openssl_error_ = nullptr;

TEST_F(TlsTest, TheServerIsTrustedOnlyThroughItsAuthority) {
  StartServer(/*require_client_certificate=*/false);
  BnnClient::Options trusting;
  trusting.tls_ca_file = Path("ca.pem");
  trusting.token = "t";
  EXPECT_TRUE(Call(trusting).ok()) << Call(trusting);
  EXPECT_EQ(service_.authorization(), "Bearer t");

  BnnClient::Options other_authority;
  other_authority.tls_ca_file = Path("other-ca.pem");
  EXPECT_EQ(Call(other_authority).code(), absl::StatusCode::kUnavailable);

  // A plaintext client cannot talk to a TLS server.
  EXPECT_EQ(Call(BnnClient::Options()).code(), absl::StatusCode::kUnavailable);
}

TEST_F(TlsTest, AServerThatAsksForAClientCertificateGetsIt) {
  StartServer(/*require_client_certificate=*/true);
  BnnClient::Options with_certificate;
  with_certificate.tls_ca_file = Path("ca.pem");
  with_certificate.tls_cert_file = Path("client.pem");
  with_certificate.tls_key_file = Path("client.key");
  EXPECT_TRUE(Call(with_certificate).ok()) << Call(with_certificate);

  BnnClient::Options without_certificate;
  without_certificate.tls_ca_file = Path("ca.pem");
  EXPECT_EQ(Call(without_certificate).code(), absl::StatusCode::kUnavailable);
}

}  // namespace
}  // namespace bnn::client
