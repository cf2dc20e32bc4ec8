// Walks the "Status by RPC and failure" table of docs/api.md against the real
// bnn-server: every row names an RPC, a failure and the status code the
// server must return; the test runs that failure (one scenario per row,
// below) and compares the code. A row without a scenario, or a scenario
// without a row, fails the test, so the document and the server cannot drift
// apart. The server has a token file; calls send an admin token unless the
// row is about tokens.
#include <chrono>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <functional>
#include <limits>
#include <map>
#include <memory>
#include <signal.h>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include <absl/strings/str_cat.h>
#include <absl/strings/str_split.h>
#include <absl/strings/strip.h>
#include <absl/time/clock.h>
#include <gmock/gmock.h>
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>

#include "bnn/io/sha256.h"
#include "bnn/v1/bnn_service.grpc.pb.h"

#include "server/auth/scope.h"
#include "server/auth/token_file.h"
#include "tests/server/server_binary.h"
#include "tests/server/server_test_util.h"

namespace bnn::server {
namespace {

using ::bnn::server::testutil::CubicDataset;
using ::bnn::server::testutil::NewClientChannel;
using ::bnn::server::testutil::ReadFileOrEmpty;
using ::bnn::server::testutil::StartTraining;
using ::bnn::server::testutil::TempDir;
using ::bnn::server::testutil::UploadCubic;
using ::bnn::server::testutil::WaitForJob;
using ::bnn::testing::ServerProcess;

constexpr char kUnknownDataset[] = "ds-0000000000000000";
constexpr char kUnknownJob[] = "job-0000000000000000";
constexpr char kUnknownSnapshot[] = "snap-0000000000000000";

struct Row {
  std::string rpc;
  std::string failure;
  std::string code;
};

// The rows of the table after the "<!-- status table -->" marker.
std::vector<Row> ReadTable(const std::string& path) {
  std::ifstream in(path);
  std::string line;
  std::vector<Row> rows;
  bool in_table = false;
  while (std::getline(in, line)) {
    if (line == "<!-- status table -->") {
      in_table = true;
      continue;
    }
    if (!in_table) continue;
    if (line.empty()) break;
    const std::vector<std::string> cells = absl::StrSplit(line, '|');
    // "| a | b | c | d |" splits into 6 cells, the outer two empty.
    if (cells.size() != 6) continue;
    Row row;
    row.rpc = std::string(absl::StripAsciiWhitespace(cells[1]));
    row.failure = std::string(absl::StripAsciiWhitespace(cells[2]));
    row.code = std::string(absl::StripAsciiWhitespace(cells[4]));
    if (row.rpc == "RPC" || row.rpc.rfind("---", 0) == 0) continue;
    for (std::string* cell : {&row.rpc, &row.code}) {
      *cell =
          std::string(absl::StripSuffix(absl::StripPrefix(*cell, "`"), "`"));
    }
    rows.push_back(row);
  }
  return rows;
}

std::string CodeName(grpc::StatusCode code) {
  static const auto* const kNames = new std::map<grpc::StatusCode, std::string>{
      {grpc::StatusCode::OK, "OK"},
      {grpc::StatusCode::CANCELLED, "CANCELLED"},
      {grpc::StatusCode::UNKNOWN, "UNKNOWN"},
      {grpc::StatusCode::INVALID_ARGUMENT, "INVALID_ARGUMENT"},
      {grpc::StatusCode::DEADLINE_EXCEEDED, "DEADLINE_EXCEEDED"},
      {grpc::StatusCode::NOT_FOUND, "NOT_FOUND"},
      {grpc::StatusCode::ALREADY_EXISTS, "ALREADY_EXISTS"},
      {grpc::StatusCode::PERMISSION_DENIED, "PERMISSION_DENIED"},
      {grpc::StatusCode::RESOURCE_EXHAUSTED, "RESOURCE_EXHAUSTED"},
      {grpc::StatusCode::FAILED_PRECONDITION, "FAILED_PRECONDITION"},
      {grpc::StatusCode::ABORTED, "ABORTED"},
      {grpc::StatusCode::OUT_OF_RANGE, "OUT_OF_RANGE"},
      {grpc::StatusCode::UNIMPLEMENTED, "UNIMPLEMENTED"},
      {grpc::StatusCode::INTERNAL, "INTERNAL"},
      {grpc::StatusCode::UNAVAILABLE, "UNAVAILABLE"},
      {grpc::StatusCode::DATA_LOSS, "DATA_LOSS"},
      {grpc::StatusCode::UNAUTHENTICATED, "UNAUTHENTICATED"},
  };
  const auto it = kNames->find(code);
  return it == kNames->end() ? "?" : it->second;
}

// Limits of the server under test, small enough to exceed cheaply.
constexpr int kMaxUploadRows = 100;
constexpr int kMaxPredictRows = 2000;
constexpr int kMaxPredictSamples = 64;
constexpr int kMaxSnapshotBytes = 100000;
constexpr int kMaxModelVersions = 2;
constexpr int kMaxModelAliases = 1;
constexpr int kMaxQueuedJobs = 1;
constexpr int kMaxWatchers = 2;

class StatusTableTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const std::string token_file = dir_.path() + "/tokens";
    std::ofstream tokens(token_file);
    for (const auto& [scope, token] :
         {std::pair{"admin", &admin_token_}, {"predict", &predict_token_}}) {
      absl::StatusOr<NewToken> created =
          CreateToken(*ScopeSet::Parse(scope), scope);
      ASSERT_TRUE(created.ok()) << created.status();
      tokens << FormatTokenLine(created->entry) << "\n";
      *token = created->token;
    }
    tokens.close();
    flags_ = {
        "--token-file", token_file, "--threads=1",
        "--max-upload-rows=" + std::to_string(kMaxUploadRows),
        "--max-predict-rows=" + std::to_string(kMaxPredictRows),
        "--max-predict-samples=" + std::to_string(kMaxPredictSamples),
        "--max-snapshot-bytes=" + std::to_string(kMaxSnapshotBytes),
        "--max-model-versions=" + std::to_string(kMaxModelVersions),
        "--max-model-aliases=" + std::to_string(kMaxModelAliases),
        "--max-queued-jobs=" + std::to_string(kMaxQueuedJobs),
        "--max-watchers-per-client=" + std::to_string(kMaxWatchers),
        // A Predict of kMaxPredictRows rows x 64 samples through the
        // 200-200 net below takes two chunks of ~2.7e9 multiply-adds each.
        "--max-request-seconds=0.05"};
    StartServer();

