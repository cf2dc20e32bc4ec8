// Snapshot management end to end through bnnctl: export and import (the
// imported copy predicts exactly like the original), corrupt imports,
// deletion, listing, and the richer predict outputs (linearised, quantiles,
// per-sample).
#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <set>
#include <string>
#include <vector>

#include <absl/strings/str_format.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "tests/integration/server_fixture.h"

namespace bnn::integration {
namespace {

using ::bnn::testing::CommandResult;

using ::testing::HasSubstr;
using ::testing::IsEmpty;

class SnapshotTest : public ServerTest {
 protected:
  // A dataset and a SLANG snapshot of one hidden layer of 8 units.
  void TrainOne(uint64_t seed) {
    absl::StatusOr<std::string> dataset = UploadCubic(30, seed);
    ASSERT_TRUE(dataset.ok()) << dataset.status();
    dataset_id_ = *dataset;
    std::vector<std::string> args = QuickSlangArgs();
    args.insert(args.end(), {"--hidden", "8"});
    absl::StatusOr<std::string> snapshot = TrainSnapshot(dataset_id_, args);
    ASSERT_TRUE(snapshot.ok()) << snapshot.status();
    snapshot_id_ = *snapshot;
  }

  // x = -8, -7, ..., 8 in a one-column CSV; returns its path.
  static std::string GridCsv() {
    const std::string path = Path("grid.csv");
    std::ofstream grid(path);
    grid << "x\n";
    for (int x = -8; x <= 8; ++x) grid << x << "\n";
    return path;
  }

  static absl::StatusOr<nlohmann::json> Predict(
      const std::string& snapshot_id, std::vector<std::string> extra) {
    std::vector<std::string> args = {"predict", "--snapshot", snapshot_id,
                                     "--csv", GridCsv()};
    args.insert(args.end(), extra.begin(), extra.end());
    return BnnctlJson(args);
  }

  static std::set<std::string> SnapshotIds(const nlohmann::json& listed) {
    std::set<std::string> ids;
    for (const nlohmann::json& snapshot : listed["snapshots"]) {
      ids.insert(snapshot["snapshot_id"].get<std::string>());
    }
    return ids;
  }

