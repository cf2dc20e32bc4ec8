// bnn-experiment end to end on small datasets written by the test in the
// supported layouts (UCI folder, labelled CSV), plus the shared aggregation.
#include "bench/accuracy/experiment.h"

#include <cmath>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>
#include <sys/wait.h>

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
using ::testing::Not;

// 60 rows, y = 40 x0 - 20 x1 + 500 + noise: large, shifted target units so
// that a missing conversion back to original units would show.
void WriteUciDataset(const std::string& dir) {
  std::filesystem::create_directories(dir);
  Rng rng(1);
  std::string data;
  for (int i = 0; i < 60; ++i) {
    const double a = rng.Normal(), b = rng.Normal(), c = rng.Normal();
    const double y = 40 * a - 20 * b + 500 + 5 * rng.Normal();
    data += absl::StrCat(a, " ", b, " ", c, " ", y, "\n");
  }
  WriteText(dir + "/data.txt", data);
  WriteText(dir + "/index_features.txt", "0\n1\n2\n");
  WriteText(dir + "/index_target.txt", "3\n");
  WriteText(dir + "/n_splits.txt", "2\n");
  WriteText(dir + "/n_hidden.txt", "8\n");
  for (int k = 0; k < 2; ++k) {
    std::string train, test;
    for (int i = 0; i < 60; ++i) {
      absl::StrAppend((i % 5 == k) ? &test : &train, i, "\n");
    }
    WriteText(absl::StrCat(dir, "/index_train_", k, ".txt"), train);
    WriteText(absl::StrCat(dir, "/index_test_", k, ".txt"), test);
  }
}

// Labels 2/4 as in LIBSVM's breast-cancer file.
void WriteLogregCsv(const std::string& path) {
  Rng rng(2);
  std::string csv = "label,f1,f2,f3\n";
  for (int i = 0; i < 60; ++i) {
    const double a = rng.Uniform(-1, 1), b = rng.Uniform(-1, 1),
                 c = rng.Uniform(-1, 1);
    const bool positive = rng.Uniform() < 1 / (1 + std::exp(-(3 * a - 2 * b)));
    csv += absl::StrCat(positive ? 4 : 2, ",", a, ",", b, ",", c, "\n");
  }
  WriteText(path, csv);
}

// Every metric {"mean", "se", "per_split"} with finite numbers.
void ExpectMetrics(const nlohmann::json& json,
                   const std::vector<std::string>& names, size_t splits) {
  for (const std::string& name : names) {
    SCOPED_TRACE(name);
    ASSERT_TRUE(json["metrics"].contains(name));
    const auto& m = json["metrics"][name];
    ASSERT_TRUE(m["mean"].is_number());
    EXPECT_TRUE(std::isfinite(m["mean"].get<double>()));
    ASSERT_TRUE(m["se"].is_number());
    EXPECT_TRUE(std::isfinite(m["se"].get<double>()));
    ASSERT_EQ(m["per_split"].size(), splits);
    for (const auto& v : m["per_split"]) {
      ASSERT_TRUE(v.is_number());
      EXPECT_TRUE(std::isfinite(v.get<double>()));
    }
  }
}

void ExpectProvenance(const nlohmann::json& json, const std::string& mode) {
  EXPECT_EQ(json["mode"], mode);
  EXPECT_FALSE(json["git_commit"].get<std::string>().empty());
  // The binary's own build: its commit and hash (bench/common/provenance.h).
  EXPECT_FALSE(json["build"]["commit"].get<std::string>().empty());
  EXPECT_TRUE(json["build"]["tree_clean"].is_boolean());
  EXPECT_THAT(json["build"]["binary"].get<std::string>(),
              HasSubstr("bnn-experiment"));
  EXPECT_EQ(json["build"]["binary_sha256"].get<std::string>().size(), 64u);
  EXPECT_THAT(json["command_line"].get<std::string>(),
              HasSubstr("bnn-experiment " + mode));
  EXPECT_TRUE(json["seed"].is_number());
  EXPECT_GT(json["wall_seconds"].get<double>(), 0.0);
}

class ExperimentToolTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_FALSE(tmp_.path().empty());
    WriteUciDataset(tmp_.File("uci/toy"));
    WriteLogregCsv(tmp_.File("toy.csv"));
  }
  std::string UciArgs(int threads, const std::string& json) const {
    return absl::StrCat(
        "uci --data-dir ", tmp_.File("uci"),
        " --dataset toy --method slang --param epochs=4 --param batch_size=10"
        " --tune noise_precision=1,10 --folds 2 --test-samples 20 --seed 3",
        " --threads ", threads, " --json-out ", json);
  }
  ScopedTempDir tmp_{"bnn_experiment"};
};

