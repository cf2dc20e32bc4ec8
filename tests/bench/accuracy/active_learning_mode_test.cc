// bnn-experiment active-learning end to end on a small generated dataset in
// the UCI layout: the report's keys, the growth of the labelled set, the
// paired design (round 0 identical for both acquisitions) and that
// max-variance acquisition seeks out the sparse, far-away region of the
// input space that random acquisition mostly ignores.
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>
#include <string>
#include <sys/wait.h>

#include "absl/strings/str_cat.h"
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "bnn/random.h"

#include "tests/bench/accuracy/run_tool.h"
#include "tests/test_util/test_util.h"

namespace bnn::experiment {
namespace {

using ::bnn::experiment::testing::ReadJson;
using ::bnn::experiment::testing::RunResult;
using ::bnn::experiment::testing::RunTool;
using ::bnn::experiment::testing::WriteText;
using ::bnn::testing::ScopedTempDir;
using ::testing::HasSubstr;

constexpr int kRows = 80;
constexpr int kInitial = 10;
constexpr int kTestPoints = 20;
constexpr int kRounds = 4;
constexpr int kSplits = 2;

// Every fifth row lies far from the others (|x0| in [5, 8] against a
// standard normal bulk): the region a model fitted to a few bulk points is
// most uncertain about.
bool IsFar(int64_t row) { return row % 5 == 0; }

// y = 3 sin(x0) + x0 + 100 + noise, x1 irrelevant; two UCI splits (the
// default --partition all only reads the rows, but the layout needs them).
void WriteUciDataset(const std::string& dir) {
  std::filesystem::create_directories(dir);
  Rng rng(5);
  std::string data;
  for (int i = 0; i < kRows; ++i) {
    double x0 = rng.Normal();
    if (IsFar(i)) x0 = (i % 10 == 0 ? 1 : -1) * rng.Uniform(5, 8);
    const double x1 = rng.Normal();
    const double y = 3 * std::sin(x0) + x0 + 100 + 0.3 * rng.Normal();
    data += absl::StrCat(x0, " ", x1, " ", y, "\n");
  }
  WriteText(dir + "/data.txt", data);
  WriteText(dir + "/index_features.txt", "0\n1\n");
  WriteText(dir + "/index_target.txt", "2\n");
  WriteText(dir + "/n_splits.txt", "2\n");
  for (int k = 0; k < 2; ++k) {
    std::string train, test;
    for (int i = 0; i < kRows; ++i) {
      absl::StrAppend((i % 4 == k) ? &test : &train, i, "\n");
    }
    WriteText(absl::StrCat(dir, "/index_train_", k, ".txt"), train);
    WriteText(absl::StrCat(dir, "/index_test_", k, ".txt"), test);
  }
}

class ActiveLearningModeTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_FALSE(tmp_.path().empty());
    WriteUciDataset(tmp_.File("uci/toy"));
  }
  std::string Args(const std::string& acquisition, const std::string& json,
                   int test_points = kTestPoints) const {
    return absl::StrCat(
        "active-learning --data-dir ", tmp_.File("uci"),
        " --dataset toy --method noisy_adam --param epochs=300 --hidden 10",
        " --acquisition ", acquisition, " --initial ", kInitial,
        " --test-points ", test_points, " --rounds ", kRounds, " --splits ",
        kSplits, " --test-samples 100 --acquire-samples 100 --seed 4",
        " --json-out ", json);
  }
  ScopedTempDir tmp_{"bnn_active_learning"};
};

