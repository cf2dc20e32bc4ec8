// Bad requests against the real bnn-server through the client library: each
// fails with INVALID_ARGUMENT or NOT_FOUND and a message naming the field,
// stores nothing, and leaves the server serving. bnnctl turns such failures
// into a message on stderr and a non-zero exit.
#include <cmath>
#include <fstream>
#include <iostream>
#include <limits>
#include <memory>
#include <string>
#include <vector>

#include <absl/status/status.h>
#include <absl/status/statusor.h>
#include <absl/strings/str_cat.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "client/bnn_client.h"
#include "tests/integration/cubic_data.h"
#include "tests/integration/server_fixture.h"
#include "tests/test_util/subprocess.h"
#include "tests/test_util/test_util.h"

namespace bnn::integration {
namespace {

using ::bnn::testing::CommandResult;
using ::bnn::testing::RunCommand;
using ::bnn::testing::ScopedTempDir;
using ::bnn::testing::ServerProcess;

using ::bnn::client::BnnClient;
using ::testing::HasSubstr;
using ::testing::IsEmpty;

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
constexpr double kInf = std::numeric_limits<double>::infinity();

void ExpectError(const absl::Status& status, absl::StatusCode code,
                 absl::string_view field) {
  EXPECT_EQ(status.code(), code) << status;
  EXPECT_THAT(std::string(status.message()), HasSubstr(std::string(field)))
      << status;
}

v1::Example Row(std::vector<double> x, double y) {
  v1::Example row;
  row.mutable_x()->Add(x.begin(), x.end());
  row.set_y(y);
  return row;
}

v1::DatasetHeader Header(int num_features = 1) {
  v1::DatasetHeader header;
  header.set_name("bad");
  header.set_task(v1::TASK_REGRESSION);
  header.set_num_features(num_features);
  return header;
}

// One server for the whole suite (starting it and training a snapshot is the
// slow part); every test leaves it as it found it apart from failed requests.
class BadInputTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    setup_error_ = new std::string;
    if (absl::Status status = StartServerAndTrain(); !status.ok()) {
      *setup_error_ = status.ToString();
    }
  }

  static void TearDownTestSuite() {
    client_.reset();
    server_.reset();
    dir_.reset();
    delete setup_error_;
    setup_error_ = nullptr;
  }

  static absl::Status StartServerAndTrain() {
    dir_ = std::make_unique<ScopedTempDir>("bnn_integration");
    if (dir_->path().empty()) return absl::InternalError("no temporary dir");
    absl::StatusOr<std::unique_ptr<ServerProcess>> server =
        ServerProcess::Start(BNN_SERVER_PATH, dir_->path() + "/data",
                             dir_->path() + "/server.log");
    if (!server.ok()) return server.status();
    server_ = *std::move(server);

    BnnClient::Options options;
    options.target = server_->address();
    options.rpc_timeout = absl::Seconds(20);
    absl::StatusOr<std::unique_ptr<BnnClient>> client =
        BnnClient::Create(options);
    if (!client.ok()) return client.status();
    client_ = *std::move(client);

    const CubicData data = MakeCubicData(30, /*seed=*/1);
    v1::DatasetHeader header = Header();
    header.set_name("cubic");
    absl::StatusOr<v1::DatasetInfo> info =
        client_->UploadDataset(header, data.x, data.y);
    if (!info.ok()) return info.status();
    dataset_id_ = info->dataset_id();

    v1::StartTrainingRequest request;
    request.set_dataset_id(dataset_id_);
    request.set_method("slang");
    request.mutable_model()->add_hidden_sizes(4);
    request.set_epochs(2);
    request.set_seed(3);
    absl::StatusOr<std::string> snapshot_id =
        TrainThroughClient(*client_, request, absl::Seconds(60));
    if (!snapshot_id.ok()) return snapshot_id.status();
    snapshot_id_ = *std::move(snapshot_id);
    return absl::OkStatus();
  }

  void SetUp() override {
    ASSERT_TRUE(setup_error_->empty())
        << *setup_error_ << "\n"
        << (server_ != nullptr ? server_->Log() : "");
  }

  void TearDown() override {
    if (HasFailure() && server_ != nullptr) {
      std::cerr << "--- bnn-server log ---\n" << server_->Log();
    }
  }

