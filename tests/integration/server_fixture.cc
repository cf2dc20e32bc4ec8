#include "tests/integration/server_fixture.h"

#include <atomic>
#include <iostream>
#include <utility>

#include <absl/status/status.h>
#include <absl/strings/str_cat.h>
#include <absl/strings/str_join.h>

#include "tests/integration/cubic_data.h"

namespace bnn::integration {

using ::bnn::testing::CommandResult;
using ::bnn::testing::RunCommand;
using ::bnn::testing::ScopedTempDir;
using ::bnn::testing::ServerProcess;

std::string* ServerTest::setup_error_ = nullptr;
std::unique_ptr<ScopedTempDir> ServerTest::dir_;
std::unique_ptr<ServerProcess> ServerTest::server_;

void ServerTest::SetUpTestSuite() {
  setup_error_ = new std::string;
  dir_ = std::make_unique<ScopedTempDir>("bnn_integration");
  if (dir_->path().empty()) {
    *setup_error_ = "cannot create a temporary directory";
    return;
  }
  absl::StatusOr<std::unique_ptr<ServerProcess>> server =
      ServerProcess::Start(BNN_SERVER_PATH, Path("data"), Path("server.log"));
  if (!server.ok()) {
    *setup_error_ = server.status().ToString();
    return;
  }
  server_ = *std::move(server);
}

void ServerTest::TearDownTestSuite() {
  server_.reset();
  dir_.reset();
  delete setup_error_;
  setup_error_ = nullptr;
}

void ServerTest::SetUp() {
  ASSERT_TRUE(setup_error_->empty()) << *setup_error_;
}

void ServerTest::TearDown() {
  if (HasFailure() && server_ != nullptr) {
    std::cerr << "--- bnn-server log ---\n" << server_->Log();
  }
}

std::string ServerTest::Path(const std::string& name) {
  return absl::StrCat(dir_->path(), "/", name);
}

absl::StatusOr<CommandResult> ServerTest::Bnnctl(
    std::vector<std::string> args) {
  args.insert(args.begin(), {BNNCTL_PATH, "--server", server_->address()});
  return RunCommand(args, dir_->path(), absl::Seconds(120));
}

absl::StatusOr<nlohmann::json> ServerTest::BnnctlJson(
    std::vector<std::string> args) {
  args.insert(args.begin(), "--json");
  const std::string command = absl::StrJoin(args, " ");
  absl::StatusOr<CommandResult> result = Bnnctl(std::move(args));
  if (!result.ok()) return result.status();
  if (result->exit_code != 0) {
    return absl::InternalError(absl::StrCat(
        "bnnctl ", command, " exited ", result->exit_code, ": ", result->err));
  }
  nlohmann::json parsed = nlohmann::json::parse(result->out, nullptr,
                                                /*allow_exceptions=*/false);
  if (parsed.is_discarded()) {
    return absl::InternalError(absl::StrCat(
        "bnnctl ", command, " printed invalid JSON: ", result->out));
  }
  return parsed;
}

absl::StatusOr<std::string> ServerTest::UploadCubic(int num_points,
                                                    uint64_t seed) {
  // Dataset names are unique on a server.
  static std::atomic<int> uploads{0};
  const int csv_id = ++uploads;
  const std::string csv = Path(absl::StrCat("cubic-", seed, ".csv"));
  if (!WriteCubicCsv(MakeCubicData(num_points, seed), csv)) {
    return absl::InternalError(absl::StrCat("cannot write ", csv));
  }
  absl::StatusOr<nlohmann::json> dataset =
      BnnctlJson({"upload", "--name", absl::StrCat("cubic-", seed, "-", csv_id),
                  "--task", "regression", "--csv", csv, "--target", "y"});
  if (!dataset.ok()) return dataset.status();
  return (*dataset)["dataset_id"].get<std::string>();
}

absl::StatusOr<std::string> TrainThroughClient(
    client::BnnClient& client, const v1::StartTrainingRequest& request,
    absl::Duration timeout) {
  absl::StatusOr<std::string> job_id = client.StartTraining(request);
  if (!job_id.ok()) return job_id.status();
  absl::StatusOr<v1::Job> job = client.WaitForJob(*job_id, timeout);
  if (!job.ok()) return job.status();
  if (job->state() != v1::JOB_STATE_SUCCEEDED) {
    return absl::InternalError(absl::StrCat("job ", *job_id, " ended ",
                                            v1::JobState_Name(job->state()),
                                            ": ", job->error()));
  }
  return job->snapshot_id();
}

std::vector<std::string> QuickSlangArgs() {
  return {"--method", "slang",    "--epochs", "50",
          "--seed",   "1",        "--param",  "mc_samples=4",
          "--param",  "rank=2",   "--param",  "learning_rate=0.05",
          "--param",  "beta=0.05"};
}

absl::StatusOr<std::string> ServerTest::TrainSnapshot(
    const std::string& dataset_id, const std::vector<std::string>& args) {
  std::vector<std::string> train = {"train", "--dataset", dataset_id};
  train.insert(train.end(), args.begin(), args.end());
  absl::StatusOr<nlohmann::json> started = BnnctlJson(train);
  if (!started.ok()) return started.status();
  absl::StatusOr<nlohmann::json> job =
      BnnctlJson({"job", (*started)["job_id"].get<std::string>(), "--wait",
                  "--wait-timeout", "90"});
  if (!job.ok()) return job.status();
  return (*job)["snapshot_id"].get<std::string>();
}

}  // namespace bnn::integration
