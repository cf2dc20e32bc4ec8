// UploadDataset and AppendRows through a real gRPC server on loopback.
#include <limits>
#include <string>
#include <vector>

#include <gmock/gmock.h>
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>

#include "tests/server/service_fixture.h"

namespace bnn::server {
namespace {

using ::bnn::server::testutil::AppendMessages;
using ::bnn::server::testutil::CubicDataset;
using ::bnn::server::testutil::ExpectRejections;
using ::bnn::server::testutil::GrpcStatusIs;
using ::bnn::server::testutil::HeaderMessage;
using ::bnn::server::testutil::ServiceTest;
using ::bnn::server::testutil::TwoClasses;
using ::bnn::server::testutil::UploadMessages;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::SizeIs;

using DatasetStreamsTest = ServiceTest;

TEST_F(DatasetStreamsTest, BadUploadsStoreNothing) {
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

  ExpectRejections<std::vector<v1::UploadDatasetRequest>>(
      {
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
      },
      [&](const std::vector<v1::UploadDatasetRequest>& messages) {
        v1::UploadDatasetResponse response;
        return Upload(messages, &response);
      });
  grpc::ClientContext context;
  v1::ListDatasetsResponse list;
  ASSERT_TRUE(stub_->ListDatasets(&context, {}, &list).ok());
  EXPECT_THAT(list.datasets(), SizeIs(0));
  // Still serving.
  EXPECT_FALSE(UploadOrDie(data, v1::TASK_REGRESSION).empty());
}

TEST_F(DatasetStreamsTest, OversizedChunkStoresNothing) {
  // Rows over the fixture's 1 MiB message limit in one chunk, after a
  // valid one: the call fails instead of storing the rows received so far.
  Dataset data;
  data.num_features = 1000;
  data.features.assign(300 * 1000, 0.5);
  data.targets.assign(300, 1.0);
  // Chunks of 100 rows (800 kB), the last two merged into one of 1.6 MB.
  std::vector<v1::UploadDatasetRequest> messages =
      UploadMessages(data, v1::TASK_REGRESSION, /*chunk_rows=*/100);
  messages[2].mutable_chunk()->MergeFrom(messages[3].chunk());
  messages.pop_back();
  v1::UploadDatasetResponse response;
  EXPECT_FALSE(Upload(messages, &response).ok());
  WaitForFinishedRpcs("UploadDataset", "CANCELLED", 1);
  EXPECT_EQ(datasets_->size(), 0);
}

TEST_F(DatasetStreamsTest, AppendRowsCreatesVersions) {
  v1::UploadDatasetResponse uploaded;
  ASSERT_TRUE(
      Upload(UploadMessages(CubicDataset(20), v1::TASK_REGRESSION), &uploaded)
          .ok());
  const v1::DatasetInfo& first = uploaded.dataset();
  const std::string& id = first.dataset_id();

  v1::DatasetInfo second;
  const grpc::Status status =
      Append(AppendMessages(id, CubicDataset(10, 2), 1), &second);
  ASSERT_TRUE(status.ok()) << status.error_message();
  EXPECT_EQ(second.dataset_id(), id);
  EXPECT_EQ(second.version(), 2);
  EXPECT_EQ(second.num_rows(), 30);
  EXPECT_EQ(second.name(), first.name());
  EXPECT_THAT(second.hash(), SizeIs(64));
  EXPECT_NE(second.hash(), first.hash());

  v1::DatasetInfo latest, old;
  ASSERT_TRUE(GetDataset(id, std::nullopt, &latest).ok());
  EXPECT_EQ(latest.SerializeAsString(), second.SerializeAsString());
  ASSERT_TRUE(GetDataset(id, 1, &old).ok());
  EXPECT_EQ(old.SerializeAsString(), first.SerializeAsString());

  v1::DatasetInfo third;
  ASSERT_TRUE(Append(AppendMessages(id, CubicDataset(1, 3)), &third).ok());
  EXPECT_EQ(third.version(), 3);
  EXPECT_EQ(third.num_rows(), 31);
  grpc::ClientContext context;
  v1::ListDatasetsResponse list;
  ASSERT_TRUE(stub_->ListDatasets(&context, {}, &list).ok());
  ASSERT_THAT(list.datasets(), SizeIs(1));
  EXPECT_EQ(list.datasets(0).version(), 3);
  EXPECT_THAT(
      metrics_->registry().Serialize(),
      HasSubstr("bnn_rpc_requests_total{code=\"OK\",rpc=\"AppendRows\"} 2"));
}

TEST_F(DatasetStreamsTest, AppendedLabelsMustBeKnownClasses) {
  const std::string id = UploadOrDie(TwoClasses(), v1::TASK_CLASSIFICATION);
  Dataset more;
  more.num_features = 2;
  more.features = {1, 1, -1, 1};
  more.targets = {4, 2};
  v1::DatasetInfo appended;
  ASSERT_TRUE(Append(AppendMessages(id, more), &appended).ok());
  EXPECT_THAT(appended.class_values(), ElementsAre(2, 4));
  const Dataset stored = *datasets_->Load(id);
  EXPECT_THAT(
      std::vector<double>(stored.targets.end() - 2, stored.targets.end()),
      ElementsAre(1, 0));

  more.targets = {4, 3};
  EXPECT_THAT(Append(AppendMessages(id, more), &appended),
              GrpcStatusIs(grpc::StatusCode::INVALID_ARGUMENT,
                           "rows[1].y = 3 is not a class of the dataset; its "
                           "class labels are 2, 4"));
  EXPECT_EQ(datasets_->Get(id)->version(), 2);
}

TEST_F(DatasetStreamsTest, StaleExpectedVersionStoresNothing) {
  const std::string id = UploadOrDie(CubicDataset(20), v1::TASK_REGRESSION);
  v1::DatasetInfo info;
  ASSERT_TRUE(Append(AppendMessages(id, CubicDataset(3), 1), &info).ok());
  EXPECT_THAT(Append(AppendMessages(id, CubicDataset(3), 1), &info),
              GrpcStatusIs(grpc::StatusCode::FAILED_PRECONDITION,
                           "dataset_id '" + id +
                               "' is at version 2; the append expected "
                               "version 1"));
  ASSERT_TRUE(GetDataset(id, std::nullopt, &info).ok());
  EXPECT_EQ(info.version(), 2);
  EXPECT_EQ(info.num_rows(), 23);
}

TEST_F(DatasetStreamsTest, BadAppendsStoreNothing) {
  const std::string id = UploadOrDie(CubicDataset(20), v1::TASK_REGRESSION);
  const Dataset rows = CubicDataset(10, 4);
  std::vector<v1::AppendRowsRequest> ragged = AppendMessages(id, rows);
  ragged[1].mutable_chunk()->mutable_rows(3)->add_x(1.0);
  std::vector<v1::AppendRowsRequest> with_nan = AppendMessages(id, rows);
  with_nan[2].mutable_chunk()->mutable_rows(0)->set_y(
      std::numeric_limits<double>::quiet_NaN());  // row 7
  std::vector<v1::AppendRowsRequest> chunk_first = AppendMessages(id, rows);
  std::swap(chunk_first[0], chunk_first[1]);
  std::vector<v1::AppendRowsRequest> no_id = AppendMessages("", rows);
  std::vector<v1::AppendRowsRequest> zero_version = AppendMessages(id, rows, 0);
  const std::vector<v1::AppendRowsRequest> too_long =
      AppendMessages(id, CubicDataset(1001));
  ExpectRejections<std::vector<v1::AppendRowsRequest>>(
      {
          {{}, grpc::StatusCode::INVALID_ARGUMENT, "append has no header"},
          {AppendMessages(id, Dataset()), grpc::StatusCode::INVALID_ARGUMENT,
           "append has no rows"},
          {AppendMessages("ds-0123456789abcdef", rows),
           grpc::StatusCode::NOT_FOUND,
           "dataset_id 'ds-0123456789abcdef' not found"},
          {no_id, grpc::StatusCode::INVALID_ARGUMENT,
           "header.dataset_id is required"},
          {zero_version, grpc::StatusCode::INVALID_ARGUMENT,
           "header.expected_version = 0 must be >= 1"},
          {ragged, grpc::StatusCode::INVALID_ARGUMENT,
           "rows[3].x has 2 values; the dataset has 1 features"},
          {with_nan, grpc::StatusCode::INVALID_ARGUMENT, "rows[7].y is NaN"},
          {chunk_first, grpc::StatusCode::INVALID_ARGUMENT,
           "append message 0 is a row chunk before the header"},
          {too_long, grpc::StatusCode::RESOURCE_EXHAUSTED, "--max-upload-rows"},
      },
      [&](const std::vector<v1::AppendRowsRequest>& messages) {
        v1::DatasetInfo response;
        return Append(messages, &response);
      });
  EXPECT_EQ(datasets_->Get(id)->version(), 1);
}

TEST_F(DatasetStreamsTest, GetDatasetVersionErrors) {
  const std::string id = UploadOrDie(CubicDataset(20), v1::TASK_REGRESSION);
  v1::DatasetInfo info;
  EXPECT_THAT(GetDataset(id, 9, &info),
              GrpcStatusIs(grpc::StatusCode::NOT_FOUND,
                           "dataset_id '" + id +
                               "' has no version 9 (its latest is 1)"));
  EXPECT_THAT(GetDataset(id, 0, &info),
              GrpcStatusIs(grpc::StatusCode::INVALID_ARGUMENT,
                           "version = 0 must be >= 1"));
}

}  // namespace
}  // namespace bnn::server