// Checks one run's record and returns the far rows it acquired.
int CheckRunAndCountFar(const nlohmann::json& json,
                        const std::vector<std::string>& metrics) {
  EXPECT_EQ(json["mode"], "active-learning");
  EXPECT_EQ(json["config"]["hidden_sizes"], nlohmann::json::array({10}));
  EXPECT_EQ(json["config"]["protocol_defaults"]["noise_model"], "gamma");
  EXPECT_EQ(json["config"]["params"]["noise_model"], "gamma");
  for (const std::string& name : metrics) {
    SCOPED_TRACE(name);
    const auto& m = json["metrics"][name];
    EXPECT_TRUE(m["mean"].is_number());
    EXPECT_TRUE(m["se"].is_number());
    EXPECT_EQ(m["per_split"].size(), static_cast<size_t>(kSplits));
    for (const auto& v : m["per_split"]) {
      EXPECT_TRUE(v.is_number() && std::isfinite(v.get<double>()));
    }
  }
  // Original units: the target's std is ~3, its mean 100.
  EXPECT_GT(json["metrics"]["rmse"]["mean"].get<double>(), 0.0);
  EXPECT_LT(json["metrics"]["rmse"]["mean"].get<double>(), 30.0);

  int far = 0;
  EXPECT_EQ(json["splits"].size(), static_cast<size_t>(kSplits));
  for (const auto& split : json["splits"]) {
    EXPECT_EQ(split["num_train_initial"], kInitial);
    EXPECT_EQ(split["num_train_final"], kInitial + kRounds);
    EXPECT_EQ(split["num_test"], kTestPoints);
    EXPECT_EQ(split["num_pool_initial"], kRows - kInitial - kTestPoints);
    const auto& rounds = split["rounds"];
    EXPECT_EQ(rounds.size(), static_cast<size_t>(kRounds + 1));
    for (int r = 0; r <= kRounds && r < static_cast<int>(rounds.size()); ++r) {
      EXPECT_EQ(rounds[r]["train_rows"], kInitial + r);
      EXPECT_TRUE(rounds[r]["rmse"].is_number());
    }
    EXPECT_EQ(rounds.back()["rmse"],
              json["metrics"]["rmse"]["per_split"][split["split"].get<int>()]);
    // Acquired rows come from the pool: new, and neither initial nor test.
    std::set<int64_t> used;
    for (const auto& row : split["initial_rows"]) used.insert(row.get<int>());
    for (const auto& row : split["test_rows"]) used.insert(row.get<int>());
    EXPECT_EQ(used.size(), static_cast<size_t>(kInitial + kTestPoints));
    EXPECT_EQ(split["acquired_rows"].size(), static_cast<size_t>(kRounds));
    for (const auto& row : split["acquired_rows"]) {
      EXPECT_TRUE(used.insert(row.get<int>()).second) << row;
      far += IsFar(row.get<int>());
    }
  }
  return far;
}

TEST_F(ActiveLearningModeTest, MaxVarianceSeeksTheSparseRegion) {
  const std::string mv_json = tmp_.File("mv.json");
  const RunResult mv =
      RunTool(Args("max_variance", mv_json) +
                  " --reference hmc --reference-params "
                  "chains=2,warmup=100,epochs=300,thin=2,leapfrog_steps=10",
              tmp_.File("mv.log"));
  ASSERT_EQ(mv.exit_code, 0) << mv.output;
  EXPECT_THAT(mv.output, HasSubstr("| rmse |"));
  const nlohmann::json a = ReadJson(mv_json);
  ASSERT_FALSE(a.is_discarded());
  const int far_mv = CheckRunAndCountFar(
      a, {"rmse", "test_ll", "rmse_initial", "rmse_mean_rounds", "pearson_hmc",
          "pearson_hmc_initial"});
  EXPECT_EQ(a["config"]["acquisition"], "max_variance");
  for (const auto& split : a["splits"]) {
    EXPECT_EQ(split["reference"]["initial"]["train_rows"], kInitial);
    EXPECT_EQ(split["reference"]["final"]["train_rows"], kInitial + kRounds);
    // The method's fitted tau is handed to HMC.
    EXPECT_EQ(split["reference"]["final"]["reference_noise_precision"],
              split["rounds"].back()["noise_precision"]);
  }

  const std::string random_json = tmp_.File("random.json");
  const RunResult random =
      RunTool(Args("random", random_json), tmp_.File("random.log"));
  ASSERT_EQ(random.exit_code, 0) << random.output;
  const nlohmann::json b = ReadJson(random_json);
  ASSERT_FALSE(b.is_discarded());
  const int far_random = CheckRunAndCountFar(
      b, {"rmse", "test_ll", "rmse_initial", "rmse_mean_rounds"});
  EXPECT_FALSE(b["metrics"].contains("pearson_hmc"));

  // Paired design: the same partitions and the same round-0 model.
  for (int k = 0; k < kSplits; ++k) {
    EXPECT_EQ(a["splits"][k]["initial_rows"], b["splits"][k]["initial_rows"]);
    EXPECT_EQ(a["splits"][k]["test_rows"], b["splits"][k]["test_rows"]);
    EXPECT_EQ(a["splits"][k]["rounds"][0]["rmse"],
              b["splits"][k]["rounds"][0]["rmse"]);
  }
  // A fifth of the pool is far away: random picks about kRounds / 5 of them
  // per split, max-variance goes there first.
  EXPECT_NE(a["splits"][0]["acquired_rows"], b["splits"][0]["acquired_rows"]);
  EXPECT_GT(far_mv, far_random)
      << "max_variance " << a["splits"] << "\nrandom " << b["splits"];
  EXPECT_GE(far_mv, kSplits * kRounds / 2);
}

