// A fixture for the service tests: a real Server (server/server.h, as the
// binary starts it) on a free loopback port with a temporary data directory,
// and a stub with one helper per RPC.
#ifndef BNN_TESTS_SERVER_SERVICE_FIXTURE_H_
#define BNN_TESTS_SERVER_SERVICE_FIXTURE_H_

#include <memory>
#include <string>
#include <vector>

#include <gmock/gmock.h>
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>

#include "bnn/data/dataset.h"
#include "bnn/v1/bnn_service.grpc.pb.h"

#include "server/metrics/server_metrics.h"
#include "server/server.h"
#include "server/store/dataset_store.h"
#include "server/store/job_store.h"
#include "tests/server/server_test_util.h"

namespace bnn::server::testutil {

MATCHER_P2(GrpcStatusIs, code, substring, "") {
  *result_listener << "status is " << arg.error_code() << ": "
                   << arg.error_message();
  return arg.error_code() == code &&
         arg.error_message().find(substring) != std::string::npos;
}

// A request the server must reject with `code` and a message containing
// `message`.
template <typename Request>
struct Rejection {
  Request request;
  grpc::StatusCode code;
  std::string message;
};

// Expects `call(request)` to return the status of every case.
template <typename Request, typename Call>
void ExpectRejections(const std::vector<Rejection<Request>>& cases, Call call) {
  for (const Rejection<Request>& c : cases) {
    EXPECT_THAT(call(c.request), GrpcStatusIs(c.code, c.message)) << c.message;
  }
}

// Labels 2 and 4, separable by the sign of the first feature; two features.
Dataset TwoClasses();

// The rows of `data` as RowChunks of `chunk_rows` rows.
std::vector<v1::RowChunk> RowChunks(const Dataset& data, int chunk_rows = 7);

v1::UploadDatasetRequest HeaderMessage(v1::Task task, int num_features);
// A header, then `data`'s rows in chunks of `chunk_rows`.
std::vector<v1::UploadDatasetRequest> UploadMessages(const Dataset& data,
                                                     v1::Task task,
                                                     int chunk_rows = 7);
// An AppendHeader for `dataset_id`, then `data`'s rows (raw labels).
std::vector<v1::AppendRowsRequest> AppendMessages(
    const std::string& dataset_id, const Dataset& data,
    std::optional<int64_t> expected_version = std::nullopt);

// Rows of x values for Predict and Acquire.
google::protobuf::RepeatedPtrField<v1::Features> FeatureRows(
    const Dataset& data);

class ServiceTest : public ::testing::Test {
 protected:
  // Limits small enough to test; change options_ in a derived fixture's
  // constructor.
  ServiceTest();

  void SetUp() override;
  void TearDown() override;

  grpc::Status Upload(const std::vector<v1::UploadDatasetRequest>& messages,
                      v1::UploadDatasetResponse* response);
  // Uploads and returns the dataset id.
  std::string UploadOrDie(const Dataset& data, v1::Task task);
  grpc::Status Append(const std::vector<v1::AppendRowsRequest>& messages,
                      v1::DatasetInfo* response);
  grpc::Status GetDataset(const std::string& dataset_id,
                          std::optional<int64_t> version,
                          v1::DatasetInfo* response);

  // SLANG, 8 hidden units, batch 10, seed 1.
  v1::StartTrainingRequest Training(const std::string& dataset_id, int epochs);
  grpc::Status StartTraining(const v1::StartTrainingRequest& request,
                             std::string* job_id);
  v1::Job WaitForJob(const std::string& job_id, v1::JobState state);
  // Starts `request`, waits for its success and returns the snapshot id.
  std::string TrainOrDie(const v1::StartTrainingRequest& request);
  // Uploads, trains 20 epochs and returns the snapshot id.
  std::string TrainedSnapshot(const Dataset& data, v1::Task task);

  grpc::Status Predict(const v1::PredictRequest& request,
                       v1::PredictResponse* response);
  grpc::Status Acquire(const v1::AcquireRequest& request,
                       v1::AcquireResponse* response);
  grpc::Status GetSnapshot(const std::string& snapshot_id,
                           v1::SnapshotInfo* response);
  grpc::Status DeleteSnapshot(const std::string& snapshot_id);
  // The exported bytes, and the size of each chunk.
  grpc::Status Export(const std::string& snapshot_id, std::string* bytes,
                      std::vector<size_t>* chunk_sizes = nullptr);
  // Sends `bytes` in chunks of `chunk_bytes`.
  grpc::Status Import(const std::string& bytes, size_t chunk_bytes,
                      v1::SnapshotInfo* response);

  // Waits until the server has finished `count` calls of `rpc` with `code`
  // (as the metrics count them): a client may see a call fail before the
  // server's handler is done with it. Fails the test after 10 s.
  void WaitForFinishedRpcs(const std::string& rpc, const std::string& code,
                           int count);

  TempDir dir_;
  // data_dir, listen and metrics_listen are set by SetUp().
  Server::Options options_;
  std::unique_ptr<Server> server_;
  // Parts of server_, for checks behind the RPCs.
  ServerMetrics* metrics_ = nullptr;
  DatasetStore* datasets_ = nullptr;
  JobStore* jobs_ = nullptr;
  std::unique_ptr<v1::BnnService::Stub> stub_;
};

}  // namespace bnn::server::testutil

#endif  // BNN_TESTS_SERVER_SERVICE_FIXTURE_H_
