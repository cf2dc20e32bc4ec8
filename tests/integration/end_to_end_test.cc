// The quickstart path end to end: the real bnn-server on a free loopback port,
// and every step (upload, train, wait, predict) through the real bnnctl with
// --json, as a user or script would run it.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include <absl/strings/str_format.h>
#include <absl/strings/str_split.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "tests/integration/cubic_data.h"
#include "tests/integration/server_fixture.h"

namespace bnn::integration {
namespace {

using ::bnn::testing::CommandResult;
using ::bnn::testing::RunCommand;

using ::testing::ContainsRegex;
using ::testing::HasSubstr;
using ::testing::Not;

// SLANG on the cubic set, one hidden layer of 10 ReLU units: the settings of
// deploy/quickstart.sh (see there for the choice of noise_precision).
const std::vector<std::string>& TrainFlags() {
  static const auto* const kFlags =
      new std::vector<std::string>{"--method",     "slang",
                                   "--hidden",     "10",
                                   "--activation", "relu",
                                   "--epochs",     "500",
                                   "--seed",       "1",
                                   "--param",      "rank=1",
                                   "--param",      "mc_samples=20",
                                   "--param",      "batch_size=30",
                                   "--param",      "learning_rate=0.1",
                                   "--param",      "beta=0.05",
                                   "--param",      "noise_precision=30"};
  return *kFlags;
}

using EndToEndTest = ServerTest;

TEST_F(EndToEndTest, SlangOnTheCubicSetIsMoreUncertainAwayFromTheData) {
  const std::string data_csv = Path("cubic.csv");
  ASSERT_TRUE(WriteCubicCsv(MakeCubicData(30, /*seed=*/20180524), data_csv));

  absl::StatusOr<nlohmann::json> dataset =
      BnnctlJson({"upload", "--name", "cubic", "--task", "regression", "--csv",
                  data_csv, "--target", "y"});
  ASSERT_TRUE(dataset.ok()) << dataset.status();
  const std::string dataset_id = (*dataset)["dataset_id"];
  ASSERT_FALSE(dataset_id.empty());
  EXPECT_EQ((*dataset)["num_rows"], 30);
  EXPECT_EQ((*dataset)["num_features"], 1);
  EXPECT_EQ((*dataset)["task"], "regression");
  EXPECT_EQ((*dataset)["feature_names"], nlohmann::json::array({"x"}));
  EXPECT_EQ((*dataset)["target_name"], "y");

  absl::StatusOr<nlohmann::json> listed = BnnctlJson({"datasets"});
  ASSERT_TRUE(listed.ok()) << listed.status();
  ASSERT_EQ((*listed)["datasets"].size(), 1u);
  EXPECT_EQ((*listed)["datasets"][0]["dataset_id"], dataset_id);

  absl::StatusOr<nlohmann::json> methods = BnnctlJson({"methods"});
  ASSERT_TRUE(methods.ok()) << methods.status();
  bool has_slang = false;
  for (const nlohmann::json& method : (*methods)["methods"]) {
    has_slang |= method["name"] == "slang";
  }
  EXPECT_TRUE(has_slang) << methods->dump();

  std::vector<std::string> train = {"train", "--dataset", dataset_id};
  train.insert(train.end(), TrainFlags().begin(), TrainFlags().end());
  absl::StatusOr<nlohmann::json> started = BnnctlJson(train);
  ASSERT_TRUE(started.ok()) << started.status();
  const std::string job_id = (*started)["job_id"];
  ASSERT_FALSE(job_id.empty());

  absl::StatusOr<nlohmann::json> job =
      BnnctlJson({"job", job_id, "--wait", "--wait-timeout", "90"});
  ASSERT_TRUE(job.ok()) << job.status();
  ASSERT_EQ((*job)["state"], "succeeded") << job->dump();
  EXPECT_EQ((*job)["progress"], 1.0);
  EXPECT_EQ((*job)["params"]["rank"], "1");
  ASSERT_TRUE((*job)["last_loss"].is_number()) << job->dump();
  const std::string snapshot_id = (*job)["snapshot_id"];
  ASSERT_FALSE(snapshot_id.empty());

  // A grid from -8 to 8 in steps of 0.5: twice as wide as the data.
  const std::string grid_csv = Path("grid.csv");
  {
    std::ofstream grid(grid_csv);
    grid << "x\n";
    for (int i = -16; i <= 16; ++i) grid << absl::StrFormat("%g\n", 0.5 * i);
  }
  const std::vector<std::string> predict = {
      "predict",   "--snapshot", snapshot_id, "--csv", grid_csv,
      "--samples", "400",        "--seed",    "7"};
  absl::StatusOr<nlohmann::json> predictions = BnnctlJson(predict);
  ASSERT_TRUE(predictions.ok()) << predictions.status();
  EXPECT_EQ((*predictions)["num_samples"], 400);
  EXPECT_EQ((*predictions)["seed"], 7);
  const nlohmann::json& rows = (*predictions)["predictions"];
  ASSERT_EQ(rows.size(), 33u);
  std::map<double, double> std_at;
  for (const nlohmann::json& row : rows) {
    // bnnctl writes non-finite values as null, which is_number() rejects.
    ASSERT_TRUE(row["mean"].is_number()) << row.dump();
    ASSERT_TRUE(row["std"].is_number()) << row.dump();
    ASSERT_TRUE(row["epistemic_variance"].is_number()) << row.dump();
    const double x = row["x"][0];
    const double mean = row["mean"];
    const double std = row["std"];
    EXPECT_TRUE(std::isfinite(mean) && std::isfinite(std) && std > 0)
        << row.dump();
    std_at[x] = std;
  }
  EXPECT_GT(std_at.at(-6.0), std_at.at(0.0)) << predictions->dump();
  EXPECT_GT(std_at.at(6.0), std_at.at(0.0)) << predictions->dump();

  // Same snapshot, seed and inputs: the same output, byte for byte.
  absl::StatusOr<nlohmann::json> again = BnnctlJson(predict);
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_EQ(*again, *predictions);

  // The human-readable form: a header, then one line per grid point.
  absl::StatusOr<CommandResult> table = Bnnctl(predict);
  ASSERT_TRUE(table.ok()) << table.status();
  ASSERT_EQ(table->exit_code, 0) << table->err;
  EXPECT_THAT(table->out, ContainsRegex("^ *x +mean +std\n"));
  EXPECT_EQ(std::count(table->out.begin(), table->out.end(), '\n'), 34);
}

// Scores through bnnctl: `evaluate` on a CSV file and on the stored
// dataset give the same numbers for the same rows, and `predict --target`
// prints the scores of the same samples below its table.
TEST_F(EndToEndTest, EvaluateAndPredictWithATargetScoreTheSameRows) {
  const std::string data_csv = Path("scored.csv");
  ASSERT_TRUE(WriteCubicCsv(MakeCubicData(20, /*seed=*/7), data_csv));
  absl::StatusOr<nlohmann::json> dataset =
      BnnctlJson({"upload", "--name", "scored", "--task", "regression", "--csv",
                  data_csv, "--target", "y"});
  ASSERT_TRUE(dataset.ok()) << dataset.status();
  const std::string dataset_id = (*dataset)["dataset_id"];
  std::vector<std::string> train = QuickSlangArgs();
  train.insert(train.end(), {"--hidden", "8"});
  absl::StatusOr<std::string> snapshot = TrainSnapshot(dataset_id, train);
  ASSERT_TRUE(snapshot.ok()) << snapshot.status();

  absl::StatusOr<nlohmann::json> from_csv =
      BnnctlJson({"evaluate", "--snapshot", *snapshot, "--csv", data_csv,
                  "--target", "y", "--samples", "32", "--seed", "3"});
  ASSERT_TRUE(from_csv.ok()) << from_csv.status();
  EXPECT_EQ((*from_csv)["task"], "regression");
  EXPECT_EQ((*from_csv)["num_rows"], 20);
  ASSERT_TRUE((*from_csv)["rmse"].is_number()) << from_csv->dump();
  EXPECT_EQ((*from_csv)["nll"], -(*from_csv)["log_likelihood"].get<double>());
  absl::StatusOr<nlohmann::json> from_dataset =
      BnnctlJson({"evaluate", "--snapshot", *snapshot, "--dataset", dataset_id,
                  "--samples", "32", "--seed", "3"});
  ASSERT_TRUE(from_dataset.ok()) << from_dataset.status();
  // The CSV's decimal text and the stored doubles are the same values.
  EXPECT_EQ((*from_dataset)["rmse"], (*from_csv)["rmse"]);
  EXPECT_EQ((*from_dataset)["log_likelihood"], (*from_csv)["log_likelihood"]);

  const std::vector<std::string> predict = {
      "predict", "--snapshot", *snapshot, "--csv",  data_csv, "--target",
      "y",       "--samples",  "32",      "--seed", "3"};
  absl::StatusOr<nlohmann::json> predicted = BnnctlJson(predict);
  ASSERT_TRUE(predicted.ok()) << predicted.status();
  EXPECT_EQ((*predicted)["metrics"]["rmse"], (*from_csv)["rmse"]);
  absl::StatusOr<CommandResult> table = Bnnctl(predict);
  ASSERT_TRUE(table.ok()) << table.status();
  ASSERT_EQ(table->exit_code, 0) << table->err;
  EXPECT_THAT(table->out, HasSubstr("metrics against column 'y':\n"));
  EXPECT_THAT(table->out, ContainsRegex("\nrmse +[0-9.]+\n"));
  EXPECT_THAT(table->out, HasSubstr("20 rows, 32 samples, seed 3\n"));

  // A classifier's OOD rows are refused for this regression model.
  const std::string ood_csv = Path("ood.csv");
  {
    std::ofstream ood(ood_csv);
    ood << "x\n9\n10\n";
  }
  absl::StatusOr<CommandResult> refused =
      Bnnctl({"evaluate", "--snapshot", *snapshot, "--dataset", dataset_id,
              "--ood-csv", ood_csv});
  ASSERT_TRUE(refused.ok()) << refused.status();
  EXPECT_EQ(refused->exit_code, 1);
  EXPECT_THAT(refused->err, HasSubstr("INVALID_ARGUMENT"));
  EXPECT_THAT(refused->err, HasSubstr("regression model"));
}

// What a shell script does: CSV on standard input (RFC 4180 quoting, CRLF),
// the server and a token from the environment, --help and --version without
// a server.
TEST_F(EndToEndTest, StandardInputEnvironmentHelpAndVersion) {
  const std::string train_csv = Path("quoted_train.csv");
  {
    std::ofstream out(train_csv, std::ios::binary);
    out << "\"x, input\",\"y \"\"observed\"\"\"\r\n";
    for (int i = 0; i < 20; ++i)
      out << i / 10.0 << ",\"" << i / 5.0 << "\"\r\n";
  }
  // `sh -c` so that stdin and the environment are the shell's: $0 is bnnctl,
  // $1 the server, $2 the CSV file, the rest bnnctl's arguments.
  const std::string script =
      "server=$1 file=$2; shift 2; "
      "BNN_SERVER=$server BNN_TOKEN=t0k3n exec \"$0\" \"$@\" < \"$file\"";
  auto with_stdin = [&](const std::string& csv, std::vector<std::string> args) {
    std::vector<std::string> argv = {"/bin/sh",   "-c",      script,
                                     BNNCTL_PATH, address(), csv};
    argv.insert(argv.end(), args.begin(), args.end());
    return RunCommand(argv, Path(""), absl::Seconds(120));
  };
  absl::StatusOr<CommandResult> uploaded =
      with_stdin(train_csv, {"--json", "upload", "--name", "stdin", "--task",
                             "regression", "--csv", "-", "--target", "1"});
  ASSERT_TRUE(uploaded.ok()) << uploaded.status();
  ASSERT_EQ(uploaded->exit_code, 0) << uploaded->err;
  const nlohmann::json dataset = nlohmann::json::parse(uploaded->out);
  EXPECT_EQ(dataset["num_rows"], 20);
  EXPECT_EQ(dataset["feature_names"], nlohmann::json::array({"x, input"}));
  EXPECT_EQ(dataset["target_name"], "y \"observed\"");

  std::vector<std::string> train = QuickSlangArgs();
  train.insert(train.end(), {"--hidden", "4"});
  absl::StatusOr<std::string> snapshot =
      TrainSnapshot(dataset["dataset_id"].get<std::string>(), train);
  ASSERT_TRUE(snapshot.ok()) << snapshot.status();
  const std::string grid_csv = Path("quoted_grid.csv");
  std::ofstream(grid_csv, std::ios::binary)
      << "\"x, input\"\r\n0.5\r\n\"1.5\"\r\n";
  absl::StatusOr<CommandResult> predicted =
      with_stdin(grid_csv, {"predict", "--snapshot", *snapshot, "--csv", "-",
                            "--samples", "8", "--seed", "3", "--json"});
  ASSERT_TRUE(predicted.ok()) << predicted.status();
  ASSERT_EQ(predicted->exit_code, 0) << predicted->err;
  const nlohmann::json predictions = nlohmann::json::parse(predicted->out);
  ASSERT_EQ(predictions["predictions"].size(), 2u);
  EXPECT_EQ(predictions["predictions"][1]["x"], nlohmann::json::array({1.5}));

  // Help and version need no server (none listens on port 1).
  for (const auto& [command, expected] :
       std::vector<std::pair<std::string, std::string>>{
           {"--version", " (commit "}, {"--help", "bnnctl predict"}}) {
    absl::StatusOr<CommandResult> result =
        RunCommand({BNNCTL_PATH, "--server", "127.0.0.1:1", "predict", command},
                   Path(""), absl::Seconds(30));
    ASSERT_TRUE(result.ok()) << result.status();
    EXPECT_EQ(result->exit_code, 0) << result->err;
    EXPECT_THAT(result->out, HasSubstr(expected));
  }
}

// The job commands: train --wait (with a model name), watch (plain lines
// through a pipe, one per event, in step order, ending with the final
// state), jobs (a table, filters, --limit, --json), and the exit status of a
// job that did not succeed.
TEST_F(EndToEndTest, TrainWaitWatchAndJobs) {
  absl::StatusOr<std::string> dataset_id = UploadCubic(30, 3);
  ASSERT_TRUE(dataset_id.ok()) << dataset_id.status();
  // QuickSlangArgs with `epochs` passes.
  const auto training = [&](const std::string& epochs) {
    std::vector<std::string> args = {"train", "--dataset", *dataset_id,
                                     "--hidden", "4"};
    const std::vector<std::string> quick = QuickSlangArgs();
    args.insert(args.end(), quick.begin(), quick.end());
    *(std::find(args.begin(), args.end(), "--epochs") + 1) = epochs;
    return args;
  };
  const std::vector<std::string> train = training("50");

  std::vector<std::string> wait = train;
  wait.insert(wait.end(), {"--model", "cubic-e2e", "--wait"});
  absl::StatusOr<nlohmann::json> waited = BnnctlJson(wait);
  ASSERT_TRUE(waited.ok()) << waited.status();
  EXPECT_EQ((*waited)["state"], "succeeded") << waited->dump();
  EXPECT_EQ((*waited)["model_name"], "cubic-e2e");
  EXPECT_EQ((*waited)["publish"], false);
  EXPECT_FALSE((*waited)["loss_curve"].empty());
  const std::string waited_id = (*waited)["job_id"];

  // A longer job, watched through a pipe: one line per event.
  absl::StatusOr<nlohmann::json> started = BnnctlJson(training("3000"));
  ASSERT_TRUE(started.ok()) << started.status();
  const std::string job_id = (*started)["job_id"];
  absl::StatusOr<CommandResult> watched = Bnnctl({"watch", job_id});
  ASSERT_TRUE(watched.ok()) << watched.status();
  EXPECT_EQ(watched->exit_code, 0) << watched->err;
  const std::vector<std::string> lines =
      absl::StrSplit(watched->out, '\n', absl::SkipEmpty());
  ASSERT_GE(lines.size(), 2u) << watched->out;
  long long last_step = -1;  // NOLINT(runtime/int)
  for (const std::string& line : lines) {
    // "running step 1200/3000 (40.0%) epoch ..." (the first event may be
    // the job still queued, without steps).
    long long step = 0;  // NOLINT(runtime/int): sscanf's %lld
    if (std::sscanf(line.c_str(), "%*s step %lld/", &step) == 1) {
      EXPECT_GE(step, last_step) << line;
      last_step = step;
    }
  }
  EXPECT_THAT(lines.back(), ::testing::StartsWith("succeeded step 3000/3000"));
  EXPECT_THAT(lines.back(), HasSubstr(" snapshot snap-"));

  // A cancelled job: watch and train --wait exit 1.
  started = BnnctlJson(training("1000000"));
  ASSERT_TRUE(started.ok()) << started.status();
  const std::string cancelled_id = (*started)["job_id"];
  absl::StatusOr<CommandResult> cancelled = Bnnctl({"cancel", cancelled_id});
  ASSERT_TRUE(cancelled.ok()) << cancelled.status();
  EXPECT_EQ(cancelled->exit_code, 0) << cancelled->err;
  absl::StatusOr<CommandResult> watch_cancelled =
      Bnnctl({"watch", cancelled_id});
  ASSERT_TRUE(watch_cancelled.ok()) << watch_cancelled.status();
  EXPECT_EQ(watch_cancelled->exit_code, 1);
  EXPECT_THAT(watch_cancelled->out, HasSubstr("cancel"));
  EXPECT_THAT(watch_cancelled->err, HasSubstr(cancelled_id));

  // jobs: newest first, filtered, limited.
  absl::StatusOr<nlohmann::json> listed =
      BnnctlJson({"jobs", "--dataset", *dataset_id});
  ASSERT_TRUE(listed.ok()) << listed.status();
  ASSERT_EQ((*listed)["jobs"].size(), 3u) << listed->dump();
  EXPECT_EQ((*listed)["jobs"][0]["job_id"], cancelled_id);
  EXPECT_EQ((*listed)["jobs"][1]["job_id"], job_id);
  EXPECT_EQ((*listed)["jobs"][2]["job_id"], waited_id);
  listed = BnnctlJson({"jobs", "--model", "cubic-e2e"});
  ASSERT_TRUE(listed.ok()) << listed.status();
  ASSERT_EQ((*listed)["jobs"].size(), 1u);
  EXPECT_EQ((*listed)["jobs"][0]["job_id"], waited_id);
  listed = BnnctlJson({"jobs", "--state", "cancelled,cancelling"});
  ASSERT_TRUE(listed.ok()) << listed.status();
  ASSERT_GE((*listed)["jobs"].size(), 1u);
  EXPECT_EQ((*listed)["jobs"][0]["job_id"], cancelled_id);
  absl::StatusOr<CommandResult> table =
      Bnnctl({"jobs", "--dataset", *dataset_id, "--limit", "2"});
  ASSERT_TRUE(table.ok()) << table.status();
  EXPECT_EQ(table->exit_code, 0) << table->err;
  EXPECT_THAT(table->out, ::testing::StartsWith("ID "));
  EXPECT_THAT(table->out, HasSubstr(cancelled_id));
  EXPECT_THAT(table->out, HasSubstr(job_id));
  EXPECT_THAT(table->out, Not(HasSubstr(waited_id)));

  // --publish needs --model, locally.
  std::vector<std::string> publish = train;
  publish.push_back("--publish");
  absl::StatusOr<CommandResult> usage = Bnnctl(publish);
  ASSERT_TRUE(usage.ok()) << usage.status();
  EXPECT_EQ(usage->exit_code, 2);
  EXPECT_THAT(usage->err, HasSubstr("--publish needs --model"));
}

}  // namespace
}  // namespace bnn::integration