  std::string dataset_id_;
  std::string snapshot_id_;
};

TEST_F(SnapshotTest, AnImportedExportPredictsIdentically) {
  TrainOne(/*seed=*/11);
  const std::string file = Path("exported.snapshot");
  absl::StatusOr<nlohmann::json> exported =
      BnnctlJson({"export", "--snapshot", snapshot_id_, "--out", file});
  ASSERT_TRUE(exported.ok()) << exported.status();
  EXPECT_EQ((*exported)["snapshot_id"], snapshot_id_);
  EXPECT_EQ((*exported)["path"], file);
  ASSERT_TRUE(std::filesystem::exists(file));
  EXPECT_EQ((*exported)["size_bytes"], std::filesystem::file_size(file));
  EXPECT_FALSE(std::filesystem::exists(file + ".partial"));

  absl::StatusOr<nlohmann::json> imported =
      BnnctlJson({"import", "--in", file});
  ASSERT_TRUE(imported.ok()) << imported.status();
  const std::string copy_id = (*imported)["snapshot_id"];
  EXPECT_NE(copy_id, snapshot_id_);
  absl::StatusOr<nlohmann::json> original =
      BnnctlJson({"snapshot", snapshot_id_});
  ASSERT_TRUE(original.ok()) << original.status();
  for (const char* field : {"method", "params", "dataset_id", "dataset_version",
                            "dataset_hash", "task", "model", "num_parameters",
                            "posterior_family", "steps", "seed"}) {
    EXPECT_EQ((*imported)[field], (*original)[field]) << field;
  }

  const std::vector<std::string> options = {
      "--samples", "32", "--seed", "5", "--quantiles", "0.1,0.9"};
  absl::StatusOr<nlohmann::json> from_original = Predict(snapshot_id_, options);
  ASSERT_TRUE(from_original.ok()) << from_original.status();
  absl::StatusOr<nlohmann::json> from_copy = Predict(copy_id, options);
  ASSERT_TRUE(from_copy.ok()) << from_copy.status();
  EXPECT_EQ((*from_copy)["snapshot_id"], copy_id);
  ASSERT_EQ((*from_original)["predictions"].size(), 17u);
  EXPECT_EQ((*from_copy)["predictions"], (*from_original)["predictions"]);
}

TEST_F(SnapshotTest, ACorruptImportIsRejectedAndStoresNothing) {
  TrainOne(/*seed=*/12);
  const std::string file = Path("corrupt.snapshot");
  absl::StatusOr<nlohmann::json> exported =
      BnnctlJson({"export", "--snapshot", snapshot_id_, "--out", file});
  ASSERT_TRUE(exported.ok()) << exported.status();
  absl::StatusOr<nlohmann::json> before = BnnctlJson({"snapshots"});
  ASSERT_TRUE(before.ok()) << before.status();

  // One flipped byte in the middle of the payload.
  {
    std::fstream bytes(file, std::ios::in | std::ios::out | std::ios::binary);
    const std::streamoff middle =
        static_cast<std::streamoff>(std::filesystem::file_size(file) / 2);
    bytes.seekg(middle);
    const char original = static_cast<char>(bytes.get());
    bytes.seekp(middle);
    bytes.put(static_cast<char>(original ^ 0x5a));
  }
  absl::StatusOr<CommandResult> result = Bnnctl({"import", "--in", file});
  ASSERT_TRUE(result.ok()) << result.status();
  EXPECT_EQ(result->exit_code, 1) << result->out;
  EXPECT_THAT(result->out, IsEmpty());
  EXPECT_THAT(result->err, HasSubstr("bnnctl: "));

  // A missing file fails before anything is sent.
  result = Bnnctl({"import", "--in", Path("no-such.snapshot")});
  ASSERT_TRUE(result.ok()) << result.status();
  EXPECT_EQ(result->exit_code, 1);
  EXPECT_THAT(result->err, HasSubstr("cannot open"));

  absl::StatusOr<nlohmann::json> after = BnnctlJson({"snapshots"});
  ASSERT_TRUE(after.ok()) << after.status();
  EXPECT_EQ(SnapshotIds(*after), SnapshotIds(*before));
}

TEST_F(SnapshotTest, ADeletedSnapshotIsNotFound) {
  TrainOne(/*seed=*/13);
  absl::StatusOr<nlohmann::json> deleted =
      BnnctlJson({"delete-snapshot", snapshot_id_});
  ASSERT_TRUE(deleted.ok()) << deleted.status();
  EXPECT_EQ((*deleted)["deleted"], true);

  for (const std::vector<std::string>& args :
       std::vector<std::vector<std::string>>{
           {"predict", "--snapshot", snapshot_id_, "--csv", GridCsv(),
            "--samples", "8"},
           {"snapshot", snapshot_id_},
           {"delete-snapshot", snapshot_id_},
           {"export", "--snapshot", snapshot_id_, "--out", Path("gone.bin")}}) {
    absl::StatusOr<CommandResult> result = Bnnctl(args);
    ASSERT_TRUE(result.ok()) << result.status();
    EXPECT_EQ(result->exit_code, 1) << args[0];
    EXPECT_THAT(result->out, IsEmpty()) << args[0];
    EXPECT_THAT(result->err, HasSubstr("NOT_FOUND")) << args[0];
    EXPECT_THAT(result->err, HasSubstr(snapshot_id_)) << args[0];
  }
  EXPECT_FALSE(std::filesystem::exists(Path("gone.bin")));
  absl::StatusOr<nlohmann::json> listed = BnnctlJson({"snapshots"});
  ASSERT_TRUE(listed.ok()) << listed.status();
  EXPECT_EQ(SnapshotIds(*listed).count(snapshot_id_), 0u);
}

TEST_F(SnapshotTest, SnapshotsFilterByDataset) {
  TrainOne(/*seed=*/14);
  const std::string first_dataset = dataset_id_;
  const std::string first_snapshot = snapshot_id_;
  TrainOne(/*seed=*/15);
  absl::StatusOr<nlohmann::json> of_first =
      BnnctlJson({"snapshots", "--dataset", first_dataset});
  ASSERT_TRUE(of_first.ok()) << of_first.status();
  EXPECT_EQ(SnapshotIds(*of_first), std::set<std::string>{first_snapshot});
  absl::StatusOr<nlohmann::json> all = BnnctlJson({"snapshots"});
  ASSERT_TRUE(all.ok()) << all.status();
  EXPECT_EQ(SnapshotIds(*all).count(first_snapshot), 1u);
  EXPECT_EQ(SnapshotIds(*all).count(snapshot_id_), 1u);

  absl::StatusOr<CommandResult> table = Bnnctl({"snapshots"});
  ASSERT_TRUE(table.ok()) << table.status();
  EXPECT_EQ(table->exit_code, 0) << table->err;
  EXPECT_THAT(table->out, HasSubstr("ID"));
  EXPECT_THAT(table->out, HasSubstr(snapshot_id_));
}

TEST_F(SnapshotTest, LinearizedQuantilesAndPerSampleOutputs) {
  TrainOne(/*seed=*/16);
  absl::StatusOr<nlohmann::json> linearized =
      Predict(snapshot_id_, {"--linearized", "--quantiles", "0.05,0.5,0.95"});
  ASSERT_TRUE(linearized.ok()) << linearized.status();
  EXPECT_EQ((*linearized)["linearized"], true);
  for (const nlohmann::json& row : (*linearized)["predictions"]) {
    ASSERT_EQ(row["quantiles"].size(), 3u) << row.dump();
    const double low = row["quantiles"][0];
    const double median = row["quantiles"][1];
    const double high = row["quantiles"][2];
    const double mean = row["mean"];
    const double std = row["std"];
    EXPECT_LT(low, median) << row.dump();
    EXPECT_LT(median, high) << row.dump();
    // The linearised predictive is Gaussian: its median is its mean and
    // the 5-95% interval is mean -/+ 1.645 std.
    EXPECT_NEAR(median, mean, 1e-6 * (1 + std::abs(mean))) << row.dump();
    EXPECT_NEAR(high - low, 2 * 1.6449 * std, 1e-3 * std) << row.dump();
  }

  absl::StatusOr<nlohmann::json> per_sample =
      Predict(snapshot_id_, {"--samples", "8", "--seed", "2", "--per-sample"});
  ASSERT_TRUE(per_sample.ok()) << per_sample.status();
  for (const nlohmann::json& row : (*per_sample)["predictions"]) {
    ASSERT_EQ(row["sample_outputs"].size(), 8u) << row.dump();
    double sum = 0;
    for (double value : row["sample_outputs"]) sum += value;
    // The predictive mean is the average of the sampled means.
    EXPECT_NEAR(sum / 8, row["mean"].get<double>(), 1e-9 * (1 + std::abs(sum)))
        << row.dump();
  }

  absl::StatusOr<CommandResult> table =
      Bnnctl({"predict", "--snapshot", snapshot_id_, "--csv", GridCsv(),
              "--linearized", "--quantiles", "0.05,0.95"});
  ASSERT_TRUE(table.ok()) << table.status();
  ASSERT_EQ(table->exit_code, 0) << table->err;
  EXPECT_THAT(table->out, HasSubstr("mean  "));
  EXPECT_THAT(table->out, HasSubstr("q0.05"));
  EXPECT_THAT(table->out, HasSubstr("q0.95"));
}

// Named models through bnnctl: publish, models, alias, model references in
// predict, acquire and export, and the deletions they guard.
TEST_F(SnapshotTest, NamedModelsThroughBnnctl) {
  TrainOne(/*seed=*/31);
  const std::string first = snapshot_id_;
  std::vector<std::string> args = QuickSlangArgs();
  args.insert(args.end(), {"--hidden", "6"});
  absl::StatusOr<std::string> second = TrainSnapshot(dataset_id_, args);
  ASSERT_TRUE(second.ok()) << second.status();

  absl::StatusOr<nlohmann::json> published = BnnctlJson(
      {"publish", first, "--model", "cli-model", "--alias", "stable"});
  ASSERT_TRUE(published.ok()) << published.status();
  EXPECT_EQ((*published)["version"], 1);
  EXPECT_EQ((*published)["aliases"],
            nlohmann::json::array({"latest", "stable"}));
  ASSERT_TRUE(BnnctlJson({"publish", *second, "--model", "cli-model"}).ok());

  absl::StatusOr<nlohmann::json> models = BnnctlJson({"models"});
  ASSERT_TRUE(models.ok()) << models.status();
  bool listed = false;
  for (const nlohmann::json& model : (*models)["models"]) {
    if (model["name"] != "cli-model") continue;
    listed = true;
    EXPECT_EQ(model["num_versions"], 2);
    EXPECT_EQ(model["aliases"]["latest"], 2);
    EXPECT_EQ(model["aliases"]["stable"], 1);
  }
  EXPECT_TRUE(listed);
  absl::StatusOr<CommandResult> shown = Bnnctl({"models", "cli-model"});
  ASSERT_TRUE(shown.ok()) << shown.status();
  EXPECT_EQ(shown->exit_code, 0) << shown->err;
  EXPECT_THAT(shown->out, HasSubstr("latest=2, stable=1"));
  EXPECT_THAT(shown->out, HasSubstr(*second));

  // A reference answers exactly as its snapshot does.
  absl::StatusOr<nlohmann::json> by_ref =
      BnnctlJson({"predict", "--model", "cli-model@stable", "--csv", GridCsv(),
                  "--samples", "8", "--seed", "5"});
  ASSERT_TRUE(by_ref.ok()) << by_ref.status();
  absl::StatusOr<nlohmann::json> by_id =
      Predict(first, {"--samples", "8", "--seed", "5"});
  ASSERT_TRUE(by_id.ok()) << by_id.status();
  EXPECT_EQ((*by_ref)["snapshot_id"], first);
  EXPECT_EQ((*by_ref)["model_name"], "cli-model");
  EXPECT_EQ((*by_ref)["model_version"], 1);
  EXPECT_EQ((*by_ref)["predictions"], (*by_id)["predictions"]);

  ASSERT_TRUE(BnnctlJson({"alias", "cli-model", "stable", "2"}).ok());
  absl::StatusOr<nlohmann::json> acquired = BnnctlJson(
      {"acquire", "--model", "cli-model@stable", "--csv", GridCsv(), "--k", "2",
       "--heuristic", "max_variance", "--samples", "8", "--seed", "1"});
  ASSERT_TRUE(acquired.ok()) << acquired.status();
  EXPECT_EQ((*acquired)["snapshot_id"], *second);
  EXPECT_EQ((*acquired)["model_version"], 2);

  const std::string file = Path("model.snapshot");
  absl::StatusOr<nlohmann::json> exported =
      BnnctlJson({"export", "--model", "cli-model:1", "--out", file});
  ASSERT_TRUE(exported.ok()) << exported.status();
  EXPECT_EQ((*exported)["snapshot_id"], first);
  EXPECT_EQ((*exported)["model_version"], 1);

  // A published snapshot is deleted only with --force; a used dataset too.
  absl::StatusOr<CommandResult> refused = Bnnctl({"delete-snapshot", first});
  ASSERT_TRUE(refused.ok()) << refused.status();
  EXPECT_EQ(refused->exit_code, 1);
  EXPECT_THAT(refused->err, HasSubstr("FAILED_PRECONDITION"));
  EXPECT_THAT(refused->err, HasSubstr("cli-model version 1"));
  ASSERT_TRUE(BnnctlJson({"delete-snapshot", first, "--force"}).ok());
  absl::StatusOr<nlohmann::json> after = BnnctlJson({"models", "cli-model"});
  ASSERT_TRUE(after.ok()) << after.status();
  EXPECT_EQ((*after)["num_versions"], 1);
  ASSERT_TRUE(BnnctlJson({"alias", "cli-model", "stable", "--delete"}).ok());
  ASSERT_TRUE(BnnctlJson({"delete-model", "cli-model"}).ok());

  refused = Bnnctl({"delete-dataset", dataset_id_});
  ASSERT_TRUE(refused.ok()) << refused.status();
  EXPECT_EQ(refused->exit_code, 1);
  EXPECT_THAT(refused->err, HasSubstr("is used by snapshots"));
  absl::StatusOr<nlohmann::json> deleted =
      BnnctlJson({"delete-dataset", dataset_id_, "--force"});
  ASSERT_TRUE(deleted.ok()) << deleted.status();
  EXPECT_EQ((*deleted)["dataset_id"], dataset_id_);
}

}  // namespace
}  // namespace bnn::integration
