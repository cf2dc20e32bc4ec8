// ExportSnapshot and ImportSnapshot through a real gRPC server on loopback.
#include <string>
#include <vector>

#include <gmock/gmock.h>
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>

#include "tests/server/service_fixture.h"

namespace bnn::server {
namespace {

using ::bnn::server::testutil::CubicDataset;
using ::bnn::server::testutil::EqualsProto;
using ::bnn::server::testutil::ExpectRejections;
using ::bnn::server::testutil::GrpcStatusIs;
using ::bnn::server::testutil::ReadFileOrEmpty;
using ::bnn::server::testutil::ServiceTest;
using ::testing::AllOf;
using ::testing::Each;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::Le;

class SnapshotStreamsTest : public ServiceTest {
 protected:
  void SetUp() override {
    ServiceTest::SetUp();
    dataset_id_ = UploadOrDie(CubicDataset(20), v1::TASK_REGRESSION);
    snapshot_id_ = TrainOrDie(Training(dataset_id_, 1));
  }

  // A snapshot of just over 1 MiB (a low-rank posterior of about 45,000
  // parameters), exported in two chunks.
  std::string LargeSnapshot() {
    v1::StartTrainingRequest request = Training(dataset_id_, 1);
    request.mutable_model()->set_hidden_sizes(0, 210);
    request.mutable_model()->add_hidden_sizes(210);
    return TrainOrDie(request);
  }

  // The blob holding the snapshot's file.
  std::string PathOf(const std::string& snapshot_id) const {
    const absl::StatusOr<SnapshotRecord> record = server_->metadata().Read(
        [&](MetadataReader& r) { return r.GetSnapshot(snapshot_id); });
    EXPECT_TRUE(record.ok()) << record.status();
    return record.ok() ? *server_->blobs().PathOf(record->payload_blob) : "";
  }

  v1::PredictResponse PredictFrom(const std::string& snapshot_id) {
    v1::PredictRequest request;
    request.set_snapshot_id(snapshot_id);
    for (const double x : {-5.0, 0.0, 3.0}) request.add_rows()->add_x(x);
    request.set_seed(12);
    request.set_num_samples(8);
    v1::PredictResponse response;
    const grpc::Status status = Predict(request, &response);
    EXPECT_TRUE(status.ok()) << status.error_message();
    return response;
  }

  int NumSnapshots() {
    grpc::ClientContext context;
    v1::ListSnapshotsResponse response;
    EXPECT_TRUE(stub_->ListSnapshots(&context, {}, &response).ok());
    return response.snapshots_size();
  }

