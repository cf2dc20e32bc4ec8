#include "client/bnnctl_output.h"

#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <map>
#include <random>
#include <string>
#include <vector>

#include <absl/strings/str_cat.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

namespace bnn::client {
namespace {

using ::testing::HasSubstr;

FeatureTable OneFeature(std::vector<double> xs) {
  FeatureTable table;
  table.feature_names = {"x"};
  table.num_features = 1;
  table.features = std::move(xs);
  return table;
}

uint64_t Bits(double value) {
  uint64_t bits = 0;
  std::memcpy(&bits, &value, sizeof(bits));
  return bits;
}

TEST(JsonTextTest, DoublesRoundTripExactly) {
  // Uniform bit patterns: every exponent, subnormals included.
  std::mt19937_64 rng(5);
  Json values = Json::array();
  std::vector<double> expected;
  while (expected.size() < 20000) {
    const uint64_t bits = rng();
    double value = 0;
    std::memcpy(&value, &bits, sizeof(value));
    if (!std::isfinite(value)) continue;
    values.push_back(value);
    expected.push_back(value);
  }
  for (double value : {0.0, -0.0, 0.1, 1.0 / 3.0, 6.02214076e23,
                       std::numeric_limits<double>::denorm_min(),
                       std::numeric_limits<double>::max(),
                       std::numeric_limits<double>::lowest()}) {
    values.push_back(value);
    expected.push_back(value);
  }
  const std::string text = JsonText(values);
  const nlohmann::json parsed = nlohmann::json::parse(text);
  ASSERT_EQ(parsed.size(), expected.size());
  for (size_t i = 0; i < expected.size(); ++i) {
    EXPECT_EQ(Bits(parsed[i].get<double>()), Bits(expected[i])) << i;
  }
  // The C library's parser reads the same values.
  char* cursor = const_cast<char*>(text.c_str()) + 1;
  for (size_t i = 0; i < expected.size(); ++i) {
    const double value = std::strtod(cursor, &cursor);
    ASSERT_EQ(Bits(value), Bits(expected[i])) << i;
    ++cursor;  // ',' or ']'
  }
}

TEST(JsonTextTest, NonFiniteNumbersAreNull) {
  const double nan = std::numeric_limits<double>::quiet_NaN();
  const double inf = std::numeric_limits<double>::infinity();
  EXPECT_EQ(JsonText({{"std", nan}, {"values", {1.5, nan, -inf, inf}}}),
            R"({"std":null,"values":[1.5,null,null,null]})");
}

TEST(JsonTextTest, IntegerExtremesAreExact) {
  EXPECT_EQ(JsonText({std::numeric_limits<int64_t>::min(),
                      std::numeric_limits<int64_t>::max(),
                      std::numeric_limits<uint64_t>::max()}),
            "[-9223372036854775808,9223372036854775807,"
            "18446744073709551615]");
}

TEST(JsonTextTest, FieldsKeepTheirOrder) {
  EXPECT_EQ(JsonText({{"b", 1}, {"a", {{"z", true}, {"y", nullptr}}}}),
            R"({"b":1,"a":{"z":true,"y":null}})");
}

TEST(JsonTextTest, StringsAreEscapedAndInvalidUtf8IsReplaced) {
  EXPECT_EQ(JsonText("a\"b\\c\n\t"), R"("a\"b\\c\n\t")");
  EXPECT_EQ(JsonText(std::string("nul\0\x01"
                                 "byte",
                                 9)),
            R"("nul\u0000\u0001byte")");
  const std::string utf8 = "h\xC3\xA9llo \xE2\x9C\x93 \xF0\x9D\x84\x9E";
  EXPECT_EQ(JsonText(utf8), "\"" + utf8 + "\"");
  const std::string kReplacement = "\xEF\xBF\xBD";
  EXPECT_EQ(JsonText("a\x80z"), "\"a" + kReplacement + "z\"");
  for (const char* bad :
       {"\xFF", "\xC0\xAF", "\xED\xA0\x80", "x\xE2\x82", "\xF4\x90\x80\x80"}) {
    const std::string text = JsonText({{std::string("key") + bad, bad}});
    EXPECT_NO_THROW(nlohmann::json::parse(text)) << text;
    EXPECT_NE(text.find(kReplacement), std::string::npos) << text;
  }
  // Every ASCII character survives a real parser.
  std::string all;
  for (int c = 0; c < 0x80; ++c) all.push_back(static_cast<char>(c));
  EXPECT_EQ(nlohmann::json::parse(JsonText(all)).get<std::string>(), all);
}

TEST(BnnctlOutputTest, EnumNamesAreLowerCaseWithoutPrefix) {
  EXPECT_EQ(TaskName(v1::TASK_REGRESSION), "regression");
  EXPECT_EQ(TaskName(v1::TASK_CLASSIFICATION), "classification");
  EXPECT_EQ(JobStateName(v1::JOB_STATE_SUCCEEDED), "succeeded");
  EXPECT_EQ(JobStateName(v1::JOB_STATE_UNSPECIFIED), "unspecified");
}

TEST(BnnctlOutputTest, RegressionPredictionsJsonHasStdAndNullForBadValues) {
  v1::PredictResponse response;
  response.set_snapshot_id("s-1");
  response.set_num_samples(16);
  response.set_seed(42);
  v1::RowPrediction* p = response.add_predictions();
  p->set_mean(2.0);
  p->set_variance(9.0);
  p->set_epistemic_variance(5.0);
  p->set_aleatoric_variance(4.0);
  p = response.add_predictions();
  p->set_mean(std::numeric_limits<double>::quiet_NaN());
  p->set_variance(-1.0);

  const std::string json = JsonText(
      PredictionsJson(OneFeature({-6, 0}), v1::PredictRequest(), response));
  const nlohmann::json parsed = nlohmann::json::parse(json);
  EXPECT_EQ(parsed["snapshot_id"], "s-1");
  EXPECT_EQ(parsed["num_samples"], 16);
  EXPECT_EQ(parsed["seed"], 42);
  EXPECT_EQ(parsed["task"], "regression");
  EXPECT_EQ(parsed["linearized"], false);
  EXPECT_EQ(parsed["quantile_levels"], nlohmann::json::array());
  EXPECT_EQ(parsed["feature_names"], nlohmann::json::array({"x"}));
  ASSERT_EQ(parsed["predictions"].size(), 2u);
  const nlohmann::json& first = parsed["predictions"][0];
  EXPECT_EQ(first["x"], nlohmann::json::array({-6.0}));
  EXPECT_EQ(first["mean"], 2.0);
  EXPECT_EQ(first["std"], 3.0);
  EXPECT_EQ(first["epistemic_variance"], 5.0);
  EXPECT_EQ(first["aleatoric_variance"], 4.0);
  // Only requested per-sample outputs are written.
  EXPECT_FALSE(first.contains("sample_outputs"));
  // A NaN mean and a negative variance are not silently made finite.
  EXPECT_TRUE(parsed["predictions"][1]["mean"].is_null());
  EXPECT_TRUE(parsed["predictions"][1]["std"].is_null());
}

TEST(BnnctlOutputTest, ClassificationPredictionsJsonAndTable) {
  v1::PredictResponse response;
  response.add_class_values(-1);
  response.add_class_values(1);
  v1::RowPrediction* p = response.add_predictions();
  p->add_probabilities(0.25);
  p->add_probabilities(0.75);
  p->set_predicted_class(1);
  p->set_entropy(0.56);
  p->set_expected_entropy(0.5);
  p->set_mutual_information(0.06);
  p->set_variation_ratio(0.125);

  const std::string json = JsonText(
      PredictionsJson(OneFeature({3}), v1::PredictRequest(), response));
  const nlohmann::json parsed = nlohmann::json::parse(json);
  EXPECT_EQ(parsed["task"], "classification");
  EXPECT_EQ(parsed["class_values"], nlohmann::json::array({-1.0, 1.0}));
  const nlohmann::json& row = parsed["predictions"][0];
  EXPECT_EQ(row["probabilities"], nlohmann::json::array({0.25, 0.75}));
  EXPECT_EQ(row["predicted_class"], 1.0);
  EXPECT_EQ(row["entropy"], 0.56);
  EXPECT_EQ(row["expected_entropy"], 0.5);
  EXPECT_EQ(row["mutual_information"], 0.06);
  EXPECT_EQ(row["variation_ratio"], 0.125);
  EXPECT_FALSE(row.contains("mean"));
  EXPECT_FALSE(row.contains("quantiles"));

  const std::string table =
      FormatPredictions(OneFeature({3}), v1::PredictRequest(), response);
  EXPECT_EQ(table,
            "x  p(-1)  p(1)  class  entropy  mutual_info\n"
            "3   0.25  0.75      1     0.56         0.06\n");
}

TEST(BnnctlOutputTest, QuantilesAndPerSampleOutputsForRegression) {
  v1::PredictRequest request;
  request.add_quantiles(0.05);
  request.add_quantiles(0.95);
  request.set_per_sample(true);
  request.set_linearized(false);
  v1::PredictResponse response;
  response.set_num_samples(2);
  v1::RowPrediction* p = response.add_predictions();
  p->set_mean(1);
  p->set_variance(4);
  p->add_quantiles(-2.25);
  p->add_quantiles(4.25);
  p->add_sample_outputs(0.5);
  p->add_sample_outputs(1.5);

  const std::string json =
      JsonText(PredictionsJson(OneFeature({7}), request, response));
  const nlohmann::json parsed = nlohmann::json::parse(json);
  EXPECT_EQ(parsed["quantile_levels"], nlohmann::json::array({0.05, 0.95}));
  EXPECT_EQ(parsed["predictions"][0]["quantiles"],
            nlohmann::json::array({-2.25, 4.25}));
  EXPECT_EQ(parsed["predictions"][0]["sample_outputs"],
            nlohmann::json::array({0.5, 1.5}));

  EXPECT_EQ(FormatPredictions(OneFeature({7}), request, response),
            "x  mean  std  q0.05  q0.95\n"
            "7     1    2  -2.25   4.25\n"
            "\n"
            "per-sample outputs (2 samples per row):\n"
            "row  sample  mean\n"
            "  0       0   0.5\n"
            "  0       1   1.5\n");
}

TEST(BnnctlOutputTest, PerSampleClassProbabilitiesAreSampleMajor) {
  v1::PredictRequest request;
  request.set_per_sample(true);
  v1::PredictResponse response;
  response.set_num_samples(2);
  response.add_class_values(0);
  response.add_class_values(1);
  v1::RowPrediction* p = response.add_predictions();
  p->add_probabilities(0.5);
  p->add_probabilities(0.5);
  // Sample 0: (0.9, 0.1); sample 1: (0.1, 0.9).
  for (double value : {0.9, 0.1, 0.1, 0.9}) p->add_sample_outputs(value);
  EXPECT_THAT(FormatPredictions(OneFeature({0}), request, response),
              HasSubstr("row  sample  p(0)  p(1)\n"
                        "  0       0   0.9   0.1\n"
                        "  0       1   0.1   0.9\n"));
}

TEST(BnnctlOutputTest, RegressionTableHasFeatureMeanAndStdColumns) {
  v1::PredictResponse response;
  v1::RowPrediction* p = response.add_predictions();
  p->set_mean(1.5);
  p->set_variance(0.25);
  p = response.add_predictions();
  p->set_mean(-10);
  p->set_variance(100);
  EXPECT_EQ(
      FormatPredictions(OneFeature({-8, 0.5}), v1::PredictRequest(), response),
      "  x  mean  std\n"
      " -8   1.5  0.5\n"
      "0.5   -10   10\n");
}

TEST(BnnctlOutputTest, UnnamedFeaturesGetPositionalNames) {
  FeatureTable inputs;
  inputs.num_features = 2;
  inputs.features = {1, 2};
  v1::PredictResponse response;
  response.add_predictions()->set_variance(1);
  EXPECT_THAT(FormatPredictions(inputs, v1::PredictRequest(), response),
              HasSubstr("x0  x1"));
}

TEST(BnnctlOutputTest, JobJsonHasSortedParamsAndState) {
  v1::Job job;
  job.set_job_id("j-1");
  job.set_state(v1::JOB_STATE_FAILED);
  job.set_error("diverged: \"loss\" is NaN");
  (*job.mutable_params())["rank"] = "1";
  (*job.mutable_params())["beta"] = "0.1";
  job.set_last_loss(std::numeric_limits<double>::infinity());
  const std::string json = JsonText(JobJson(job));
  EXPECT_THAT(json, HasSubstr(R"("params":{"beta":"0.1","rank":"1"})"));
  const nlohmann::json parsed = nlohmann::json::parse(json);
  EXPECT_EQ(parsed["state"], "failed");
  EXPECT_EQ(parsed["error"], "diverged: \"loss\" is NaN");
  EXPECT_TRUE(parsed["last_loss"].is_null());

  const std::string text = FormatJob(job);
  EXPECT_THAT(text, HasSubstr("state      failed"));
  EXPECT_THAT(text, HasSubstr("params     beta=0.1 rank=1"));
  EXPECT_THAT(text, HasSubstr("error      diverged"));
}

TEST(BnnctlOutputTest, JobJsonHasTheModelAndTheLossCurve) {
  v1::Job job;
  job.set_job_id("j-2");
  job.set_state(v1::JOB_STATE_INTERRUPTED);
  job.set_model_name("cubic");
  job.set_publish(true);
  for (int step : {2, 4}) {
    v1::LossPoint* point = job.add_loss_curve();
    point->set_step(step);
    point->set_loss(1.0 / step);
  }
  const nlohmann::json parsed = nlohmann::json::parse(JsonText(JobJson(job)));
  EXPECT_EQ(parsed["state"], "interrupted");
  EXPECT_EQ(parsed["model_name"], "cubic");
  EXPECT_EQ(parsed["publish"], true);
  EXPECT_EQ(parsed["loss_curve"],
            nlohmann::json::parse(
                R"([{"step": 2, "loss": 0.5}, {"step": 4, "loss": 0.25}])"));
  const std::string text = FormatJob(job);
  EXPECT_THAT(text, HasSubstr("model       cubic (publish)"));
  EXPECT_THAT(text, HasSubstr("loss curve  2 points"));
}

TEST(BnnctlOutputTest, JobListIsATableNewestFirst) {
  EXPECT_EQ(FormatJobList({}), "no jobs\n");
  v1::Job running;
  running.set_job_id("job-2");
  running.set_state(v1::JOB_STATE_RUNNING);
  running.set_method("slang");
  running.set_dataset_id("ds-1");
  running.set_progress(0.25);
  running.set_step(3);
  running.set_last_loss(0.5);
  v1::Job queued;
  queued.set_job_id("job-1");
  queued.set_state(v1::JOB_STATE_QUEUED);
  queued.set_method("bali");
  queued.set_dataset_id("ds-1");
  queued.set_model_name("m");
  const std::string table = FormatJobList({running, queued});
  EXPECT_THAT(table, ::testing::ContainsRegex(
                         "^ID +STATE +METHOD +DATASET +MODEL +PROGRESS +LOSS "
                         "+CREATED\n"));
  EXPECT_THAT(table, ::testing::ContainsRegex(
                         "\njob-2 +running +slang +ds-1 +- +25.0% +0.5 "));
  EXPECT_THAT(table, ::testing::ContainsRegex(
                         "\njob-1 +queued +bali +ds-1 +m +0.0% +- "));
}

TEST(BnnctlOutputTest, WatchEventsAsLinesAndAsAProgressBar) {
  v1::JobEvent event;
  event.set_kind(v1::JobEvent::KIND_PROGRESS);
  event.set_state(v1::JOB_STATE_RUNNING);
  event.set_step(1200);
  event.set_total_steps(12000);
  event.set_epoch(400);
  event.set_loss(0.125);
  event.set_steps_per_second(450);
  event.set_eta_seconds(24);
  EXPECT_EQ(FormatJobEventLine(event),
            "running step 1200/12000 (10.0%) epoch 400 loss 0.125 450.0 "
            "steps/s eta 0:24");
  EXPECT_EQ(FormatProgressBar(event, 10),
            "[#.........]  10.0%  step 1200/12000  loss 0.125  450.0 steps/s  "
            "ETA 0:24  running");
  v1::JobEvent done;
  done.set_kind(v1::JobEvent::KIND_STATE);
  done.set_state(v1::JOB_STATE_SUCCEEDED);
  done.set_step(12000);
  done.set_total_steps(12000);
  done.set_loss(0.1);
  done.set_snapshot_id("snap-1");
  EXPECT_EQ(FormatJobEventLine(done),
            "succeeded step 12000/12000 (100.0%) epoch 0 loss 0.1 snapshot "
            "snap-1");
  EXPECT_EQ(FormatProgressBar(done, 4),
            "[####] 100.0%  step 12000/12000  loss 0.1  succeeded");
  const nlohmann::json parsed =
      nlohmann::json::parse(JsonText(JobEventJson(done)));
  EXPECT_EQ(parsed["kind"], "state");
  EXPECT_EQ(parsed["state"], "succeeded");
  EXPECT_EQ(parsed["snapshot_id"], "snap-1");
  EXPECT_EQ(FormatDuration(3725), "1:02:05");
  EXPECT_EQ(FormatDuration(-1), "?");
  EXPECT_EQ(FormatDuration(std::nan("")), "?");
}

TEST(BnnctlOutputTest, DatasetJsonAndText) {
  v1::DatasetInfo info;
  info.set_dataset_id("d-1");
  info.set_name("iris");
  info.set_task(v1::TASK_CLASSIFICATION);
  info.set_num_rows(150);
  info.set_num_features(4);
  info.set_num_classes(3);
  for (double v : {0, 1, 2}) info.add_class_values(v);
  const std::string json = JsonText(DatasetJson(info));
  const nlohmann::json parsed = nlohmann::json::parse(json);
  EXPECT_EQ(parsed["dataset_id"], "d-1");
  EXPECT_EQ(parsed["task"], "classification");
  EXPECT_EQ(parsed["num_rows"], 150);
  EXPECT_EQ(parsed["class_values"].size(), 3u);
  EXPECT_THAT(FormatDataset(info), HasSubstr("classes   3 (labels 0, 1, 2)"));
  EXPECT_THAT(FormatDatasetList({info}), HasSubstr("d-1  iris"));
  EXPECT_EQ(FormatDatasetList({}), "no datasets\n");
}

TEST(BnnctlOutputTest, AcquisitionFromADatasetPool) {
  v1::AcquireRequest request;
  request.set_snapshot_id("snap-1");
  request.set_dataset_id("ds-1");
  request.set_heuristic("max_variance");
  v1::AcquireResponse response;
  response.add_indices(42);
  response.add_scores(2.5);
  response.add_indices(7);
  response.add_scores(0.125);
  response.set_pool_rows(500);
  response.set_seed(9);

  const std::string json =
      JsonText(AcquisitionJson(request, response, /*pool=*/nullptr));
  const nlohmann::json parsed = nlohmann::json::parse(json);
  EXPECT_EQ(parsed["snapshot_id"], "snap-1");
  EXPECT_EQ(parsed["heuristic"], "max_variance");
  EXPECT_EQ(parsed["pool_rows"], 500);
  EXPECT_EQ(parsed["seed"], 9);
  EXPECT_EQ(
      parsed["acquired"],
      nlohmann::json::parse(
          R"([{"index": 42, "score": 2.5}, {"index": 7, "score": 0.125}])"));

  EXPECT_EQ(FormatAcquisition(response, nullptr),
            "rank  index  score\n"
            "   1     42    2.5\n"
            "   2      7  0.125\n"
            "pool rows 500, seed 9\n");
}

TEST(BnnctlOutputTest, AcquisitionFromACsvPoolShowsTheChosenRows) {
  v1::AcquireResponse response;
  response.add_indices(2);
  response.add_scores(1);
  // An index the pool does not have is shown without features, not read
  // out of bounds.
  response.add_indices(5);
  response.add_scores(0.5);
  response.set_pool_rows(3);
  const FeatureTable pool = OneFeature({-1, 0, 1});

  const std::string json =
      JsonText(AcquisitionJson(v1::AcquireRequest(), response, &pool));
  const nlohmann::json parsed = nlohmann::json::parse(json);
  EXPECT_EQ(parsed["acquired"][0]["x"], nlohmann::json::array({1.0}));
  EXPECT_EQ(parsed["acquired"][1]["x"], nlohmann::json::array());

  EXPECT_EQ(FormatAcquisition(response, &pool),
            "rank  index  score  x\n"
            "   1      2      1  1\n"
            "   2      5    0.5\n"
            "pool rows 3, seed 0\n");
}

v1::SnapshotInfo ChildSnapshot() {
  v1::SnapshotInfo info;
  info.set_snapshot_id("snap-2");
  info.set_method("slang");
  (*info.mutable_params())["rank"] = "1";
  (*info.mutable_params())["epochs"] = "50";
  info.set_dataset_id("ds-1");
  info.set_dataset_version(2);
  info.set_task(v1::TASK_REGRESSION);
  info.mutable_model()->add_hidden_sizes(20);
  info.mutable_model()->add_activations("tanh");
  info.set_num_features(1);
  info.set_num_parameters(61);
  info.set_posterior_family("low_rank");
  info.set_steps(100);
  info.set_epochs(50);
  info.set_final_loss(0.25);
  info.set_seed(18446744073709551615u);
  info.set_format_version(1);
  info.set_size_bytes(2048);
  info.set_parent_snapshot_id("snap-1");
  info.set_prior_from_parent(true);
  return info;
}

TEST(BnnctlOutputTest, SnapshotJsonHasEveryField) {
  const std::string json = JsonText(SnapshotJson(ChildSnapshot()));
  EXPECT_THAT(json, HasSubstr(R"("params":{"epochs":"50","rank":"1"})"));
  // 64-bit seeds are written in full, not rounded through a double.
  EXPECT_THAT(json, HasSubstr(R"("seed":18446744073709551615)"));
  const nlohmann::json parsed = nlohmann::json::parse(json);
  EXPECT_EQ(parsed["snapshot_id"], "snap-2");
  EXPECT_EQ(parsed["dataset_version"], 2);
  EXPECT_EQ(parsed["task"], "regression");
  EXPECT_EQ(parsed["model"], nlohmann::json::parse(
                                 R"({"hidden_sizes": [20],
                                     "activations": ["tanh"]})"));
  EXPECT_EQ(parsed["posterior_family"], "low_rank");
  EXPECT_EQ(parsed["format_version"], 1);
  EXPECT_EQ(parsed["parent_snapshot_id"], "snap-1");
  EXPECT_EQ(parsed["prior_from_parent"], true);
  EXPECT_EQ(parsed["class_values"], nlohmann::json::array());
}

TEST(BnnctlOutputTest, SnapshotTextAndList) {
  const std::string text = FormatSnapshot(ChildSnapshot());
  EXPECT_THAT(text, HasSubstr("snapshot    snap-2\n"));
  EXPECT_THAT(text, HasSubstr("params      epochs=50 rank=1\n"));
  EXPECT_THAT(text, HasSubstr("dataset     ds-1 version 2\n"));
  EXPECT_THAT(text, HasSubstr("model       20 tanh\n"));
  EXPECT_THAT(text,
              HasSubstr("parent      snap-1 (its posterior is the prior)\n"));

  v1::SnapshotInfo root = ChildSnapshot();
  root.set_snapshot_id("snap-1");
  root.clear_parent_snapshot_id();
  root.set_dataset_version(1);
  const std::string list = FormatSnapshotList({root, ChildSnapshot()});
  EXPECT_THAT(list, HasSubstr("ID      METHOD  DATASET  VERSION  FAMILY    "
                              "PARENT  CREATED\n"));
  EXPECT_THAT(list, HasSubstr("snap-1  slang   ds-1     1        low_rank  -"));
  EXPECT_THAT(list, HasSubstr("snap-2  slang   ds-1     2        low_rank  "
                              "snap-1"));
  EXPECT_EQ(FormatSnapshotList({}), "no snapshots\n");
}

TEST(BnnctlOutputTest, ModelJsonAndText) {
  v1::ModelInfo model;
  model.set_name("fraud");
  model.set_num_versions(2);
  model.set_latest_version(2);
  (*model.mutable_aliases())["stable"] = 1;
  (*model.mutable_aliases())["latest"] = 2;
  for (int64_t v : {1, 2}) {
    v1::ModelVersion* version = model.add_versions();
    version->set_model_name("fraud");
    version->set_version(v);
    version->set_snapshot_id(absl::StrCat("snap-", v));
    version->add_aliases(v == 1 ? "stable" : "latest");
  }
  EXPECT_EQ(JsonText(ModelJson(model)),
            "{\"name\":\"fraud\",\"num_versions\":2,\"latest_version\":2,"
            "\"aliases\":{\"latest\":2,\"stable\":1},\"created_unix_ms\":0,"
            "\"updated_unix_ms\":0,\"versions\":[{\"model_name\":\"fraud\","
            "\"version\":1,\"snapshot_id\":\"snap-1\",\"created_unix_ms\":0,"
            "\"aliases\":[\"stable\"]},{\"model_name\":\"fraud\",\"version\":2,"
            "\"snapshot_id\":\"snap-2\",\"created_unix_ms\":0,\"aliases\":["
            "\"latest\"]}]}");
  const std::string text = FormatModel(model);
  EXPECT_THAT(text, HasSubstr("aliases   latest=2, stable=1"));
  EXPECT_THAT(text, HasSubstr("1        snap-1    stable"));
  EXPECT_THAT(FormatModelList({model}),
              HasSubstr("fraud  2         latest=2, stable=1"));
  EXPECT_EQ(FormatModelList({}), "no models\n");
  EXPECT_EQ(FormatModelVersion(model.versions(1)),
            "published snapshot snap-2 as model fraud version 2 (aliases "
            "latest)\n");
}

TEST(BnnctlOutputTest, ModelReferenceAnswersNameTheModel) {
  v1::PredictRequest request;
  request.set_model("fraud@stable");
  v1::PredictResponse response;
  response.set_snapshot_id("snap-1");
  response.set_model_name("fraud");
  response.set_model_version(1);
  response.add_predictions()->set_mean(1.5);
  FeatureTable inputs;
  inputs.num_features = 1;
  inputs.features = {0.5};
  const nlohmann::json parsed = nlohmann::json::parse(
      JsonText(PredictionsJson(inputs, request, response)));
  EXPECT_EQ(parsed["snapshot_id"], "snap-1");
  EXPECT_EQ(parsed["model_name"], "fraud");
  EXPECT_EQ(parsed["model_version"], 1);
  EXPECT_THAT(FormatPredictions(inputs, request, response),
              HasSubstr("answered by snapshot snap-1 (model fraud version 1)"));
  // By snapshot id: no model fields at all.
  response.clear_model_name();
  response.clear_model_version();
  EXPECT_FALSE(nlohmann::json::parse(
                   JsonText(PredictionsJson(inputs, request, response)))
                   .contains("model_name"));
}

TEST(BnnctlOutputTest, RegressionEvaluation) {
  v1::EvaluateResponse response;
  response.set_snapshot_id("snap-1");
  response.set_task(v1::TASK_REGRESSION);
  response.set_num_rows(10);
  response.set_num_samples(100);
  response.set_seed(7);
  response.set_rmse(1.5);
  response.set_log_likelihood(-2.25);
  response.set_nll(2.25);
  EXPECT_EQ(FormatEvaluation(response),
            "metric          value\n"
            "rmse              1.5\n"
            "log_likelihood  -2.25\n"
            "nll              2.25\n"
            "10 rows, 100 samples, seed 7\n");
  const nlohmann::json parsed =
      nlohmann::json::parse(JsonText(EvaluationJson(response)));
  EXPECT_EQ(parsed["task"], "regression");
  EXPECT_EQ(parsed["rmse"], 1.5);
  EXPECT_EQ(parsed["nll"], 2.25);
  EXPECT_FALSE(parsed.contains("accuracy"));
  EXPECT_FALSE(parsed.contains("reliability"));
}

TEST(BnnctlOutputTest, ClassificationEvaluationWithBinsAndOod) {
  v1::EvaluateResponse response;
  response.set_snapshot_id("snap-2");
  response.set_model_name("m");
  response.set_model_version(3);
  response.set_task(v1::TASK_CLASSIFICATION);
  response.set_num_rows(4);
  response.set_num_samples(8);
  response.set_seed(1);
  response.set_nll(0.5);
  response.set_accuracy(0.75);
  response.set_brier(0.25);
  response.set_ece(0.125);
  for (int b = 0; b < 2; ++b) {
    v1::ReliabilityBin* bin = response.add_reliability();
    bin->set_lower(0.5 * b);
    bin->set_upper(0.5 * (b + 1));
    bin->set_count(2 * b);
    bin->set_mean_confidence(b == 0 ? 0 : 0.875);
    bin->set_accuracy(b == 0 ? 0 : 0.75);
  }
  response.set_auroc_entropy(0.25);
  response.set_auroc_mutual_information(1);
  response.set_ood_rows(6);
  const std::string text = FormatEvaluation(response);
  EXPECT_THAT(text, HasSubstr("accuracy                   0.75\n"));
  EXPECT_THAT(text, HasSubstr("auroc_mutual_information      1\n"));
  EXPECT_THAT(text, HasSubstr("4 rows, 6 OOD rows, 8 samples, seed 1\n"));
  EXPECT_THAT(text, HasSubstr("(0.5, 1]      2       0.875      0.75\n"));
  const nlohmann::json parsed =
      nlohmann::json::parse(JsonText(EvaluationJson(response)));
  EXPECT_EQ(parsed["model_name"], "m");
  EXPECT_EQ(parsed["model_version"], 3);
  EXPECT_EQ(parsed["task"], "classification");
  ASSERT_EQ(parsed["reliability"].size(), 2u);
  EXPECT_EQ(parsed["reliability"][1]["count"], 2);
  EXPECT_EQ(parsed["reliability"][1]["mean_confidence"], 0.875);
  EXPECT_EQ(parsed["auroc_entropy"], 0.25);
  EXPECT_EQ(parsed["ood_rows"], 6);
  EXPECT_FALSE(parsed.contains("rmse"));
}

// train --parent keeps the parent's parameters unless --param overrides
// them, and says which it changed.
TEST(InheritParentParamsTest, KeepsTheParentsParametersUnlessOverridden) {
  v1::SnapshotInfo parent;
  parent.set_snapshot_id("snap-00000000000000aa");
  parent.set_method("slang");
  (*parent.mutable_params())["rank"] = "2";
  (*parent.mutable_params())["learning_rate"] = "0.05";
  (*parent.mutable_params())["beta"] = "0.05";
  const InheritedParams inherited = InheritParentParams(
      parent, "slang",
      {{"learning_rate", "0.1"}, {"beta", "0.05"}, {"decay", "0.9"}});
  EXPECT_TRUE(inherited.same_method);
  EXPECT_EQ(inherited.params,
            (std::map<std::string, std::string>{{"rank", "2"},
                                                {"learning_rate", "0.1"},
                                                {"beta", "0.05"},
                                                {"decay", "0.9"}}));
  EXPECT_EQ(inherited.kept, std::vector<std::string>{"rank=2"});
  EXPECT_EQ(inherited.changed,
            (std::vector<std::string>{"learning_rate 0.05 -> 0.1",
                                      "decay 0.9 (new)"}));
  EXPECT_EQ(FormatInheritedParams(parent, "slang", inherited),
            "parameters from parent snap-00000000000000aa: kept rank=2; "
            "changed learning_rate 0.05 -> 0.1, decay 0.9 (new)");

  const InheritedParams nothing_given =
      InheritParentParams(parent, "slang", {});
  EXPECT_EQ(nothing_given.params.size(), 3u);
  EXPECT_THAT(FormatInheritedParams(parent, "slang", nothing_given),
              HasSubstr("kept beta=0.05, learning_rate=0.05, rank=2; changed "
                        "none"));

  // Another method's parameters are not carried over.
  const InheritedParams other =
      InheritParentParams(parent, "bbb", {{"learning_rate", "0.1"}});
  EXPECT_FALSE(other.same_method);
  EXPECT_EQ(other.params,
            (std::map<std::string, std::string>{{"learning_rate", "0.1"}}));
  EXPECT_THAT(FormatInheritedParams(parent, "bbb", other),
              HasSubstr("was trained with slang, not bbb: its parameters are "
                        "not carried over"));
}

}  // namespace
}  // namespace bnn::client
