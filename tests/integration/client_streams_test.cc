// The client-streaming RPCs (UploadDataset, AppendRows, ImportSnapshot)
// against the real bnn-server, driven by raw clients that send what a typed
// stub cannot: messages that do not parse (issue 10, finding 4). A stream
// with such a message fails with INVALID_ARGUMENT and stores nothing.
#include <memory>
#include <string>
#include <vector>

#include <absl/strings/str_cat.h>
#include <gmock/gmock.h>
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>

#include "bnn/v1/bnn_service.grpc.pb.h"

#include "client/bnn_client.h"
#include "tests/integration/cubic_data.h"
#include "tests/integration/raw_stream.h"
#include "tests/integration/subprocess.h"

namespace bnn::integration {
namespace {

using ::bnn::client::BnnClient;
using ::testing::HasSubstr;
using ::testing::SizeIs;

constexpr char kUpload[] = "/bnn.v1.BnnService/UploadDataset";
constexpr char kAppend[] = "/bnn.v1.BnnService/AppendRows";
constexpr char kImport[] = "/bnn.v1.BnnService/ImportSnapshot";

// Parses as no protobuf message: field 1, length-delimited, claims 127
// bytes and has 3.
const std::string kGarbage("\x0a\x7f\x01\x02\x03", 5);

v1::RowChunk Rows(int first, int count) {
  v1::RowChunk chunk;
  for (int i = first; i < first + count; ++i) {
    v1::Example* row = chunk.add_rows();
    row->add_x(i);
    row->set_y(2.0 * i);
  }
  return chunk;
}

v1::UploadDatasetRequest UploadHeader() {
  v1::UploadDatasetRequest message;
  message.mutable_header()->set_name("streamed");
  message.mutable_header()->set_task(v1::TASK_REGRESSION);
  message.mutable_header()->set_num_features(1);
  return message;
}

v1::UploadDatasetRequest UploadChunk(int first, int count) {
  v1::UploadDatasetRequest message;
  *message.mutable_chunk() = Rows(first, count);
  return message;
}

v1::AppendRowsRequest AppendHeader(const std::string& dataset_id) {
  v1::AppendRowsRequest message;
  message.mutable_header()->set_dataset_id(dataset_id);
  return message;
}

v1::AppendRowsRequest AppendChunk(int first, int count) {
  v1::AppendRowsRequest message;
  *message.mutable_chunk() = Rows(first, count);
  return message;
}

class ClientStreamsTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    // An idle client channel answers the server's shutdown GOAWAY only
    // when its backup poller runs; keep the server's exit prompt.
    setenv("GRPC_CLIENT_CHANNEL_BACKUP_POLL_INTERVAL_MS", "50", 1);
  }

  void SetUp() override { StartServer({}); }

  void StartServer(const std::vector<std::string>& flags) {
    server_.reset();
    absl::StatusOr<std::unique_ptr<TempDir>> dir = TempDir::Create();
    ASSERT_TRUE(dir.ok()) << dir.status();
    dir_ = *std::move(dir);
    absl::StatusOr<std::unique_ptr<ServerProcess>> server =
        ServerProcess::Start(BNN_SERVER_PATH, dir_->path() + "/data",
                             dir_->path() + "/server.log", absl::Seconds(30),
                             flags);
    ASSERT_TRUE(server.ok()) << server.status();
    server_ = *std::move(server);
    channel_ = grpc::CreateChannel(server_->address(),
                                   grpc::InsecureChannelCredentials());
    BnnClient::Options options;
    absl::StatusOr<std::unique_ptr<BnnClient>> client =
        BnnClient::Create(channel_, options);
    ASSERT_TRUE(client.ok()) << client.status();
    client_ = *std::move(client);
  }

  void TearDown() override {
    if (HasFailure() && server_ != nullptr) {
      std::cerr << "server log:\n" << server_->Log();
    }
  }

  // Uploads rows 0..n-1 through the client library; returns the dataset.
  v1::DatasetInfo UploadOrDie(int n) {
    const v1::RowChunk chunk = Rows(0, n);
    const std::vector<v1::Example> rows(chunk.rows().begin(),
                                        chunk.rows().end());
    v1::DatasetHeader header = UploadHeader().header();
    absl::StatusOr<v1::DatasetInfo> info = client_->UploadDataset(header, rows);
    EXPECT_TRUE(info.ok()) << info.status();
    return info.value_or(v1::DatasetInfo());
  }

