// The active-learning loop's server side through bnnctl: appending labelled
// rows creates dataset versions, training on a version warm-started from a
// parent snapshot records both, and acquire picks k distinct pool rows.
#include <cmath>
#include <fstream>
#include <set>
#include <string>
#include <vector>

#include <absl/strings/str_cat.h>
#include <absl/strings/str_format.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "tests/integration/cubic_data.h"
#include "tests/integration/server_fixture.h"

namespace bnn::integration {
namespace {

using ::bnn::testing::CommandResult;

using ::testing::ContainsRegex;
using ::testing::HasSubstr;
using ::testing::IsEmpty;

using ContinualLearningTest = ServerTest;

// SLANG with one hidden layer of 8 units, trained from scratch.
std::vector<std::string> FromScratch() {
  std::vector<std::string> args = QuickSlangArgs();
  args.insert(args.end(), {"--hidden", "8"});
  return args;
}

TEST_F(ContinualLearningTest, AppendThenWarmStartOnTheNewVersion) {
  absl::StatusOr<std::string> dataset = UploadCubic(30, /*seed=*/21);
  ASSERT_TRUE(dataset.ok()) << dataset.status();
  absl::StatusOr<std::string> parent = TrainSnapshot(*dataset, FromScratch());
  ASSERT_TRUE(parent.ok()) << parent.status();

  const std::string more = Path("more.csv");
  ASSERT_TRUE(WriteCubicCsv(MakeCubicData(10, /*seed=*/22), more));
  absl::StatusOr<nlohmann::json> appended =
      BnnctlJson({"append", "--dataset", *dataset, "--csv", more, "--target",
                  "y", "--expected-version", "1"});
  ASSERT_TRUE(appended.ok()) << appended.status();
  EXPECT_EQ((*appended)["dataset_id"], *dataset);
  EXPECT_EQ((*appended)["version"], 2);
  EXPECT_EQ((*appended)["num_rows"], 40);

  // Both versions stay readable.
  absl::StatusOr<nlohmann::json> first =
      BnnctlJson({"dataset", *dataset, "--version", "1"});
  ASSERT_TRUE(first.ok()) << first.status();
  EXPECT_EQ((*first)["version"], 1);
  EXPECT_EQ((*first)["num_rows"], 30);
  absl::StatusOr<nlohmann::json> latest = BnnctlJson({"dataset", *dataset});
  ASSERT_TRUE(latest.ok()) << latest.status();
  EXPECT_EQ((*latest)["version"], 2);
  EXPECT_NE((*latest)["hash"], (*first)["hash"]);

  // A stale expected version is refused and changes nothing.
  absl::StatusOr<CommandResult> stale =
      Bnnctl({"append", "--dataset", *dataset, "--csv", more, "--target", "y",
              "--expected-version", "1"});
  ASSERT_TRUE(stale.ok()) << stale.status();
  EXPECT_EQ(stale->exit_code, 1);
  EXPECT_THAT(stale->err, HasSubstr("FAILED_PRECONDITION"));

  // No --hidden: a warm start uses its parent's architecture.
  std::vector<std::string> warm = QuickSlangArgs();
  warm.insert(warm.end(), {"--dataset-version", "2", "--parent", *parent});
  absl::StatusOr<std::string> child = TrainSnapshot(*dataset, warm);
  ASSERT_TRUE(child.ok()) << child.status();
  absl::StatusOr<nlohmann::json> info = BnnctlJson({"snapshot", *child});
  ASSERT_TRUE(info.ok()) << info.status();
  EXPECT_EQ((*info)["dataset_id"], *dataset);
  EXPECT_EQ((*info)["dataset_version"], 2);
  EXPECT_EQ((*info)["dataset_hash"], (*latest)["hash"]);
  EXPECT_EQ((*info)["parent_snapshot_id"], *parent);
  EXPECT_EQ((*info)["prior_from_parent"], false);
  EXPECT_EQ((*info)["model"]["hidden_sizes"], nlohmann::json::array({8}));

  absl::StatusOr<nlohmann::json> parent_info =
      BnnctlJson({"snapshot", *parent});
  ASSERT_TRUE(parent_info.ok()) << parent_info.status();
  EXPECT_EQ((*parent_info)["dataset_version"], 1);
  EXPECT_EQ((*parent_info)["parent_snapshot_id"], "");

  warm.push_back("--prior-from-parent");
  absl::StatusOr<std::string> bayes_update = TrainSnapshot(*dataset, warm);
  ASSERT_TRUE(bayes_update.ok()) << bayes_update.status();
  info = BnnctlJson({"snapshot", *bayes_update});
  ASSERT_TRUE(info.ok()) << info.status();
  EXPECT_EQ((*info)["prior_from_parent"], true);
}

// train --parent keeps the parent's method parameters (GetSnapshot's
// params) unless --param overrides them, and prints which it changed.
TEST_F(ContinualLearningTest, WarmStartKeepsTheParentsParameters) {
  absl::StatusOr<std::string> dataset = UploadCubic(30, /*seed=*/24);
  ASSERT_TRUE(dataset.ok()) << dataset.status();
  absl::StatusOr<std::string> parent = TrainSnapshot(*dataset, FromScratch());
  ASSERT_TRUE(parent.ok()) << parent.status();
  absl::StatusOr<nlohmann::json> parent_info =
      BnnctlJson({"snapshot", *parent});
  ASSERT_TRUE(parent_info.ok()) << parent_info.status();
  const nlohmann::json& parent_params = (*parent_info)["params"];
  ASSERT_EQ(parent_params["rank"], "2") << parent_params.dump();

  absl::StatusOr<CommandResult> started =
      Bnnctl({"--json", "train", "--dataset", *dataset, "--method", "slang",
              "--epochs", "20", "--seed", "2", "--parent", *parent, "--param",
              "learning_rate=0.1"});
  ASSERT_TRUE(started.ok()) << started.status();
  ASSERT_EQ(started->exit_code, 0) << started->err;
  EXPECT_THAT(started->err, HasSubstr(absl::StrCat("parameters from parent ",
                                                   *parent, ": kept ")));
  EXPECT_THAT(started->err, HasSubstr("rank=2"));
  EXPECT_THAT(
      started->err,
      HasSubstr(absl::StrCat("; changed learning_rate ",
                             parent_params["learning_rate"].get<std::string>(),
                             " -> 0.1")));
  const std::string job_id =
      nlohmann::json::parse(started->out)["job_id"].get<std::string>();
  absl::StatusOr<nlohmann::json> job =
      BnnctlJson({"job", job_id, "--wait", "--wait-timeout", "90"});
  ASSERT_TRUE(job.ok()) << job.status();
  absl::StatusOr<nlohmann::json> child =
      BnnctlJson({"snapshot", (*job)["snapshot_id"].get<std::string>()});
  ASSERT_TRUE(child.ok()) << child.status();
  // Every parameter as the parent's, but the one overridden.
  nlohmann::json expected = parent_params;
  expected["learning_rate"] = "0.1";
  EXPECT_EQ((*child)["params"], expected);
}

TEST_F(ContinualLearningTest, AppendChecksTheColumnsBeforeSending) {
  absl::StatusOr<std::string> dataset = UploadCubic(30, /*seed=*/23);
  ASSERT_TRUE(dataset.ok()) << dataset.status();
  const std::string renamed = Path("renamed.csv");
  std::ofstream(renamed) << "z,y\n1,1\n";
  absl::StatusOr<CommandResult> result = Bnnctl(
      {"append", "--dataset", *dataset, "--csv", renamed, "--target", "y"});
  ASSERT_TRUE(result.ok()) << result.status();
  EXPECT_EQ(result->exit_code, 1);
  EXPECT_THAT(result->err, HasSubstr("feature column 0 is 'z'"));
  absl::StatusOr<nlohmann::json> info = BnnctlJson({"dataset", *dataset});
  ASSERT_TRUE(info.ok()) << info.status();
  EXPECT_EQ((*info)["version"], 1);
}

// k distinct indices of the pool, each naming a real row.
void ExpectDistinctPoolRows(const nlohmann::json& acquired, size_t k,
                            int64_t pool_rows) {
  EXPECT_EQ(acquired["pool_rows"], pool_rows) << acquired.dump();
  ASSERT_EQ(acquired["acquired"].size(), k) << acquired.dump();
  std::set<int64_t> indices;
  for (const nlohmann::json& row : acquired["acquired"]) {
    const int64_t index = row["index"];
    EXPECT_GE(index, 0);
    EXPECT_LT(index, pool_rows);
    indices.insert(index);
  }
  EXPECT_EQ(indices.size(), k) << acquired.dump();
}

TEST_F(ContinualLearningTest, AcquireReturnsKDistinctPoolRows) {
  absl::StatusOr<std::string> dataset = UploadCubic(30, /*seed=*/24);
  ASSERT_TRUE(dataset.ok()) << dataset.status();
  absl::StatusOr<std::string> snapshot = TrainSnapshot(*dataset, FromScratch());
  ASSERT_TRUE(snapshot.ok()) << snapshot.status();

  // 41 pool points on [-8, 8], twice as wide as the training data.
  const std::string pool = Path("pool.csv");
  {
    std::ofstream out(pool);
    out << "x\n";
    for (int i = 0; i <= 40; ++i) out << absl::StrFormat("%g\n", -8 + 0.4 * i);
  }
  absl::StatusOr<nlohmann::json> top = BnnctlJson(
      {"acquire", "--snapshot", *snapshot, "--csv", pool, "--k", "5",
       "--heuristic", "max_variance", "--samples", "64", "--seed", "3"});
  ASSERT_TRUE(top.ok()) << top.status();
  ExpectDistinctPoolRows(*top, 5, 41);
  EXPECT_EQ((*top)["seed"], 3);
  double previous = INFINITY;
  for (const nlohmann::json& row : (*top)["acquired"]) {
    // Deterministic top-k comes best first; each row shows its features.
    const double score = row["score"];
    EXPECT_LE(score, previous) << top->dump();
    previous = score;
    const int64_t index = row["index"];
    ASSERT_EQ(row["x"].size(), 1u) << row.dump();
    EXPECT_NEAR(row["x"][0].get<double>(), -8 + 0.4 * index, 1e-9);
  }

  absl::StatusOr<nlohmann::json> diverse =
      BnnctlJson({"acquire", "--snapshot", *snapshot, "--dataset", *dataset,
                  "--version", "1", "--k", "10", "--heuristic", "max_variance",
                  "--diversity-power", "1", "--seed", "4"});
  ASSERT_TRUE(diverse.ok()) << diverse.status();
  ExpectDistinctPoolRows(*diverse, 10, 30);

  absl::StatusOr<nlohmann::json> random =
      BnnctlJson({"acquire", "--snapshot", *snapshot, "--dataset", *dataset,
                  "--k", "30", "--heuristic", "random"});
  ASSERT_TRUE(random.ok()) << random.status();
  ExpectDistinctPoolRows(*random, 30, 30);

  absl::StatusOr<CommandResult> table =
      Bnnctl({"acquire", "--snapshot", *snapshot, "--csv", pool, "--k", "2",
              "--heuristic", "max_variance"});
  ASSERT_TRUE(table.ok()) << table.status();
  ASSERT_EQ(table->exit_code, 0) << table->err;
  EXPECT_THAT(table->out, ContainsRegex("^rank +index +score +x\n"));
  EXPECT_THAT(table->out, HasSubstr("pool rows 41"));

  // More rows than the pool holds is the server's to reject.
  absl::StatusOr<CommandResult> too_many =
      Bnnctl({"acquire", "--snapshot", *snapshot, "--csv", pool, "--k", "42",
              "--heuristic", "max_variance"});
  ASSERT_TRUE(too_many.ok()) << too_many.status();
  EXPECT_EQ(too_many->exit_code, 1);
  EXPECT_THAT(too_many->out, IsEmpty());
  EXPECT_THAT(too_many->err, HasSubstr("INVALID_ARGUMENT"));
}

}  // namespace
}  // namespace bnn::integration
