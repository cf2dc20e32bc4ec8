// Smoke test of client/examples/active_learning_demo against the real
// server: two short rounds of each strategy, a complete table, and the
// dataset versions and snapshot lineage the loop leaves behind.
#include <string>
#include <vector>

#include <absl/time/time.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "tests/integration/server_fixture.h"

namespace bnn::integration {
namespace {

using ::bnn::testing::CommandResult;
using ::bnn::testing::RunCommand;

using ::testing::ContainsRegex;
using ::testing::HasSubstr;

using ActiveLearningDemoTest = ServerTest;

TEST_F(ActiveLearningDemoTest, TwoRoundsOfEachStrategy) {
  // Few epochs: this checks the plumbing, not the learning curves.
  absl::StatusOr<CommandResult> result = RunCommand(
      {ACTIVE_LEARNING_DEMO_PATH, "--server", address(), "--repeats", "1",
       "--rounds", "2", "--batch", "2", "--pool", "50", "--test", "20",
       "--epochs", "100", "--warm_epochs", "20", "--samples", "16"},
      Path(""), absl::Seconds(60));
  ASSERT_TRUE(result.ok()) << result.status();
  ASSERT_EQ(result->exit_code, 0) << result->err;
  EXPECT_THAT(result->out,
              HasSubstr("round  labelled  RMSE max_variance  RMSE random\n"));
  for (const char* row :
       {"\n +0 +20 +[0-9.]+ +[0-9.]+\n", "\n +1 +22 +[0-9.]+ +[0-9.]+\n",
        "\n +2 +24 +[0-9.]+ +[0-9.]+\n"}) {
    EXPECT_THAT(result->out, ContainsRegex(row)) << result->out;
  }

  // One dataset per strategy, appended to once per round.
  absl::StatusOr<nlohmann::json> datasets = BnnctlJson({"datasets"});
  ASSERT_TRUE(datasets.ok()) << datasets.status();
  ASSERT_EQ((*datasets)["datasets"].size(), 2u) << datasets->dump();
  for (const nlohmann::json& dataset : (*datasets)["datasets"]) {
    EXPECT_EQ(dataset["version"], 3) << dataset.dump();
    EXPECT_EQ(dataset["num_rows"], 24) << dataset.dump();
  }
  // Every round's snapshot was warm-started from the previous one.
  absl::StatusOr<nlohmann::json> snapshots = BnnctlJson({"snapshots"});
  ASSERT_TRUE(snapshots.ok()) << snapshots.status();
  ASSERT_EQ((*snapshots)["snapshots"].size(), 6u);
  int with_parent = 0;
  for (const nlohmann::json& snapshot : (*snapshots)["snapshots"]) {
    if (snapshot["parent_snapshot_id"] != "") {
      ++with_parent;
      EXPECT_GE(snapshot["dataset_version"], 2) << snapshot.dump();
    }
  }
  EXPECT_EQ(with_parent, 4);
}

}  // namespace
}  // namespace bnn::integration