  std::unique_ptr<RawClientStream> Stream(const char* method) {
    return std::make_unique<RawClientStream>(channel_, method,
                                             absl::Seconds(30));
  }

  std::unique_ptr<TempDir> dir_;
  std::unique_ptr<ServerProcess> server_;
  std::shared_ptr<grpc::Channel> channel_;
  std::unique_ptr<BnnClient> client_;
};

TEST_F(ClientStreamsTest, UnparsableUploadMessageStoresNothing) {
  std::unique_ptr<RawClientStream> stream = Stream(kUpload);
  ASSERT_TRUE(stream->started());
  stream->Write(UploadHeader());
  stream->Write(UploadChunk(0, 10));
  stream->Write(kGarbage);
  stream->Write(UploadChunk(10, 20));
  const grpc::Status status = stream->Finish();
  EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(status.error_message(),
              HasSubstr("upload message 2 does not parse"));
  absl::StatusOr<std::vector<v1::DatasetInfo>> listed = client_->ListDatasets();
  ASSERT_TRUE(listed.ok()) << listed.status();
  EXPECT_THAT(*listed, SizeIs(0));
  // The same stream without the bad message stores all 30 rows.
  std::unique_ptr<RawClientStream> good = Stream(kUpload);
  good->Write(UploadHeader());
  good->Write(UploadChunk(0, 10));
  good->Write(UploadChunk(10, 20));
  std::string bytes;
  ASSERT_TRUE(good->Finish(&bytes).ok());
  v1::UploadDatasetResponse uploaded;
  ASSERT_TRUE(uploaded.ParseFromString(bytes));
  EXPECT_EQ(uploaded.dataset().num_rows(), 30);
}

TEST_F(ClientStreamsTest, UnparsableAppendMessageStoresNothing) {
  const v1::DatasetInfo dataset = UploadOrDie(5);
  std::unique_ptr<RawClientStream> stream = Stream(kAppend);
  stream->Write(AppendHeader(dataset.dataset_id()));
  stream->Write(AppendChunk(5, 10));
  stream->Write(kGarbage);
  stream->Write(AppendChunk(15, 20));
  const grpc::Status status = stream->Finish();
  EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(status.error_message(),
              HasSubstr("append message 2 does not parse"));
  absl::StatusOr<v1::DatasetInfo> latest =
      client_->GetDataset(dataset.dataset_id());
  ASSERT_TRUE(latest.ok()) << latest.status();
  EXPECT_EQ(latest->version(), 1);
  EXPECT_EQ(latest->num_rows(), 5);
  EXPECT_EQ(latest->hash(), dataset.hash());
}

TEST_F(ClientStreamsTest, UnparsableImportMessageStoresNothing) {
  const v1::DatasetInfo dataset = UploadOrDie(20);
  v1::StartTrainingRequest train;
  train.set_dataset_id(dataset.dataset_id());
  train.set_method("slang");
  train.set_epochs(2);
  train.set_seed(1);
  absl::StatusOr<std::string> job_id = client_->StartTraining(train);
  ASSERT_TRUE(job_id.ok()) << job_id.status();
  absl::StatusOr<v1::Job> job = client_->WaitForJob(*job_id, absl::Seconds(60));
  ASSERT_TRUE(job.ok()) << job.status();
  ASSERT_EQ(job->state(), v1::JOB_STATE_SUCCEEDED) << job->error();
  absl::StatusOr<std::string> snapshot =
      client_->ExportSnapshotToString(job->snapshot_id());
  ASSERT_TRUE(snapshot.ok()) << snapshot.status();

  // A whole snapshot, then a message that does not parse, then more bytes:
  // storing the first chunk alone would be a silent truncation of what the
  // client sent.
  std::unique_ptr<RawClientStream> stream = Stream(kImport);
  v1::SnapshotChunk chunk;
  chunk.set_data(*snapshot);
  stream->Write(chunk);
  stream->Write(kGarbage);
  chunk.set_data("more");
  stream->Write(chunk);
  const grpc::Status status = stream->Finish();
  EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(status.error_message(),
              HasSubstr("import message 1 does not parse"));
  absl::StatusOr<std::vector<v1::SnapshotInfo>> listed =
      client_->ListSnapshots();
  ASSERT_TRUE(listed.ok()) << listed.status();
  EXPECT_THAT(*listed, SizeIs(1));  // the trained one only
}

}  // namespace
}  // namespace bnn::integration
