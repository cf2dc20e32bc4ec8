// The quickstart path end to end: the real bnn-server on a free loopback port,
// and every step (upload, train, wait, predict) through the real bnnctl with
// --json, as a user or script would run it.
#include <algorithm>
#include <cmath>
#include <fstream>
#include <map>
#include <string>
#include <vector>

#include <absl/strings/str_format.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "tests/integration/cubic_data.h"
#include "tests/integration/server_fixture.h"

namespace bnn::integration {
namespace {

using ::testing::ContainsRegex;

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

}  // namespace
}  // namespace bnn::integration