    absl::StatusOr<std::string> dataset_id = UploadCubic(*stub_, 30);
    ASSERT_TRUE(dataset_id.ok()) << dataset_id.status();
    dataset_id_ = *dataset_id;
    v1::StartTrainingRequest train;
    train.set_dataset_id(dataset_id_);
    train.set_method("slang");
    train.set_epochs(1);
    train.set_seed(1);
    train.mutable_model()->add_hidden_sizes(200);
    train.mutable_model()->add_hidden_sizes(200);
    (*train.mutable_params())["batch_size"] = "30";
    absl::StatusOr<std::string> job_id = StartTraining(*stub_, train);
    ASSERT_TRUE(job_id.ok()) << job_id.status();
    const absl::StatusOr<v1::Job> job =
        WaitForJob(*stub_, *job_id, [](const v1::Job& j) {
          return j.state() == v1::JOB_STATE_SUCCEEDED ||
                 j.state() == v1::JOB_STATE_FAILED;
        });
    ASSERT_TRUE(job.ok()) << job.status();
    ASSERT_EQ(job->state(), v1::JOB_STATE_SUCCEEDED) << job->error();
    snapshot_id_ = job->snapshot_id();
  }

  // Starts the server on the test's data directory with flags_.
  void StartServer() {
    absl::StatusOr<std::unique_ptr<ServerProcess>> server =
        ServerProcess::Start(BNN_SERVER_PATH, dir_.path() + "/data",
                             dir_.path() + "/server.log", flags_);
    ASSERT_TRUE(server.ok()) << server.status();
    server_ = *std::move(server);
    stub_ = StubWithToken(admin_token_);
  }

  // A snapshot whose blob a bit flip damaged while the server was down:
  // trained (tiny), its blob (named by the SHA-256 of the exported bytes)
  // damaged between a stop and a restart, which quarantines it. Made once.
  const std::string& QuarantinedSnapshot() {
    if (!quarantined_.empty()) return quarantined_;
    v1::StartTrainingRequest train;
    train.set_dataset_id(dataset_id_);
    train.set_method("slang");
    train.set_epochs(1);
    train.set_seed(7);
    train.mutable_model()->add_hidden_sizes(2);
    const absl::StatusOr<std::string> job_id = StartTraining(*stub_, train);
    EXPECT_TRUE(job_id.ok()) << job_id.status();
    const absl::StatusOr<v1::Job> job =
        WaitForJob(*stub_, job_id.value_or(""), [](const v1::Job& j) {
          return j.state() == v1::JOB_STATE_SUCCEEDED ||
                 j.state() == v1::JOB_STATE_FAILED;
        });
    EXPECT_TRUE(job.ok() && job->state() == v1::JOB_STATE_SUCCEEDED);
    std::string bytes;
    EXPECT_TRUE(Export(job->snapshot_id(), &bytes).ok());
    const std::string blob = Sha256Hex(bytes);
    EXPECT_EQ(server_->Stop(SIGTERM).value_or(-1), 0);
    const std::string path = absl::StrCat(dir_.path(), "/data/blobs/objects/",
                                          blob.substr(0, 2), "/", blob);
    std::string damaged = ReadFileOrEmpty(path);
    EXPECT_FALSE(damaged.empty()) << path;
    if (!damaged.empty()) damaged[damaged.size() / 2] ^= 0x01;
    std::filesystem::remove(path);
    std::ofstream(path, std::ios::binary) << damaged;
    StartServer();
    quarantined_ = job->snapshot_id();
    return quarantined_;
  }

  void TearDown() override {
    if (HasFailure() && server_ != nullptr) std::cerr << server_->Log();
    if (server_ != nullptr) {
      EXPECT_EQ(server_->Stop(SIGTERM).value_or(-1), 0);
    }
  }

