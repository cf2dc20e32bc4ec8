// The bnn-server binary's store integrity (issue 12, "The store"): a
// snapshot blob whose bytes were damaged on disk is found when the server
// starts, quarantined and reported (one log line naming it, the metric
// bnn_store_quarantined_blobs on /metrics), and every access to its
// snapshot is DATA_LOSS naming the snapshot, while the other snapshots are
// served as before.
#include <filesystem>
#include <fstream>
#include <memory>
#include <signal.h>
#include <string>
#include <vector>

#include <absl/strings/match.h>
#include <absl/strings/str_cat.h>
#include <gmock/gmock.h>
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>

#include "bnn/io/sha256.h"
#include "bnn/v1/bnn_service.grpc.pb.h"

#include "client/bnn_client.h"
#include "tests/server/server_binary.h"
#include "tests/server/server_test_util.h"
#include "tests/test_util/http_client.h"

namespace bnn::server {
namespace {

using ::bnn::server::testutil::NewClientChannel;
using ::bnn::server::testutil::ReadFileOrEmpty;
using ::bnn::server::testutil::StartTraining;
using ::bnn::server::testutil::TempDir;
using ::bnn::server::testutil::UploadCubic;
using ::bnn::server::testutil::WaitForJob;
using ::bnn::testing::HttpGet;
using ::bnn::testing::HttpResponse;
using ::bnn::testing::ServerProcess;
using ::testing::HasSubstr;

class StoreIntegrityTest : public ::testing::Test {
 protected:
  void Start() {
    absl::StatusOr<std::unique_ptr<ServerProcess>> server =
        ServerProcess::Start(BNN_SERVER_PATH, DataDir(), LogPath(),
                             {"--threads=1", "--metrics-listen=127.0.0.1:0"});
    ASSERT_TRUE(server.ok()) << server.status() << "\n" << Log();
    server_ = *std::move(server);
    stub_ = v1::BnnService::NewStub(NewClientChannel(server_->address()));
    client::BnnClient::Options options;
    options.target = server_->address();
    client_ = *client::BnnClient::Create(options);
  }
  void Stop() {
    const absl::StatusOr<int> code = server_->Stop(SIGTERM);
    EXPECT_EQ(code.value_or(-1), 0) << Log();
  }
  std::string DataDir() const { return dir_.path() + "/data"; }
  std::string LogPath() const { return dir_.path() + "/server.log"; }
  std::string Log() const { return ReadFileOrEmpty(LogPath()); }

  // Trains a tiny snapshot of `dataset_id` with `seed`; returns its id.
  std::string Train(const std::string& dataset_id, uint64_t seed) {
    v1::StartTrainingRequest request;
    request.set_dataset_id(dataset_id);
    request.set_method("slang");
    request.mutable_model()->add_hidden_sizes(4);
    request.set_epochs(1);
    request.set_seed(seed);
    const absl::StatusOr<std::string> job_id = StartTraining(*stub_, request);
    EXPECT_TRUE(job_id.ok()) << job_id.status();
    const absl::StatusOr<v1::Job> job =
        WaitForJob(*stub_, job_id.value_or(""), [](const v1::Job& j) {
          return j.state() == v1::JOB_STATE_SUCCEEDED ||
                 j.state() == v1::JOB_STATE_FAILED;
        });
    EXPECT_TRUE(job.ok()) << job.status();
    EXPECT_EQ(job->state(), v1::JOB_STATE_SUCCEEDED) << job->error();
    return job->snapshot_id();
  }

  absl::StatusOr<v1::PredictResponse> Predict(const std::string& snapshot_id) {
    return client_->Predict(snapshot_id, {0.5, -1.0}, 1, 8, 3);
  }

  TempDir dir_;
  std::unique_ptr<ServerProcess> server_;
  std::unique_ptr<v1::BnnService::Stub> stub_;
  std::unique_ptr<client::BnnClient> client_;
};

TEST_F(StoreIntegrityTest, DamagedSnapshotBlobIsQuarantinedOthersServe) {
  Start();
  const absl::StatusOr<std::string> dataset_id = UploadCubic(*stub_, 30);
  ASSERT_TRUE(dataset_id.ok()) << dataset_id.status();
  const std::string damaged = Train(*dataset_id, 1);
  const std::string intact = Train(*dataset_id, 2);
  ASSERT_TRUE(Predict(damaged).ok());
  const absl::StatusOr<v1::PredictResponse> before = Predict(intact);
  ASSERT_TRUE(before.ok()) << before.status();
  // Blobs are named by the SHA-256 of their bytes: the exported file's.
  const absl::StatusOr<std::string> bytes =
      client_->ExportSnapshotToString(damaged);
  ASSERT_TRUE(bytes.ok()) << bytes.status();
  const std::string blob = Sha256Hex(*bytes);
  Stop();

  // A bit flips on the disk while the server is down.
  const std::string path =
      absl::StrCat(DataDir(), "/blobs/objects/", blob.substr(0, 2), "/", blob);
  ASSERT_TRUE(std::filesystem::exists(path)) << path;
  std::string damaged_bytes = ReadFileOrEmpty(path);
  damaged_bytes[damaged_bytes.size() / 2] ^= 0x04;
  std::filesystem::remove(path);
  std::ofstream(path, std::ios::binary) << damaged_bytes;

  Start();
  // One log line naming the blob; the blob moved to quarantine/.
  EXPECT_THAT(Log(), HasSubstr("blob quarantined"));
  EXPECT_THAT(Log(), HasSubstr(blob));
  EXPECT_FALSE(std::filesystem::exists(path));
  EXPECT_TRUE(std::filesystem::exists(DataDir() + "/blobs/quarantine/" + blob));
  // The metric.
  const std::string& url = server_->metrics_url();
  const absl::StatusOr<HttpResponse> metrics =
      HttpGet(url.substr(7, url.find("/metrics") - 7), "/metrics");
  ASSERT_TRUE(metrics.ok()) << metrics.status();
  EXPECT_THAT(metrics->body, HasSubstr("bnn_store_quarantined_blobs 1\n"));
  // Every access to the damaged snapshot is DATA_LOSS naming it.
  for (const absl::Status& status :
       {Predict(damaged).status(), client_->GetSnapshot(damaged).status(),
        client_->ExportSnapshotToString(damaged).status()}) {
    EXPECT_EQ(status.code(), absl::StatusCode::kDataLoss) << status;
    EXPECT_THAT(status.message(), HasSubstr(damaged));
    EXPECT_THAT(status.message(), HasSubstr("quarantined"));
  }
  // The other snapshot serves, with the same answer as before.
  const absl::StatusOr<v1::PredictResponse> after = Predict(intact);
  ASSERT_TRUE(after.ok()) << after.status();
  EXPECT_EQ(after->predictions(0).mean(), before->predictions(0).mean());
  const absl::StatusOr<std::vector<v1::SnapshotInfo>> listed =
      client_->ListSnapshots();
  ASSERT_TRUE(listed.ok()) << listed.status();
  ASSERT_EQ(listed->size(), 1u);
  EXPECT_EQ((*listed)[0].snapshot_id(), intact);
  // It can be deleted, quarantined file and all.
  EXPECT_TRUE(client_->DeleteSnapshot(damaged).ok());
  EXPECT_FALSE(
      std::filesystem::exists(DataDir() + "/blobs/quarantine/" + blob));
  Stop();
}

}  // namespace
}  // namespace bnn::server
