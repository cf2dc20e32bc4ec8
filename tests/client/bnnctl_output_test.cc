#include "client/bnnctl_output.h"

#include <cmath>
#include <limits>
#include <nlohmann/json.hpp>
#include <string>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

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

  JsonWriter json;
  WritePredictionsJson(OneFeature({-6, 0}), response, &json);
  ASSERT_TRUE(json.complete());
  const nlohmann::json parsed = nlohmann::json::parse(json.str());
  EXPECT_EQ(parsed["snapshot_id"], "s-1");
  EXPECT_EQ(parsed["num_samples"], 16);
  EXPECT_EQ(parsed["seed"], 42);
  EXPECT_EQ(parsed["task"], "regression");
  EXPECT_EQ(parsed["feature_names"], nlohmann::json::array({"x"}));
  ASSERT_EQ(parsed["predictions"].size(), 2u);
  const nlohmann::json& first = parsed["predictions"][0];
  EXPECT_EQ(first["x"], nlohmann::json::array({-6.0}));
  EXPECT_EQ(first["mean"], 2.0);
  EXPECT_EQ(first["std"], 3.0);
  EXPECT_EQ(first["epistemic_variance"], 5.0);
  EXPECT_EQ(first["aleatoric_variance"], 4.0);
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

  JsonWriter json;
  WritePredictionsJson(OneFeature({3}), response, &json);
  const nlohmann::json parsed = nlohmann::json::parse(json.str());
  EXPECT_EQ(parsed["task"], "classification");
  EXPECT_EQ(parsed["class_values"], nlohmann::json::array({-1.0, 1.0}));
  EXPECT_EQ(parsed["predictions"][0]["probabilities"],
            nlohmann::json::array({0.25, 0.75}));
  EXPECT_EQ(parsed["predictions"][0]["predicted_class"], 1.0);
  EXPECT_FALSE(parsed["predictions"][0].contains("mean"));

  const std::string table = FormatPredictions(OneFeature({3}), response);
  EXPECT_EQ(table,
            "x  p(-1)  p(1)  class\n"
            "3   0.25  0.75      1\n");
}

TEST(BnnctlOutputTest, RegressionTableHasFeatureMeanAndStdColumns) {
  v1::PredictResponse response;
  v1::RowPrediction* p = response.add_predictions();
  p->set_mean(1.5);
  p->set_variance(0.25);
  p = response.add_predictions();
  p->set_mean(-10);
  p->set_variance(100);
  EXPECT_EQ(FormatPredictions(OneFeature({-8, 0.5}), response),
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
  EXPECT_THAT(FormatPredictions(inputs, response), HasSubstr("x0  x1"));
}

TEST(BnnctlOutputTest, JobJsonHasSortedParamsAndState) {
  v1::Job job;
  job.set_job_id("j-1");
  job.set_state(v1::JOB_STATE_FAILED);
  job.set_error("diverged: \"loss\" is NaN");
  (*job.mutable_params())["rank"] = "1";
  (*job.mutable_params())["beta"] = "0.1";
  job.set_last_loss(std::numeric_limits<double>::infinity());
  JsonWriter json;
  WriteJobJson(job, &json);
  EXPECT_THAT(json.str(), HasSubstr(R"("params":{"beta":"0.1","rank":"1"})"));
  const nlohmann::json parsed = nlohmann::json::parse(json.str());
  EXPECT_EQ(parsed["state"], "failed");
  EXPECT_EQ(parsed["error"], "diverged: \"loss\" is NaN");
  EXPECT_TRUE(parsed["last_loss"].is_null());

  const std::string text = FormatJob(job);
  EXPECT_THAT(text, HasSubstr("state      failed"));
  EXPECT_THAT(text, HasSubstr("params     beta=0.1 rank=1"));
  EXPECT_THAT(text, HasSubstr("error      diverged"));
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
  JsonWriter json;
  WriteDatasetJson(info, &json);
  const nlohmann::json parsed = nlohmann::json::parse(json.str());
  EXPECT_EQ(parsed["dataset_id"], "d-1");
  EXPECT_EQ(parsed["task"], "classification");
  EXPECT_EQ(parsed["num_rows"], 150);
  EXPECT_EQ(parsed["class_values"].size(), 3u);
  EXPECT_THAT(FormatDataset(info), HasSubstr("classes   3 (labels 0, 1, 2)"));
  EXPECT_THAT(FormatDatasetList({info}), HasSubstr("d-1  iris"));
  EXPECT_EQ(FormatDatasetList({}), "no datasets\n");
}

}  // namespace
}  // namespace bnn::client