  // A header and `rows` rows of the cubic set.
  static std::vector<v1::UploadDatasetRequest> UploadMessages(int rows) {
    std::vector<v1::UploadDatasetRequest> messages(2);
    messages[0].mutable_header()->set_name("cubic");
    messages[0].mutable_header()->set_task(v1::TASK_REGRESSION);
    messages[0].mutable_header()->set_num_features(1);
    const Dataset data = CubicDataset(rows);
    for (int i = 0; i < rows; ++i) {
      v1::Example* row = messages[1].mutable_chunk()->add_rows();
      row->add_x(data.features[i]);
      row->set_y(data.targets[i]);
    }
    return messages;
  }
  // A stub sending `token` (none if empty) instead of the admin token.
  std::unique_ptr<v1::BnnService::Stub> StubWithToken(
      const std::string& token) const {
    return v1::BnnService::NewStub(NewClientChannel(server_->address(), token));
  }
  grpc::Status Upload(const std::vector<v1::UploadDatasetRequest>& messages,
                      v1::BnnService::Stub* stub = nullptr) {
    grpc::ClientContext context;
    v1::UploadDatasetResponse response;
    auto writer = (stub == nullptr ? stub_.get() : stub)
                      ->UploadDataset(&context, &response);
    for (const auto& m : messages) {
      if (!writer->Write(m)) break;
    }
    writer->WritesDone();
    return writer->Finish();
  }
  // An append of `rows` rows (each of `width` features) to `dataset_id`.
  grpc::Status Append(const std::string& dataset_id, int rows, int width = 1,
                      int64_t expected_version = 0) {
    grpc::ClientContext context;
    v1::DatasetInfo response;
    auto writer = stub_->AppendRows(&context, &response);
    v1::AppendRowsRequest header;
    header.mutable_header()->set_dataset_id(dataset_id);
    if (expected_version > 0) {
      header.mutable_header()->set_expected_version(expected_version);
    }
    v1::AppendRowsRequest chunk;
    for (int i = 0; i < rows; ++i) {
      v1::Example* row = chunk.mutable_chunk()->add_rows();
      for (int j = 0; j < width; ++j) row->add_x(0.5);
      row->set_y(1.0);
    }
    if (writer->Write(header)) writer->Write(chunk);
    writer->WritesDone();
    return writer->Finish();
  }
  grpc::Status Import(const std::string& bytes) {
    grpc::ClientContext context;
    v1::SnapshotInfo response;
    auto writer = stub_->ImportSnapshot(&context, &response);
    constexpr size_t kChunk = 64 << 10;
    for (size_t at = 0; at < bytes.size(); at += kChunk) {
      v1::SnapshotChunk chunk;
      chunk.set_data(bytes.substr(at, kChunk));
      if (!writer->Write(chunk)) break;
    }
    writer->WritesDone();
    return writer->Finish();
  }
  grpc::Status Export(const std::string& snapshot_id, std::string* bytes,
                      v1::BnnService::Stub* stub = nullptr) {
    grpc::ClientContext context;
    v1::ExportSnapshotRequest request;
    request.set_snapshot_id(snapshot_id);
    auto reader = (stub == nullptr ? stub_.get() : stub)
                      ->ExportSnapshot(&context, request);
    v1::SnapshotChunk chunk;
    while (reader->Read(&chunk)) bytes->append(chunk.data());
    return reader->Finish();
  }
  template <typename Request, typename Response, typename Method>
  grpc::Status Unary(Method method, const Request& request,
                     absl::Duration deadline = absl::Seconds(60),
                     v1::BnnService::Stub* stub = nullptr) {
    grpc::ClientContext context;
    context.set_deadline(absl::ToChronoTime(absl::Now() + deadline));
    Response response;
    return ((stub == nullptr ? stub_.get() : stub)->*method)(&context, request,
                                                             &response);
  }
  // A SLANG job on the cubic set that runs for minutes unless cancelled.
  v1::StartTrainingRequest LongTraining() const {
    v1::StartTrainingRequest request;
    request.set_dataset_id(dataset_id_);
    request.set_method("slang");
    request.set_epochs(1000000);
    request.set_seed(1);
    request.mutable_model()->add_hidden_sizes(4);
    return request;
  }
  void Cancel(const std::string& job_id) {
    v1::CancelJobRequest request;
    request.set_job_id(job_id);
    EXPECT_TRUE((Unary<v1::CancelJobRequest, v1::Job>(
                     &v1::BnnService::Stub::CancelJob, request))
                    .ok());
  }
  // WatchJob until its first event; the stream's status if there is none.
  grpc::Status WatchFirstEvent(const v1::WatchJobRequest& request) {
    grpc::ClientContext context;
    context.set_deadline(absl::ToChronoTime(absl::Now() + absl::Seconds(60)));
    auto reader = stub_->WatchJob(&context, request);
    v1::JobEvent event;
    if (reader->Read(&event)) {
      context.TryCancel();
      reader->Finish().IgnoreError();
      return grpc::Status::OK;
    }
    return reader->Finish();
  }

