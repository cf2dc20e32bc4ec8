// bnn-experiment classify and ood end to end on tiny IDX (and CSV) sets
// written by the test: 4 x 4 images of 3 classes, each a bright 2 x 2 block
// in its own quadrant; the OOD set lights all three blocks at half
// intensity, a clear shift on which a fitted classifier is unsure.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <sys/wait.h>
#include <vector>

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
using ::bnn::testing::ScopedTempDir;
using ::testing::HasSubstr;
using ::testing::Not;

constexpr int kSide = 4;
constexpr int kPixels = kSide * kSide;

void PutBigEndian(uint32_t v, std::string* out) {
  for (int shift = 24; shift >= 0; shift -= 8) {
    out->push_back(static_cast<char>((v >> shift) & 0xff));
  }
}

// Class c (0..2) lights quadrant c; `mixed` lights quadrants 0-2 at half
// intensity (the OOD images).
std::vector<uint8_t> Image(int c, bool mixed, Rng& rng) {
  std::vector<uint8_t> pixels(kPixels);
  for (int r = 0; r < kSide; ++r) {
    for (int col = 0; col < kSide; ++col) {
      const int quadrant = (r / 2) * 2 + col / 2;
      double v = 20;
      if (mixed && quadrant < 3) v = 110;
      if (!mixed && quadrant == c) v = 220;
      v += 25 * rng.Normal();
      pixels[r * kSide + col] =
          static_cast<uint8_t>(std::lround(std::clamp(v, 0.0, 255.0)));
    }
  }
  return pixels;
}

// Writes IMAGES/LABELS IDX files (plain, ubyte) of n images; returns the
// pixels too (row-major, for the CSV copy).
std::vector<std::vector<uint8_t>> WriteIdx(const std::string& images_path,
                                           const std::string& labels_path,
                                           int n, bool mixed, uint64_t seed) {
  Rng rng(seed);
  std::string images, labels;
  PutBigEndian(0x00000803, &images);
  PutBigEndian(n, &images);
  PutBigEndian(kSide, &images);
  PutBigEndian(kSide, &images);
  PutBigEndian(0x00000801, &labels);
  PutBigEndian(n, &labels);
  std::vector<std::vector<uint8_t>> all;
  for (int i = 0; i < n; ++i) {
    const int c = i % 3;
    all.push_back(Image(c, mixed, rng));
    images.append(all.back().begin(), all.back().end());
    labels.push_back(static_cast<char>(c));
  }
  std::ofstream(images_path, std::ios::binary) << images;
  if (!labels_path.empty())
    std::ofstream(labels_path, std::ios::binary) << labels;
  return all;
}

double Metric(const nlohmann::json& json, const std::string& name) {
  const auto& m = json["metrics"][name];
  EXPECT_EQ(m["per_split"].size(), 1u) << name;
  return m["mean"].is_number() ? m["mean"].get<double>() : std::nan("");
}

class ClassifyOodTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_FALSE(tmp_.path().empty());
    WriteIdx(tmp_.File("train-images"), tmp_.File("train-labels"), 300, false,
             1);
    WriteIdx(tmp_.File("test-images"), tmp_.File("test-labels"), 150, false, 2);
    const auto ood = WriteIdx(tmp_.File("ood-images"), "", 150, true, 3);
    // The OOD set as CSV too, with a label column the mode must drop.
    std::string csv = "label";
    for (int p = 0; p < kPixels; ++p) absl::StrAppend(&csv, ",p", p);
    csv += "\n";
    for (const auto& image : ood) {
      csv += "7";
      for (uint8_t v : image) absl::StrAppend(&csv, ",", v / 255.0);
      csv += "\n";
    }
    std::ofstream(tmp_.File("ood.csv")) << csv;
  }
  std::string Train() const {
    return tmp_.File("train-images") + ":" + tmp_.File("train-labels");
  }
  std::string Test() const {
    return tmp_.File("test-images") + ":" + tmp_.File("test-labels");
  }
  ScopedTempDir tmp_{"bnn_classify"};
};