// --reference-dir: one HMC run per split and stage serves every method.
// The first method's run trains and writes the references; the second's
// reads the same files (same rows, settings and seed), so both methods are
// compared with the same reference variances.
TEST_F(ActiveLearningModeTest, SharedReferenceIsTrainedOnceForAllMethods) {
  const std::string dir = tmp_.File("refs");
  std::filesystem::create_directories(dir);
  const std::string ref =
      " --reference hmc --reference-dir " + dir +
      " --reference-params chains=2,warmup=100,epochs=300,thin=2,"
      "leapfrog_steps=10,noise_precision=2";
  auto args = [&](const std::string& method, const std::string& json) {
    std::string a = Args("max_variance", json) + ref;
    const std::string from = "--method noisy_adam";
    a.replace(a.find(from), from.size(), "--method " + method);
    const std::string rounds = absl::StrCat("--rounds ", kRounds);
    a.replace(a.find(rounds), rounds.size(), "--rounds 0");
    return a;
  };
  nlohmann::json runs[2];
  const char* const methods[2] = {"noisy_adam", "nng_blktri"};
  for (int m = 0; m < 2; ++m) {
    const std::string json = tmp_.File(absl::StrCat("shared", m, ".json"));
    const RunResult r = RunTool(args(methods[m], json), tmp_.File("s.log"));
    ASSERT_EQ(r.exit_code, 0) << r.output;
    runs[m] = ReadJson(json);
    ASSERT_FALSE(runs[m].is_discarded());
  }
  for (int k = 0; k < kSplits; ++k) {
    SCOPED_TRACE(k);
    const auto& a = runs[0]["splits"][k]["reference"]["initial"];
    const auto& b = runs[1]["splits"][k]["reference"]["initial"];
    EXPECT_EQ(a["reference_reused"], false);
    EXPECT_EQ(b["reference_reused"], true);
    EXPECT_EQ(a["reference_file"], b["reference_file"]);
    EXPECT_EQ(a["reference_mean_variance"], b["reference_mean_variance"]);
    EXPECT_EQ(a["reference_noise_precision"], 2.0);
    EXPECT_NE(a["method_mean_variance"], b["method_mean_variance"]);
    EXPECT_TRUE(a["pearson"].is_number());
    EXPECT_TRUE(b["pearson"].is_number());
  }
  EXPECT_EQ(std::distance(std::filesystem::directory_iterator(dir),
                          std::filesystem::directory_iterator()),
            kSplits);

  // Without noise_precision a shared reference would take each method's tau.
  const RunResult bad = RunTool(Args("max_variance", tmp_.File("bad.json")) +
                                    " --reference hmc --reference-dir " + dir,
                                tmp_.File("bad.log"));
  EXPECT_EQ(bad.exit_code, 1);
  EXPECT_THAT(bad.output, HasSubstr("give noise_precision"));
}

TEST_F(ActiveLearningModeTest, BadArgumentsFail) {
  const std::string log = tmp_.File("bad.log");
  RunResult r = RunTool(Args("entropy", tmp_.File("x.json")), log);
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_THAT(r.output, HasSubstr("max_variance or random"));
  r = RunTool(Args("random", tmp_.File("x.json"), kRows - kInitial), log);
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_THAT(r.output, HasSubstr("need more"));
  r = RunTool(Args("random", tmp_.File("x.json")) +
                  " --reference hmc --reference-params chainz=2",
              log);
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_THAT(r.output, HasSubstr("chainz"));
}

}  // namespace
}  // namespace bnn::experiment