  v1::PredictRequest Predict(const std::string& snapshot_id, int rows,
                             int samples = 4) const {
    v1::PredictRequest request;
    request.set_snapshot_id(snapshot_id);
    request.set_num_samples(samples);
    for (int i = 0; i < rows; ++i) request.add_rows()->add_x(0.001 * i);
    return request;
  }
  v1::AcquireRequest Acquire(const std::string& snapshot_id, int rows,
                             int samples = 4) const {
    v1::AcquireRequest request;
    request.set_snapshot_id(snapshot_id);
    request.set_k(1);
    request.set_heuristic("max_variance");
    request.set_num_samples(samples);
    for (int i = 0; i < rows; ++i) {
      request.mutable_rows()->add_rows()->add_x(0.001 * i);
    }
    return request;
  }

  // One scenario per row of the table, keyed "RPC/failure".
  std::map<std::string, std::function<grpc::Status()>> Scenarios() {
    using S = v1::BnnService::Stub;
    std::map<std::string, std::function<grpc::Status()>> s;
    s["UploadDataset/bad field"] = [&] {
      auto messages = UploadMessages(5);
      messages[0].mutable_header()->set_num_features(0);
      return Upload(messages);
    };
    s["UploadDataset/over a limit"] = [&] {
      return Upload(UploadMessages(kMaxUploadRows + 1));
    };
    s["AppendRows/bad id"] = [&] { return Append("", 1); };
    s["AppendRows/unknown id"] = [&] { return Append(kUnknownDataset, 1); };
    s["AppendRows/bad field"] = [&] { return Append(dataset_id_, 1, 2); };
    s["AppendRows/stale version"] = [&] {
      const grpc::Status first = Append(dataset_id_, 1);  // now version 2
      if (!first.ok()) return first;
      return Append(dataset_id_, 1, 1, /*expected_version=*/1);
    };
    s["AppendRows/over a limit"] = [&] {
      return Append(dataset_id_, kMaxUploadRows + 1);
    };
    auto get_dataset = [&](const std::string& id, int64_t version) {
      v1::GetDatasetRequest request;
      request.set_dataset_id(id);
      if (version >= 0) request.set_version(version);
      return Unary<v1::GetDatasetRequest, v1::DatasetInfo>(&S::GetDataset,
                                                           request);
    };
    s["GetDataset/bad id"] = [=] { return get_dataset("", -1); };
    s["GetDataset/unknown id"] = [=] {
      return get_dataset(kUnknownDataset, -1);
    };
    s["GetDataset/bad field"] = [=, this] {
      return get_dataset(dataset_id_, 0);
    };
    auto train = [&](const std::string& id, const std::string& method) {
      v1::StartTrainingRequest request;
      request.set_dataset_id(id);
      request.set_method(method);
      return Unary<v1::StartTrainingRequest, v1::StartTrainingResponse>(
          &S::StartTraining, request);
    };
    s["StartTraining/bad id"] = [=] { return train("", "slang"); };
    s["StartTraining/unknown id"] = [=] {
      return train(kUnknownDataset, "slang");
    };
    s["StartTraining/bad field"] = [=, this] {
      return train(dataset_id_, "no_such_method");
    };
    s["StartTraining/over the memory budget"] = [&, this] {
      // 4e6 weights at rank 4096: SLANG's U alone is 131 GB.
      v1::StartTrainingRequest request;
      request.set_dataset_id(dataset_id_);
      request.set_method("slang");
      request.mutable_model()->add_hidden_sizes(2000);
      request.mutable_model()->add_hidden_sizes(2000);
      (*request.mutable_params())["rank"] = "4096";
      return Unary<v1::StartTrainingRequest, v1::StartTrainingResponse>(
          &S::StartTraining, request);
    };
    auto get_job = [&](const std::string& id) {
      v1::GetJobRequest request;
      request.set_job_id(id);
      return Unary<v1::GetJobRequest, v1::Job>(&S::GetJob, request);
    };
    auto cancel_job = [&](const std::string& id) {
      v1::CancelJobRequest request;
      request.set_job_id(id);
      return Unary<v1::CancelJobRequest, v1::Job>(&S::CancelJob, request);
    };
    s["GetJob/bad id"] = [=] { return get_job(""); };
    s["GetJob/unknown id"] = [=] { return get_job(kUnknownJob); };
    s["CancelJob/wrong scope"] = [&, this] {
      v1::CancelJobRequest request;
      request.set_job_id(kUnknownJob);
      return Unary<v1::CancelJobRequest, v1::Job>(
          &S::CancelJob, request, absl::Seconds(60),
          StubWithToken(predict_token_).get());
    };
    auto train_named = [&](const std::string& model_name, bool publish) {
      v1::StartTrainingRequest request;
      request.set_dataset_id(dataset_id_);
      request.set_method("slang");
      request.set_model_name(model_name);
      request.set_publish(publish);
      return Unary<v1::StartTrainingRequest, v1::StartTrainingResponse>(
          &S::StartTraining, request);
    };
    s["StartTraining/bad model name"] = [=] { return train_named("-x", true); };
    s["StartTraining/publish without a model"] = [=] {
      return train_named("", true);
    };
    s["StartTraining/queue full"] = [&, this] {
      // One job runs, kMaxQueuedJobs wait: the next one is refused.
      std::vector<std::string> started;
      grpc::Status status;
      for (int i = 0; i <= kMaxQueuedJobs + 1 && status.ok(); ++i) {
        grpc::ClientContext context;
        v1::StartTrainingResponse response;
        status = stub_->StartTraining(&context, LongTraining(), &response);
        if (status.ok()) started.push_back(response.job_id());
        if (i == 0) {
          WaitForJob(*stub_, response.job_id(), [](const v1::Job& j) {
            return j.state() != v1::JOB_STATE_QUEUED;
          }).IgnoreError();
        }
      }
      for (const std::string& id : started) Cancel(id);
      return status;
    };
    auto list_jobs = [&](const v1::ListJobsRequest& request,
                         v1::BnnService::Stub* stub = nullptr) {
      return Unary<v1::ListJobsRequest, v1::ListJobsResponse>(
          &S::ListJobs, request, absl::Seconds(60), stub);
    };
    s["ListJobs/bad field"] = [=] {
      v1::ListJobsRequest request;
      request.set_page_size(1001);
      return list_jobs(request);
    };
    s["ListJobs/bad state"] = [=] {
      v1::ListJobsRequest request;
      request.add_states(static_cast<v1::JobState>(99));
      return list_jobs(request);
    };
    s["ListJobs/bad page token"] = [=] {
      v1::ListJobsRequest request;
      request.set_page_token("not-a-token");
      return list_jobs(request);
    };
    s["ListJobs/wrong scope"] = [=, this] {
      return list_jobs({}, StubWithToken(predict_token_).get());
    };
    auto watch = [&](const std::string& id, int64_t after_step) {
      v1::WatchJobRequest request;
      request.set_job_id(id);
      if (after_step != 0) request.set_after_step(after_step);
      return WatchFirstEvent(request);
    };
    s["WatchJob/bad id"] = [=] { return watch("", 0); };
    s["WatchJob/unknown id"] = [=] { return watch(kUnknownJob, 0); };
    s["WatchJob/bad field"] = [=] { return watch(kUnknownJob, -1); };
    s["WatchJob/over a limit"] = [&, this] {
      grpc::ClientContext start;
      v1::StartTrainingResponse started;
      const grpc::Status status =
          stub_->StartTraining(&start, LongTraining(), &started);
      if (!status.ok()) return status;
      v1::WatchJobRequest request;
      request.set_job_id(started.job_id());
      // kMaxWatchers streams stay open (each has read its first event).
      std::vector<std::unique_ptr<grpc::ClientContext>> contexts;
      std::vector<std::unique_ptr<grpc::ClientReader<v1::JobEvent>>> readers;
      for (int i = 0; i < kMaxWatchers; ++i) {
        contexts.push_back(std::make_unique<grpc::ClientContext>());
        readers.push_back(stub_->WatchJob(contexts.back().get(), request));
        v1::JobEvent event;
        EXPECT_TRUE(readers.back()->Read(&event));
      }
      const grpc::Status refused = WatchFirstEvent(request);
      Cancel(started.job_id());
      for (auto& reader : readers) {
        v1::JobEvent event;
        while (reader->Read(&event)) {
        }
        EXPECT_TRUE(reader->Finish().ok());  // ended by the final state
      }
      return refused;
    };
    s["CancelJob/bad id"] = [=] { return cancel_job(""); };
    s["CancelJob/unknown id"] = [=] { return cancel_job(kUnknownJob); };
    auto predict = [&](const v1::PredictRequest& request,
                       absl::Duration deadline = absl::Seconds(60)) {
      return Unary<v1::PredictRequest, v1::PredictResponse>(&S::Predict,
                                                            request, deadline);
    };
    s["Predict/bad id"] = [=, this] { return predict(Predict("", 1)); };
    s["Predict/unknown id"] = [=, this] {
      return predict(Predict(kUnknownSnapshot, 1));
    };
    s["Predict/quarantined"] = [=, this] {
      return predict(Predict(QuarantinedSnapshot(), 1));
    };
    s["Predict/bad field"] = [=, this] {
      v1::PredictRequest request = Predict(snapshot_id_, 1);
      request.mutable_rows(0)->set_x(0, std::nan(""));
      return predict(request);
    };
    s["Predict/over a limit"] = [=, this] {
      return predict(Predict(snapshot_id_, kMaxPredictRows + 1));
    };
    s["Predict/deadline"] = [=, this] {
      return predict(Predict(snapshot_id_, kMaxPredictRows, 64));
    };
    s["Predict/client deadline"] = [=, this] {
      return predict(Predict(snapshot_id_, kMaxPredictRows, 64),
                     absl::Milliseconds(20));
    };
    auto acquire = [&](const v1::AcquireRequest& request) {
      return Unary<v1::AcquireRequest, v1::AcquireResponse>(&S::Acquire,
                                                            request);
    };
    s["Acquire/bad id"] = [=, this] { return acquire(Acquire("", 1)); };
    s["Acquire/unknown id"] = [=, this] {
      v1::AcquireRequest request = Acquire(snapshot_id_, 0);
      request.set_dataset_id(kUnknownDataset);
      return acquire(request);
    };
    s["Acquire/bad field"] = [=, this] {
      v1::AcquireRequest request = Acquire(snapshot_id_, 5);
      request.set_k(0);
      return acquire(request);
    };
    s["Acquire/over a limit"] = [=, this] {
      return acquire(Acquire(snapshot_id_, 5, kMaxPredictSamples + 1));
    };
    s["Acquire/deadline"] = [=, this] {
      return acquire(Acquire(snapshot_id_, kMaxPredictRows, 64));
    };
    auto get_snapshot = [&](const std::string& id) {
      v1::GetSnapshotRequest request;
      request.set_snapshot_id(id);
      return Unary<v1::GetSnapshotRequest, v1::SnapshotInfo>(&S::GetSnapshot,
                                                             request);
    };
    auto delete_snapshot = [&](const std::string& id) {
      v1::DeleteSnapshotRequest request;
      request.set_snapshot_id(id);
      return Unary<v1::DeleteSnapshotRequest, v1::DeleteSnapshotResponse>(
          &S::DeleteSnapshot, request);
    };
    s["GetSnapshot/bad id"] = [=] { return get_snapshot(""); };
    s["GetSnapshot/unknown id"] = [=] {
      return get_snapshot(kUnknownSnapshot);
    };
    s["GetSnapshot/quarantined"] = [=, this] {
      return get_snapshot(QuarantinedSnapshot());
    };
    s["ExportSnapshot/quarantined"] = [this] {
      std::string bytes;
      return Export(QuarantinedSnapshot(), &bytes);
    };
    s["DeleteSnapshot/bad id"] = [=] { return delete_snapshot(""); };
    s["DeleteSnapshot/unknown id"] = [=] {
      return delete_snapshot(kUnknownSnapshot);
    };
    s["ExportSnapshot/bad id"] = [&] {
      std::string bytes;
      return Export("", &bytes);
    };
    s["ExportSnapshot/unknown id"] = [&] {
      std::string bytes;
      return Export(kUnknownSnapshot, &bytes);
    };
    s["ImportSnapshot/bad field"] = [&] { return Import(""); };
    s["ImportSnapshot/corrupt"] = [&] {
      return Import("this is not a snapshot file");
    };
    // Tokens are checked before anything else: the ids below exist.
    s["GetDataset/no token"] = [&, this] {
      v1::GetDatasetRequest request;
      request.set_dataset_id(dataset_id_);
      return Unary<v1::GetDatasetRequest, v1::DatasetInfo>(
          &S::GetDataset, request, absl::Seconds(60), StubWithToken("").get());
    };
    s["Predict/unknown token"] = [&, this] {
      return Unary<v1::PredictRequest, v1::PredictResponse>(
          &S::Predict, Predict(snapshot_id_, 1), absl::Seconds(60),
          StubWithToken("bnn_not-a-token").get());
    };
    s["UploadDataset/wrong scope"] = [&, this] {
      return Upload(UploadMessages(5), StubWithToken(predict_token_).get());
    };
    s["DeleteSnapshot/wrong scope"] = [&, this] {
      v1::DeleteSnapshotRequest request;
      request.set_snapshot_id(snapshot_id_);
      return Unary<v1::DeleteSnapshotRequest, v1::DeleteSnapshotResponse>(
          &S::DeleteSnapshot, request, absl::Seconds(60),
          StubWithToken(predict_token_).get());
    };
    s["ExportSnapshot/wrong scope"] = [&, this] {
      std::string bytes;
      return Export(snapshot_id_, &bytes, StubWithToken(predict_token_).get());
    };
    // Named models and dataset deletion.
    auto publish = [&](const std::string& name, const std::string& id,
                       v1::BnnService::Stub* stub = nullptr) {
      v1::PublishModelRequest request;
      request.set_name(name);
      request.set_snapshot_id(id);
      return Unary<v1::PublishModelRequest, v1::ModelVersion>(
          &S::PublishModel, request, absl::Seconds(60), stub);
    };
    auto set_alias = [&](const std::string& name, const std::string& alias,
                         int64_t version) {
      v1::SetAliasRequest request;
      request.set_name(name);
      request.set_alias(alias);
      request.set_version(version);
      return Unary<v1::SetAliasRequest, v1::ModelInfo>(&S::SetAlias, request);
    };
    auto delete_alias = [&](const std::string& name, const std::string& alias) {
      v1::DeleteAliasRequest request;
      request.set_name(name);
      request.set_alias(alias);
      return Unary<v1::DeleteAliasRequest, v1::ModelInfo>(&S::DeleteAlias,
                                                          request);
    };
    auto get_model = [&](const std::string& name) {
      v1::GetModelRequest request;
      request.set_name(name);
      return Unary<v1::GetModelRequest, v1::ModelInfo>(&S::GetModel, request);
    };
    auto delete_model = [&](const std::string& name,
                            v1::BnnService::Stub* stub = nullptr) {
      v1::DeleteModelRequest request;
      request.set_name(name);
      return Unary<v1::DeleteModelRequest, v1::DeleteModelResponse>(
          &S::DeleteModel, request, absl::Seconds(60), stub);
    };
    auto delete_dataset = [&](const std::string& id) {
      v1::DeleteDatasetRequest request;
      request.set_dataset_id(id);
      return Unary<v1::DeleteDatasetRequest, v1::DeleteDatasetResponse>(
          &S::DeleteDataset, request);
    };
    s["UploadDataset/name taken"] = [&, this] {
      v1::GetDatasetRequest request;
      request.set_dataset_id(dataset_id_);
      v1::DatasetInfo info;
      grpc::ClientContext context;
      const grpc::Status got = stub_->GetDataset(&context, request, &info);
      if (!got.ok()) return got;
      auto messages = UploadMessages(5);
      messages[0].mutable_header()->set_name(info.name());
      return Upload(messages);
    };
    s["PublishModel/bad field"] = [=, this] {
      return publish("not a name!", snapshot_id_);
    };
    s["PublishModel/unknown id"] = [=] {
      return publish("m", kUnknownSnapshot);
    };
    s["PublishModel/over a limit"] = [=, this] {
      for (int i = 0; i < kMaxModelVersions; ++i) {
        const grpc::Status published = publish("limited", snapshot_id_);
        if (!published.ok()) return published;
      }
      return publish("limited", snapshot_id_);
    };
    s["PublishModel/wrong scope"] = [&, this] {
      return publish("m", snapshot_id_, StubWithToken(predict_token_).get());
    };
    s["ListModels/bad field"] = [&] {
      v1::ListModelsRequest request;
      request.set_page_size(-1);
      return Unary<v1::ListModelsRequest, v1::ListModelsResponse>(
          &S::ListModels, request);
    };
    s["GetModel/bad id"] = [=] { return get_model(""); };
    s["GetModel/unknown id"] = [=] { return get_model("no-such-model"); };
    s["SetAlias/bad field"] = [=] { return set_alias("limited", "latest", 1); };
    s["SetAlias/unknown id"] = [=] {
      return set_alias("no-such-model", "stable", 1);
    };
    s["SetAlias/unknown version"] = [=] {
      return set_alias("limited", "stable", 99);
    };
    s["SetAlias/over a limit"] = [=] {
      const grpc::Status first = set_alias("limited", "stable", 1);
      if (!first.ok()) return first;
      return set_alias("limited", "canary", 1);
    };
    s["DeleteAlias/bad field"] = [=] {
      return delete_alias("limited", "latest");
    };
    s["DeleteAlias/unknown id"] = [=] {
      return delete_alias("limited", "never-set");
    };
    s["DeleteModel/bad id"] = [=] { return delete_model(""); };
    s["DeleteModel/unknown id"] = [=] { return delete_model("no-such-model"); };
    s["DeleteModel/wrong scope"] = [&] {
      return delete_model("limited", StubWithToken(predict_token_).get());
    };
    s["DeleteSnapshot/published"] = [=, this] {
      v1::DeleteSnapshotRequest request;
      request.set_snapshot_id(snapshot_id_);  // versions of "limited"
      return Unary<v1::DeleteSnapshotRequest, v1::DeleteSnapshotResponse>(
          &S::DeleteSnapshot, request);
    };
    s["DeleteDataset/bad id"] = [=] { return delete_dataset(""); };
    s["DeleteDataset/unknown id"] = [=] {
      return delete_dataset(kUnknownDataset);
    };
    s["DeleteDataset/in use"] = [=, this] {
      return delete_dataset(dataset_id_);  // snapshot_id_ was trained on it
    };
    s["Predict/unknown model"] = [=, this] {
      v1::PredictRequest request = Predict("", 1);
      request.set_model("no-such-model@stable");
      return predict(request);
    };
    s["Predict/bad reference"] = [=, this] {
      v1::PredictRequest request = Predict("", 1);
      request.set_model("limited@Not-An-Alias");
      return predict(request);
    };
    s["Acquire/unknown model"] = [=, this] {
      v1::AcquireRequest request = Acquire("", 1);
      request.set_model("limited:99");
      return acquire(request);
    };
    s["ExportSnapshot/unknown model"] = [&] {
      grpc::ClientContext context;
      v1::ExportSnapshotRequest request;
      request.set_model("no-such-model");
      auto reader = stub_->ExportSnapshot(&context, request);
      v1::SnapshotChunk chunk;
      while (reader->Read(&chunk)) {
      }
      return reader->Finish();
    };
    // Packed rows, batchbald and Evaluate.
    s["Predict/both forms"] = [=, this] {
      v1::PredictRequest request = Predict(snapshot_id_, 1);
      request.mutable_features()->add_shape(1);
      request.mutable_features()->add_shape(1);
      request.mutable_features()->add_f64(0.5);
      return predict(request);
    };
    s["Predict/bad shape"] = [=, this] {
      v1::PredictRequest request = Predict(snapshot_id_, 0);
      request.mutable_features()->add_shape(1);
      request.mutable_features()->add_shape(2);
      request.mutable_features()->add_f64(0.5);
      request.mutable_features()->add_f64(0.5);
      return predict(request);
    };
    s["Predict/bad length"] = [=, this] {
      v1::PredictRequest request = Predict(snapshot_id_, 0);
      request.mutable_features()->add_shape(3);
      request.mutable_features()->add_shape(1);
      request.mutable_features()->add_f64(0.5);
      return predict(request);
    };
    s["Predict/packed over a limit"] = [=, this] {
      v1::PredictRequest request = Predict(snapshot_id_, 0);
      request.mutable_features()->add_shape(kMaxPredictRows + 1);
      request.mutable_features()->add_shape(1);
      return predict(request);
    };
    s["UploadDataset/bad packed chunk"] = [&] {
      auto messages = UploadMessages(5);
      v1::RowChunk* chunk = messages[1].mutable_chunk();
      chunk->clear_rows();
      chunk->mutable_features()->add_shape(1);
      chunk->mutable_features()->add_shape(1);
      chunk->mutable_features()->add_f64(0.5);
      return Upload(messages);
    };
    s["Acquire/batchbald on regression"] = [=, this] {
      v1::AcquireRequest request = Acquire(snapshot_id_, 5);
      request.set_heuristic("batchbald");
      return acquire(request);
    };
    auto evaluate = [&](const v1::EvaluateRequest& request) {
      return Unary<v1::EvaluateRequest, v1::EvaluateResponse>(&S::Evaluate,
                                                              request);
    };
    auto evaluation = [&](const std::string& snapshot_id, int rows,
                          int samples = 4) {
      v1::EvaluateRequest request;
      request.set_snapshot_id(snapshot_id);
      request.set_num_samples(samples);
      for (int i = 0; i < rows; ++i) {
        v1::Example* row = request.mutable_rows()->add_rows();
        row->add_x(0.001 * i);
        row->set_y(0.5);
      }
      return request;
    };
    s["Evaluate/bad id"] = [=] { return evaluate(evaluation("", 1)); };
    s["Evaluate/unknown id"] = [=, this] {
      v1::EvaluateRequest request = evaluation(snapshot_id_, 0);
      request.set_dataset_id(kUnknownDataset);
      return evaluate(request);
    };
    s["Evaluate/bad field"] = [=, this] {
      v1::EvaluateRequest request = evaluation(snapshot_id_, 1);
      request.set_ece_bins(1001);
      return evaluate(request);
    };
    s["Evaluate/no rows"] = [=, this] {
      return evaluate(evaluation(snapshot_id_, 0));
    };
    s["Evaluate/OOD rows for regression"] = [=, this] {
      v1::EvaluateRequest request = evaluation(snapshot_id_, 2);
      request.mutable_ood_rows()->add_rows()->add_x(3.0);
      return evaluate(request);
    };
    s["Evaluate/over a limit"] = [=, this] {
      // A stored dataset of kMaxPredictRows + 1 rows: uploaded in pieces
      // of at most --max-upload-rows.
      std::vector<v1::UploadDatasetRequest> messages = UploadMessages(1);
      messages[0].mutable_header()->set_name("evaluate-over-a-limit");
      v1::UploadDatasetResponse uploaded;
      {
        grpc::ClientContext context;
        auto writer = stub_->UploadDataset(&context, &uploaded);
        writer->Write(messages[0]);
        writer->Write(messages[1]);
        writer->WritesDone();
        const grpc::Status status = writer->Finish();
        if (!status.ok()) return status;
      }
      for (int appended = 1; appended <= kMaxPredictRows;
           appended += kMaxUploadRows) {
        const grpc::Status status =
            Append(uploaded.dataset().dataset_id(), kMaxUploadRows);
        if (!status.ok()) return status;
      }
      v1::EvaluateRequest request = evaluation(snapshot_id_, 0);
      request.set_dataset_id(uploaded.dataset().dataset_id());
      return evaluate(request);
    };
    s["Evaluate/deadline"] = [=, this] {
      return evaluate(evaluation(snapshot_id_, kMaxPredictRows, 64));
    };
    s["ImportSnapshot/over a limit"] = [&] {
      std::string bytes;
      const grpc::Status exported = Export(snapshot_id_, &bytes);
      if (!exported.ok()) return exported;
      EXPECT_GT(bytes.size(), static_cast<size_t>(kMaxSnapshotBytes));
      return Import(bytes);
    };
    return s;
  }