TEST_F(ClassifyOodTest, ClassifyReportsCalibrationAndACurveThenOodReusesIt) {
  const std::string json_path = tmp_.File("classify.json");
  const std::string snapshot = tmp_.File("bali.snap");
  const RunResult run = RunTool(
      absl::StrCat("classify --method bali --hidden 16,16 --iterations 60",
                   " --param batch_size=64 --eval-every 20 --curve-samples 8",
                   " --curve-train-rows 50 --test-samples 32 --seed 4",
                   " --train-idx ", Train(), " --test-idx ", Test(),
                   " --save-snapshot ", snapshot, " --json-out ", json_path),
      tmp_.File("classify.log"));
  ASSERT_EQ(run.exit_code, 0) << run.output;
  EXPECT_THAT(run.output, HasSubstr("| accuracy |"));
  const nlohmann::json json = ReadJson(json_path);
  ASSERT_FALSE(json.is_discarded());
  EXPECT_EQ(json["mode"], "classify");
  for (const char* key : {"accuracy", "nll", "ece", "brier"}) {
    EXPECT_TRUE(std::isfinite(Metric(json, key))) << key;
  }
  EXPECT_GT(Metric(json, "accuracy"), 0.6);  // chance is 1/3
  EXPECT_LT(Metric(json, "nll"), std::log(3.0));
  EXPECT_LT(Metric(json, "brier"), 2.0 / 3.0);  // uniform predictions
  EXPECT_EQ(json["config"]["ece_bins"], 15);
  EXPECT_EQ(json["config"]["hidden_sizes"], nlohmann::json::array({16, 16}));
  EXPECT_EQ(json["config"]["params"]["standardize"], "false");
  EXPECT_EQ(json["config"]["activation"], "leaky_tanh");

  const auto& split = json["splits"][0];
  EXPECT_EQ(split["steps"], 60);
  const auto& reliability = split["reliability"];
  ASSERT_EQ(reliability["count"].size(), 15u);
  int64_t rows = 0;
  double ece = 0;
  for (size_t b = 0; b < 15; ++b) {
    const int64_t count = reliability["count"][b].get<int64_t>();
    rows += count;
    ece += count * std::abs(reliability["accuracy"][b].get<double>() -
                            reliability["confidence"][b].get<double>());
  }
  EXPECT_EQ(rows, 150);
  EXPECT_NEAR(ece / rows, Metric(json, "ece"), 1e-9);

  const auto& curve = split["learning_curve"];
  EXPECT_EQ(curve["step"], nlohmann::json::array({20, 40, 60}));
  ASSERT_EQ(curve["test_nll"].size(), 3u);
  ASSERT_EQ(curve["train_nll"].size(), 3u);
  EXPECT_EQ(curve["samples"], 8);
  for (const auto& v : curve["test_accuracy"]) {
    EXPECT_GE(v.get<double>(), 0.0);
    EXPECT_LE(v.get<double>(), 1.0);
  }
  ASSERT_TRUE(std::filesystem::exists(snapshot));

  // OOD from the saved snapshot: the half-lit mixtures are more uncertain.
  const std::string ood_json = tmp_.File("ood.json");
  const RunResult ood = RunTool(
      absl::StrCat("ood --snapshot ", snapshot, " --in-idx ", Test(),
                   " --ood-idx ", tmp_.File("ood-images"),
                   " --test-samples 32 --roc-points 50 --json-out ", ood_json),
      tmp_.File("ood.log"));
  ASSERT_EQ(ood.exit_code, 0) << ood.output;
  const nlohmann::json o = ReadJson(ood_json);
  ASSERT_FALSE(o.is_discarded());
  EXPECT_EQ(o["mode"], "ood");
  EXPECT_EQ(o["config"]["method"], "bali_w");
  EXPECT_GT(Metric(o, "auroc_entropy"), 0.8);
  EXPECT_EQ(Metric(o, "auroc"), Metric(o, "auroc_entropy"));
  EXPECT_GT(Metric(o, "auroc_mi"), 0.5);
  // The snapshot predicts as it did in classify (other samples, same model).
  EXPECT_NEAR(Metric(o, "in_accuracy"), Metric(json, "accuracy"), 0.1);
  const auto& roc = o["splits"][0]["roc"]["entropy"];
  ASSERT_GE(roc["fpr"].size(), 2u);
  EXPECT_LE(roc["fpr"].size(), 50u);
  EXPECT_EQ(roc["fpr"].size(), roc["tpr"].size());
  EXPECT_EQ(roc["fpr"].front(), 0.0);
  EXPECT_EQ(roc["tpr"].back(), 1.0);
  EXPECT_TRUE(o["splits"][0]["roc"].contains("mutual_information"));
  EXPECT_GT(o["splits"][0]["mean_entropy_ood"].get<double>(),
            o["splits"][0]["mean_entropy_in"].get<double>());
}