TEST_F(ExperimentToolTest, UciRunsEndToEndReproducibly) {
  const std::string json_path = tmp_.File("uci.json");
  const RunResult run = RunTool(UciArgs(2, json_path), tmp_.File("uci.log"));
  ASSERT_EQ(run.exit_code, 0) << run.output;
  EXPECT_THAT(run.output, HasSubstr("| rmse |"));
  const nlohmann::json json = ReadJson(json_path);
  ASSERT_FALSE(json.is_discarded());
  ExpectProvenance(json, "uci");
  ExpectMetrics(json, {"rmse", "test_ll"}, 2);
  EXPECT_EQ(json["config"]["hidden_sizes"], nlohmann::json::array({8}));
  ASSERT_EQ(json["splits"].size(), 2u);
  for (const auto& split : json["splits"]) {
    ASSERT_TRUE(split.contains("chosen"));
    EXPECT_TRUE(split["chosen"].contains("noise_precision"));
    EXPECT_EQ(split["tuning"]["points"].size(), 2u);
    // The final fit's diagnostics: noise level, training error and the
    // loss at about 100 evenly spaced steps up to the last (4 epochs of 5
    // steps: every step).
    EXPECT_GT(split["noise_std"].get<double>(), 0.0);
    EXPECT_GT(split["train_rmse"].get<double>(), 0.0);
    const auto& curve = split["loss_curve"];
    ASSERT_EQ(curve.size(), 20u) << curve;
    for (size_t i = 0; i < curve.size(); ++i) {
      EXPECT_EQ(curve[i][0].get<int64_t>(), static_cast<int64_t>(i + 1));
      EXPECT_TRUE(std::isfinite(curve[i][1].get<double>()));
    }
  }
  // Original units: the target's std is ~45, so an RMSE in standardised
  // units (< 2) would mean the conversion is missing.
  EXPECT_GT(json["metrics"]["rmse"]["mean"].get<double>(), 2.0);

  // The same seed on one thread gives the same numbers.
  const std::string again = tmp_.File("uci1.json");
  ASSERT_EQ(RunTool(UciArgs(1, again), tmp_.File("uci1.log")).exit_code, 0);
  EXPECT_EQ(ReadJson(again)["metrics"], json["metrics"]);
}

TEST_F(ExperimentToolTest, AStoppedRunContinuesFromItsSplitsState) {
  // A full protocol longer than a session: stopped after its first split,
  // the same command (on another thread count) finishes the other and
  // reports what an uninterrupted run reports.
  const std::string whole = tmp_.File("whole.json");
  ASSERT_EQ(RunTool(UciArgs(1, whole), tmp_.File("whole.log")).exit_code, 0);
  const std::string state = tmp_.File("uci.state");
  const std::string parts = tmp_.File("parts.json");
  const std::string resumable = UciArgs(1, parts) + " --splits-state " + state;
  RunResult r =
      RunTool(resumable + " --stop-after-splits 1", tmp_.File("first.log"));
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_THAT(r.output, HasSubstr("stopped after keeping 1 splits"));
  EXPECT_TRUE(std::filesystem::exists(state));
  EXPECT_FALSE(std::filesystem::exists(parts));

  // The state of another run (another activation) is refused, and kept.
  r = RunTool(absl::StrCat(resumable, " --activation tanh"),
              tmp_.File("other.log"));
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_THAT(r.output, HasSubstr("holds the splits of another run"));
  EXPECT_TRUE(std::filesystem::exists(state));

  r = RunTool(UciArgs(2, parts) + " --splits-state " + state,
              tmp_.File("second.log"));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_THAT(r.output, HasSubstr("1 of 2 splits done"));
  EXPECT_THAT(r.output, HasSubstr("[split 1]"));
  EXPECT_THAT(r.output, Not(HasSubstr("[split 0]")));
  EXPECT_FALSE(std::filesystem::exists(state));
  const nlohmann::json a = ReadJson(whole);
  const nlohmann::json b = ReadJson(parts);
  ASSERT_FALSE(b.is_discarded());
  EXPECT_EQ(a["metrics"], b["metrics"]);
  ASSERT_EQ(b["splits"].size(), 2u);
  for (int k = 0; k < 2; ++k) {
    EXPECT_EQ(a["splits"][k]["chosen"], b["splits"][k]["chosen"]) << k;
    EXPECT_EQ(a["splits"][k]["tuning"], b["splits"][k]["tuning"]) << k;
    EXPECT_EQ(a["splits"][k]["loss_curve"], b["splits"][k]["loss_curve"]);
  }
}