  std::string dataset_id_;
  std::string snapshot_id_;
};

TEST_F(SnapshotStreamsTest, ExportThenImportPredictsIdentically) {
  const std::string snapshot_id = LargeSnapshot();
  std::string bytes;
  std::vector<size_t> chunks;
  const grpc::Status exported = Export(snapshot_id, &bytes, &chunks);
  ASSERT_TRUE(exported.ok()) << exported.error_message();
  EXPECT_EQ(bytes, ReadFileOrEmpty(PathOf(snapshot_id)));
  EXPECT_EQ(chunks.size(), 2u);
  EXPECT_THAT(chunks, Each(Le(size_t{1} << 20)));

  v1::SnapshotInfo imported;
  const grpc::Status status = Import(bytes, 100000, &imported);
  ASSERT_TRUE(status.ok()) << status.error_message();
  EXPECT_NE(imported.snapshot_id(), snapshot_id);
  v1::SnapshotInfo original;
  ASSERT_TRUE(GetSnapshot(snapshot_id, &original).ok());
  original.set_snapshot_id(imported.snapshot_id());
  // An import is no job's snapshot.
  EXPECT_EQ(imported.job_id(), "");
  original.clear_job_id();
  EXPECT_THAT(imported, EqualsProto(original));
  EXPECT_EQ(metrics_->snapshots_imported().Value(), 1);
  EXPECT_THAT(
      metrics_->registry().Serialize(),
      AllOf(
          HasSubstr(
              "bnn_rpc_requests_total{code=\"OK\",rpc=\"ImportSnapshot\"} 1"),
          HasSubstr(
              "bnn_rpc_requests_total{code=\"OK\",rpc=\"ExportSnapshot\"} 1")));
  EXPECT_EQ(metrics_->snapshots().Value(), 3);

  v1::PredictResponse from_original = PredictFrom(snapshot_id);
  v1::PredictResponse from_copy = PredictFrom(imported.snapshot_id());
  from_copy.set_snapshot_id(snapshot_id);
  EXPECT_EQ(from_copy.SerializeAsString(), from_original.SerializeAsString());

  // Exporting the copy gives the very same file.
  std::string again;
  ASSERT_TRUE(Export(imported.snapshot_id(), &again).ok());
  EXPECT_EQ(again, bytes);
}

TEST_F(SnapshotStreamsTest, ImportedSnapshotServesAsAParent) {
  std::string bytes;
  ASSERT_TRUE(Export(snapshot_id_, &bytes).ok());
  v1::SnapshotInfo imported;
  ASSERT_TRUE(Import(bytes, 1 << 19, &imported).ok());
  ASSERT_TRUE(DeleteSnapshot(snapshot_id_).ok());
  v1::StartTrainingRequest warm = Training(dataset_id_, 1);
  warm.clear_model();
  warm.set_parent_snapshot_id(imported.snapshot_id());
  v1::SnapshotInfo child;
  ASSERT_TRUE(GetSnapshot(TrainOrDie(warm), &child).ok());
  EXPECT_EQ(child.parent_snapshot_id(), imported.snapshot_id());
  EXPECT_THAT(child.model().hidden_sizes(), ElementsAre(8));
}

TEST_F(SnapshotStreamsTest, BadImportsStoreNothing) {
  std::string bytes;
  ASSERT_TRUE(Export(snapshot_id_, &bytes).ok());
  std::string corrupt = bytes;
  corrupt[bytes.size() / 2] ^= 0x04;
  std::string newer = bytes;
  newer[8] = 2;  // the format version after the 8-byte magic
  ExpectRejections<std::string>(
      {
          {bytes.substr(0, bytes.size() - 100), grpc::StatusCode::DATA_LOSS,
           "truncated"},
          {corrupt, grpc::StatusCode::DATA_LOSS, "checksum mismatch"},
          {newer, grpc::StatusCode::FAILED_PRECONDITION,
           "snapshot format version 2 is newer"},
          {"", grpc::StatusCode::INVALID_ARGUMENT, "the import has no data"},
          {std::string(9 << 20, 'x'), grpc::StatusCode::RESOURCE_EXHAUSTED,
           "import exceeds 8388608 bytes, the server limit "
           "(--max-snapshot-bytes)"},
      },
      [&](const std::string& bytes) {
        v1::SnapshotInfo info;
        return Import(bytes, 1 << 19, &info);
      });
  // A chunk over the server's message limit (1 MiB here) fails the call.
  v1::SnapshotInfo info;
  EXPECT_FALSE(Import(std::string(2 << 20, 'x'), 2 << 20, &info).ok());
  EXPECT_EQ(NumSnapshots(), 1);
  EXPECT_EQ(metrics_->snapshots_imported().Value(), 0);
}

TEST_F(SnapshotStreamsTest, ExportErrors) {
  std::string bytes;
  EXPECT_THAT(Export("snap-0123456789abcdef", &bytes),
              GrpcStatusIs(grpc::StatusCode::NOT_FOUND,
                           "snapshot_id 'snap-0123456789abcdef' not found"));
  EXPECT_THAT(Export("", &bytes),
              GrpcStatusIs(grpc::StatusCode::INVALID_ARGUMENT,
                           "snapshot_id is required"));
  EXPECT_TRUE(bytes.empty());
}

}  // namespace
}  // namespace bnn::server