  // After a bad request the server is still up, still answers, still holds
  // the good dataset and nothing more.
  static void ExpectServerStillServes() {
    ASSERT_TRUE(server_->IsRunning()) << server_->Log();
    absl::StatusOr<v1::DatasetInfo> info = client_->GetDataset(dataset_id_);
    ASSERT_TRUE(info.ok()) << info.status();
    EXPECT_EQ(info->num_rows(), 30);
    absl::StatusOr<std::vector<v1::DatasetInfo>> all = client_->ListDatasets();
    ASSERT_TRUE(all.ok()) << all.status();
    EXPECT_EQ(all->size(), 1u) << "a rejected upload was stored";
    absl::StatusOr<std::vector<v1::MethodInfo>> methods =
        client_->ListMethods();
    ASSERT_TRUE(methods.ok()) << methods.status();
    EXPECT_FALSE(methods->empty());
  }

  // Runs bnnctl against the server.
  static CommandResult Bnnctl(std::vector<std::string> args) {
    args.insert(args.begin(), {BNNCTL_PATH, "--server", server_->address()});
    absl::StatusOr<CommandResult> result =
        RunCommand(args, dir_->path(), absl::Seconds(60));
    EXPECT_TRUE(result.ok()) << result.status();
    return result.ok() ? *result : CommandResult{};
  }

  static std::string* setup_error_;
  static std::unique_ptr<ScopedTempDir> dir_;
  static std::unique_ptr<ServerProcess> server_;
  static std::unique_ptr<BnnClient> client_;
  static std::string dataset_id_;
  static std::string snapshot_id_;
};

std::string* BadInputTest::setup_error_ = nullptr;
std::unique_ptr<ScopedTempDir> BadInputTest::dir_;
std::unique_ptr<ServerProcess> BadInputTest::server_;
std::unique_ptr<BnnClient> BadInputTest::client_;
std::string BadInputTest::dataset_id_;
std::string BadInputTest::snapshot_id_;

TEST_F(BadInputTest, EmptyUploadIsRejected) {
  absl::StatusOr<v1::DatasetInfo> info =
      client_->UploadDataset(Header(), absl::Span<const v1::Example>());
  ExpectError(info.status(), absl::StatusCode::kInvalidArgument, "rows");
  ExpectServerStillServes();
}

TEST_F(BadInputTest, BadHeaderIsRejected) {
  const std::vector<v1::Example> rows = {Row({1}, 1), Row({2}, 2)};
  v1::DatasetHeader header = Header(0);
  ExpectError(client_->UploadDataset(header, rows).status(),
              absl::StatusCode::kInvalidArgument, "header.num_features");
  header = Header();
  header.set_name("");
  ExpectError(client_->UploadDataset(header, rows).status(),
              absl::StatusCode::kInvalidArgument, "header.name");
  header = Header();
  header.set_task(v1::TASK_UNSPECIFIED);
  ExpectError(client_->UploadDataset(header, rows).status(),
              absl::StatusCode::kInvalidArgument, "header.task");
  ExpectServerStillServes();
}

TEST_F(BadInputTest, RaggedRowsAreRejected) {
  const std::vector<v1::Example> rows = {Row({1}, 1), Row({1, 2}, 2),
                                         Row({3}, 3)};
  ExpectError(client_->UploadDataset(Header(), rows).status(),
              absl::StatusCode::kInvalidArgument, "rows[1].x");
  const std::vector<v1::Example> short_row = {Row({1, 2}, 1), Row({}, 2)};
  ExpectError(client_->UploadDataset(Header(2), short_row).status(),
              absl::StatusCode::kInvalidArgument, "rows[1].x");
  ExpectServerStillServes();
}

TEST_F(BadInputTest, RowIndicesCountAcrossChunks) {
  // Two rows per chunk: the bad row is the first of the third chunk, and the
  // message still counts from the start of the upload.
  BnnClient::Options options = client_->options();
  options.chunk_rows = 2;
  absl::StatusOr<std::unique_ptr<BnnClient>> small_chunks =
      BnnClient::Create(options);
  ASSERT_TRUE(small_chunks.ok()) << small_chunks.status();
  std::vector<v1::Example> rows;
  for (int i = 0; i < 6; ++i) rows.push_back(Row({1.0 * i}, i));
  rows[4] = Row({1, 2}, 4);
  ExpectError((*small_chunks)->UploadDataset(Header(), rows).status(),
              absl::StatusCode::kInvalidArgument, "rows[4].x");
  ExpectServerStillServes();
}