TEST_F(ExperimentToolTest, LogregRunsEndToEnd) {
  const std::string json_path = tmp_.File("logreg.json");
  const RunResult run = RunTool(
      absl::StrCat("logreg --csv ", tmp_.File("toy.csv"),
                   " --method slang --param rank=1 --param epochs=5"
                   " --param prior_precision=1 --splits 2 --test-samples 50"
                   " --elbo-samples 50 --json-out ",
                   json_path),
      tmp_.File("logreg.log"));
  ASSERT_EQ(run.exit_code, 0) << run.output;
  const nlohmann::json json = ReadJson(json_path);
  ASSERT_FALSE(json.is_discarded());
  ExpectProvenance(json, "logreg");
  ExpectMetrics(json,
                {"neg_elbo", "nll", "accuracy", "ece", "auroc", "sym_kl",
                 "var_spearman", "var_log_ratio"},
                2);
  EXPECT_EQ(json["config"]["class_values"], nlohmann::json::array({2, 4}));
  EXPECT_EQ(json["config"]["params"]["standardize"], "false");
  EXPECT_EQ(json["splits"][0]["neg_elbo_estimator"], "gauss_hermite_96");
  EXPECT_GT(json["metrics"]["sym_kl"]["mean"].get<double>(), 0.0);
}

TEST_F(ExperimentToolTest, LogregWithATestFileHasOneSplit) {
  const std::string json_path = tmp_.File("fixed.json");
  const RunResult run = RunTool(
      absl::StrCat("logreg --csv ", tmp_.File("toy.csv"), " --test-csv ",
                   tmp_.File("toy.csv"),
                   " --method exact_full --param epochs=50 --test-samples 20"
                   " --json-out ",
                   json_path),
      tmp_.File("fixed.log"));
  ASSERT_EQ(run.exit_code, 0) << run.output;
  const nlohmann::json json = ReadJson(json_path);
  ExpectMetrics(json, {"neg_elbo", "nll", "sym_kl"}, 1);
  // The reference is exact_full itself.
  EXPECT_LT(json["metrics"]["sym_kl"]["mean"].get<double>(), 1e-6);
}

TEST_F(ExperimentToolTest, BadArgumentsFailBeforeTraining) {
  const std::string log = tmp_.File("bad.log");
  RunResult r =
      RunTool("uci --data-dir x --dataset y --method slang --bogus 1", log);
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_THAT(r.output, HasSubstr("unknown flag '--bogus'"));
  r = RunTool(absl::StrCat("logreg --csv ", tmp_.File("toy.csv"),
                           " --method slang --param rnak=2"),
              log);
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_THAT(r.output, HasSubstr("unknown parameter 'rnak'"));
  r = RunTool(absl::StrCat("logreg --csv ", tmp_.File("toy.csv"),
                           " --method slang --param seed=2"),
              log);
  EXPECT_THAT(r.output, HasSubstr("--seed"));
  r = RunTool("nosuchmode", log);
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_THAT(r.output, HasSubstr("logreg"));
}

TEST(SummarizeTest, MeanAndStandardErrorSkipNaN) {
  const MetricSummary s = Summarize({1.0, 2.0, std::nan(""), 6.0});
  EXPECT_DOUBLE_EQ(s.mean, 3.0);
  // Sample sd of {1, 2, 6} is sqrt(7); s.e. = sqrt(7 / 3).
  EXPECT_NEAR(s.se, std::sqrt(7.0 / 3.0), 1e-12);
  EXPECT_EQ(s.per_split.size(), 4u);
  EXPECT_EQ(Summarize({5.0}).se, 0.0);
  EXPECT_TRUE(std::isnan(Summarize({std::nan("")}).mean));
}

TEST(StreamSeedTest, StreamsAndSplitsAreDistinct) {
  std::set<uint64_t> seeds;
  for (int split = 0; split < 20; ++split) {
    for (Stream s : {Stream::kTuning, Stream::kTraining, Stream::kPrediction,
                     Stream::kElbo, Stream::kReference}) {
      seeds.insert(StreamSeed(0, split, s));
    }
  }
  EXPECT_EQ(seeds.size(), 100u);
  EXPECT_EQ(StreamSeed(7, 3, Stream::kTraining),
            StreamSeed(7, 3, Stream::kTraining));
}

}  // namespace
}  // namespace bnn::experiment