  TempDir dir_;
  std::vector<std::string> flags_;
  std::string admin_token_;
  std::string predict_token_;
  std::string quarantined_;
  std::unique_ptr<ServerProcess> server_;
  std::unique_ptr<v1::BnnService::Stub> stub_;
  std::string dataset_id_;
  std::string snapshot_id_;
};

TEST_F(StatusTableTest, EveryRowHoldsAgainstTheServer) {
  const std::vector<Row> rows = ReadTable(BNN_API_DOC);
  ASSERT_GE(rows.size(), 30u)
      << "the table in " << BNN_API_DOC << " was not found";
  std::map<std::string, std::function<grpc::Status()>> scenarios = Scenarios();
  for (const Row& row : rows) {
    const std::string key = row.rpc + "/" + row.failure;
    const auto it = scenarios.find(key);
    if (it == scenarios.end()) {
      ADD_FAILURE() << "docs/api.md row '" << key << "' has no scenario";
      continue;
    }
    const grpc::Status status = it->second();
    EXPECT_EQ(CodeName(status.error_code()), row.code)
        << key << ": " << status.error_message();
    scenarios.erase(it);
  }
  for (const auto& [key, scenario] : scenarios) {
    ADD_FAILURE() << "scenario '" << key << "' has no row in docs/api.md";
  }
  // And the server still serves.
  grpc::ClientContext context;
  v1::ListMethodsResponse methods;
  EXPECT_TRUE(stub_->ListMethods(&context, {}, &methods).ok());
}

}  // namespace
}  // namespace bnn::server