TEST_F(BadInputTest, NonFiniteValuesAreRejected) {
  ExpectError(
      client_->UploadDataset(Header(), {Row({1}, 1), Row({kNaN}, 2)}).status(),
      absl::StatusCode::kInvalidArgument, "rows[1].x[0] is NaN");
  ExpectError(client_->UploadDataset(Header(), {Row({-kInf}, 1)}).status(),
              absl::StatusCode::kInvalidArgument, "rows[0].x[0] is -Inf");
  ExpectError(
      client_->UploadDataset(Header(), {Row({1}, 1), Row({2}, kInf)}).status(),
      absl::StatusCode::kInvalidArgument, "rows[1].y");
  ExpectError(client_->UploadDataset(Header(), {Row({1}, kNaN)}).status(),
              absl::StatusCode::kInvalidArgument, "rows[0].y is NaN");
  ExpectServerStillServes();
}

TEST_F(BadInputTest, DenseUploadChecksSizesLocally) {
  const std::vector<double> features = {1, 2, 3};
  const std::vector<double> targets = {1, 2};
  ExpectError(client_->UploadDataset(Header(), features, targets).status(),
              absl::StatusCode::kInvalidArgument, "features");
}

// The dense Predict sends its rows packed (PredictRequest.features).
TEST_F(BadInputTest, PredictRejectsWrongFeatureCountAndNonFiniteRows) {
  ExpectError(client_
                  ->Predict(snapshot_id_, {1.0, 2.0, 3.0, 4.0},
                            /*num_features=*/2, /*num_samples=*/8)
                  .status(),
              absl::StatusCode::kInvalidArgument,
              "features.shape[1] = 2; the snapshot has 1 features");
  ExpectError(client_->Predict(snapshot_id_, {0.0, kNaN}, 1, 8).status(),
              absl::StatusCode::kInvalidArgument, "features[1, 0] is NaN");
  ExpectError(client_->Predict(snapshot_id_, {}, 1, 8).status(),
              absl::StatusCode::kInvalidArgument, "features.shape[0] is 0");
  ExpectError(client_->Predict(snapshot_id_, {0.0}, 1, -1).status(),
              absl::StatusCode::kInvalidArgument, "num_samples");
  // The same snapshot still predicts a well-formed request.
  absl::StatusOr<v1::PredictResponse> good =
      client_->Predict(snapshot_id_, {0.0, 1.0}, 1, 8, /*seed=*/1);
  ASSERT_TRUE(good.ok()) << good.status();
  ASSERT_EQ(good->predictions_size(), 2);
  EXPECT_TRUE(std::isfinite(good->predictions(0).mean()));
  ExpectServerStillServes();
}

TEST_F(BadInputTest, BadTrainingRequestsAreRejected) {
  v1::StartTrainingRequest request;
  request.set_dataset_id(dataset_id_);
  request.set_method("no_such_method");
  request.mutable_model()->add_hidden_sizes(4);
  request.set_epochs(1);
  absl::Status status = client_->StartTraining(request).status();
  ExpectError(status, absl::StatusCode::kInvalidArgument, "method");
  // The message lists the registered methods.
  EXPECT_THAT(std::string(status.message()), HasSubstr("slang"));

  request.set_method("slang");
  (*request.mutable_params())["no_such_param"] = "1";
  ExpectError(client_->StartTraining(request).status(),
              absl::StatusCode::kInvalidArgument, "no_such_param");
  request.clear_params();

  (*request.mutable_params())["rank"] = "one";
  ExpectError(client_->StartTraining(request).status(),
              absl::StatusCode::kInvalidArgument, "rank");
  request.clear_params();

  request.mutable_model()->set_hidden_sizes(0, 0);
  ExpectError(client_->StartTraining(request).status(),
              absl::StatusCode::kInvalidArgument, "model.hidden_sizes[0]");
  request.mutable_model()->set_hidden_sizes(0, 4);

  request.mutable_model()->add_activations("sigmoid");
  ExpectError(client_->StartTraining(request).status(),
              absl::StatusCode::kInvalidArgument, "model.activations[0]");
  ExpectServerStillServes();
}

