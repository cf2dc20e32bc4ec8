// BnnClient against an in-process fake of the service: the chunking of the
// client-streaming calls, the reassembly of ExportSnapshot's stream, the
// deadline over a whole stream and the request fields of the new RPCs. The
// real server is exercised by tests/integration.
#include "client/bnn_client.h"

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include <absl/time/clock.h>
#include <absl/time/time.h>
#include <gmock/gmock.h>
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
    if (request->snapshot_id() != "snap") return NotFound(*request);
    for (size_t at = 0; at < bytes.size(); at += chunk_size) {
      absl::SleepFor(chunk_delay);
      if (context->IsCancelled()) return grpc::Status::CANCELLED;
      v1::SnapshotChunk chunk;
      chunk.set_data(bytes.substr(at, chunk_size));
      if (!writer->Write(chunk)) break;
    }
    return grpc::Status::OK;
  }

  grpc::Status ImportSnapshot(grpc::ServerContext*,
                              grpc::ServerReader<v1::SnapshotChunk>* reader,
                              v1::SnapshotInfo* response) override {
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

  grpc::Status GetDataset(grpc::ServerContext*,
                          const v1::GetDatasetRequest* request,
                          v1::DatasetInfo* response) override {
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
    if (request->snapshot_id() != "snap") return NotFound(*request);
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
  template <typename Request>
  static grpc::Status NotFound(const Request& request) {
    return grpc::Status(
        grpc::StatusCode::NOT_FOUND,
        "snapshot_id '" + request.snapshot_id() + "' not found");
  }

  mutable std::mutex mu_;
  std::string imported_;
  std::vector<size_t> import_chunk_sizes_;
  std::optional<v1::AppendHeader> append_header_;
  std::vector<int> append_chunk_rows_;
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

}  // namespace
}  // namespace bnn::client