TEST_F(ClassifyOodTest, AStoppedRunResumesFromItsCheckpointToTheSameResult) {
  // The run the paper's 30,000 F-MNIST iterations need (longer than a
  // session): stopped after its checkpoint at step 30, rerun, it finishes
  // with the record of an uninterrupted run, learning curve included.
  const std::string args = absl::StrCat(
      "classify --method bali --hidden 16,16 --iterations 60",
      " --param batch_size=64 --eval-every 20 --curve-samples 8",
      " --curve-train-rows 50 --test-samples 32 --seed 4 --train-idx ", Train(),
      " --test-idx ", Test());
  const RunResult whole =
      RunTool(absl::StrCat(args, " --json-out ", tmp_.File("whole.json")),
              tmp_.File("whole.log"));
  ASSERT_EQ(whole.exit_code, 0) << whole.output;

  const std::string checkpoint = tmp_.File("run.ckpt");
  const std::string resumable =
      absl::StrCat(args, " --checkpoint ", checkpoint, " --checkpoint-steps 15",
                   " --json-out ", tmp_.File("parts.json"));
  const RunResult first = RunTool(absl::StrCat(resumable, " --stop-at-step 30"),
                                  tmp_.File("first.log"));
  EXPECT_EQ(first.exit_code, 1);
  EXPECT_THAT(first.output, HasSubstr("stopped after the checkpoint at step "
                                      "30 (--stop-at-step 30)"));
  EXPECT_TRUE(std::filesystem::exists(checkpoint));
  EXPECT_FALSE(std::filesystem::exists(tmp_.File("parts.json")));
  const RunResult second = RunTool(resumable, tmp_.File("second.log"));
  ASSERT_EQ(second.exit_code, 0) << second.output;
  EXPECT_THAT(second.output, HasSubstr("resuming from"));
  EXPECT_THAT(second.output, HasSubstr("[step 45] checkpoint"));
  EXPECT_THAT(second.output, Not(HasSubstr("[step 15] checkpoint")));
  EXPECT_FALSE(std::filesystem::exists(checkpoint));
  EXPECT_FALSE(std::filesystem::exists(checkpoint + ".curve.json"));

  const nlohmann::json a = ReadJson(tmp_.File("whole.json"));
  const nlohmann::json b = ReadJson(tmp_.File("parts.json"));
  ASSERT_FALSE(b.is_discarded());
  for (const char* key : {"accuracy", "nll", "ece", "brier"}) {
    EXPECT_EQ(Metric(a, key), Metric(b, key)) << key;
  }
  const auto& ca = a["splits"][0]["learning_curve"];
  const auto& cb = b["splits"][0]["learning_curve"];
  EXPECT_EQ(cb["step"], nlohmann::json::array({20, 40, 60}));
  for (const char* key : {"test_nll", "test_accuracy", "train_nll"}) {
    EXPECT_EQ(ca[key], cb[key]) << key;
  }
  EXPECT_EQ(b["splits"][0]["resumed_at_steps"], nlohmann::json::array({30}));
  EXPECT_FALSE(a["splits"][0].contains("resumed_at_steps"));
}

TEST_F(ClassifyOodTest, OodTrainsDropoutItselfAndReadsACsvOodSet) {
  const std::string json_path = tmp_.File("ood_dropout.json");
  const RunResult run = RunTool(
      absl::StrCat("ood --method mc_dropout --hidden 16,16 --iterations 150",
                   " --param batch_size=32 --param learning_rate=0.01",
                   " --test-samples 16 --train-idx ", Train(), " --in-idx ",
                   tmp_.File("test-images"), " --ood-csv ",
                   tmp_.File("ood.csv"), " --json-out ", json_path),
      tmp_.File("ood_dropout.log"));
  ASSERT_EQ(run.exit_code, 0) << run.output;
  const nlohmann::json json = ReadJson(json_path);
  ASSERT_FALSE(json.is_discarded());
  EXPECT_GT(Metric(json, "auroc"), 0.8);
  EXPECT_TRUE(std::isfinite(Metric(json, "auroc_mi")));
  // Unlabelled in-distribution images: no in-distribution accuracy.
  EXPECT_FALSE(json["metrics"].contains("in_accuracy"));
  EXPECT_EQ(json["splits"][0]["num_ood"], 150);
}

TEST_F(ClassifyOodTest, BadArgumentsAreExplained) {
  const std::string log = tmp_.File("bad.log");
  RunResult r =
      RunTool(absl::StrCat("classify --method map --train-idx ", Train()), log);
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_THAT(r.output, HasSubstr("--test-idx"));
  r = RunTool(absl::StrCat("classify --method map --train-idx ",
                           tmp_.File("train-images"), " --test-idx ", Test()),
              log);
  EXPECT_THAT(r.output, HasSubstr("IMAGES:LABELS"));
  r = RunTool(absl::StrCat("classify --method map --idx-scale 0 --train-idx ",
                           Train(), " --test-idx ", Test()),
              log);
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_THAT(r.output, HasSubstr("--idx-scale = '0' must be > 0"));
  r = RunTool(absl::StrCat("ood --snapshot ", tmp_.File("x.snap"),
                           " --param dropout=0.2 --in-idx ", Test(),
                           " --ood-idx ", tmp_.File("ood-images")),
              log);
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_THAT(r.output, HasSubstr("--snapshot replaces it"));
}

}  // namespace
}  // namespace bnn::experiment