TEST_F(BadInputTest, UnknownIdsAreNotFound) {
  ExpectError(client_->GetDataset("no-such-dataset").status(),
              absl::StatusCode::kNotFound, "dataset_id 'no-such-dataset'");

  v1::StartTrainingRequest request;
  request.set_dataset_id("no-such-dataset");
  request.set_method("slang");
  request.set_epochs(1);
  ExpectError(client_->StartTraining(request).status(),
              absl::StatusCode::kNotFound, "dataset_id 'no-such-dataset'");

  ExpectError(client_->GetJob("no-such-job").status(),
              absl::StatusCode::kNotFound, "job_id 'no-such-job'");
  ExpectError(client_->CancelJob("no-such-job").status(),
              absl::StatusCode::kNotFound, "job_id 'no-such-job'");
  ExpectError(client_->Predict("no-such-snapshot", {0.0}, 1, 8).status(),
              absl::StatusCode::kNotFound, "snapshot_id 'no-such-snapshot'");
  ExpectServerStillServes();
}

TEST_F(BadInputTest, BnnctlReportsFailuresOnStderrWithNonZeroExit) {
  // A server-side rejection.
  CommandResult result = Bnnctl({"--json", "dataset", "no-such-dataset"});
  EXPECT_EQ(result.exit_code, 1);
  EXPECT_THAT(result.out, IsEmpty());
  EXPECT_THAT(result.err, HasSubstr("NOT_FOUND"));
  EXPECT_THAT(result.err, HasSubstr("dataset_id 'no-such-dataset'"));

  // A CSV with the wrong number of features for the snapshot.
  const std::string wide_csv = dir_->path() + "/wide.csv";
  std::ofstream(wide_csv) << "a,b\n1,2\n";
  result = Bnnctl({"--json", "predict", "--snapshot", snapshot_id_, "--csv",
                   wide_csv, "--samples", "4"});
  EXPECT_EQ(result.exit_code, 1);
  EXPECT_THAT(result.out, IsEmpty());
  EXPECT_THAT(result.err, HasSubstr("INVALID_ARGUMENT"));
  EXPECT_THAT(result.err, HasSubstr("rows[0].x has 2 values"));

  // A malformed CSV fails locally, naming line and column.
  const std::string bad_csv = dir_->path() + "/bad.csv";
  std::ofstream(bad_csv) << "x\n1\nfoo\n";
  result = Bnnctl({"predict", "--snapshot", snapshot_id_, "--csv", bad_csv,
                   "--samples", "4"});
  EXPECT_EQ(result.exit_code, 1);
  EXPECT_THAT(result.out, IsEmpty());
  EXPECT_THAT(result.err, HasSubstr("line 3, column 1"));

  // An unknown method through `train`.
  result = Bnnctl({"train", "--dataset", dataset_id_, "--method", "nope",
                   "--hidden", "4", "--epochs", "1"});
  EXPECT_EQ(result.exit_code, 1);
  EXPECT_THAT(result.err, HasSubstr("unknown method 'nope'"));

  // A usage error never reaches the server: exit 2, naming the flag.
  result = Bnnctl({"train", "--dataset", dataset_id_, "--method", "slang",
                   "--hidden", "4"});
  EXPECT_EQ(result.exit_code, 2);
  EXPECT_THAT(result.err, HasSubstr("--epochs"));

  ExpectServerStillServes();
}

TEST_F(BadInputTest, BnnctlReportsAnUnreachableServer) {
  // Port 1 on loopback: nothing listens there in a test environment.
  absl::StatusOr<CommandResult> result = RunCommand(
      {BNNCTL_PATH, "--server", "127.0.0.1:1", "--timeout", "5", "methods"},
      dir_->path(), absl::Seconds(30));
  ASSERT_TRUE(result.ok()) << result.status();
  EXPECT_EQ(result->exit_code, 1);
  EXPECT_THAT(result->err, HasSubstr("UNAVAILABLE"));
  EXPECT_THAT(result->err, HasSubstr("127.0.0.1:1"));
}

}  // namespace
}  // namespace bnn::integration
