#include "server/api/bnn_v1/training_request.h"

#include <absl/strings/str_cat.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "bnn/methods/registry.h"
#include "bnn/train/trainer.h"

#include "tests/server/server_test_util.h"

namespace bnn::server {
namespace {

using ::bnn::server::testutil::StatusIs;
using ::testing::Contains;
using ::testing::ElementsAre;
using ::testing::Pair;
using ::testing::UnorderedElementsAre;

store::DatasetMeta RegressionDataset() {
  store::DatasetMeta meta;
  meta.set_dataset_id("ds-0123456789abcdef");
  meta.set_version(1);
  meta.set_task("regression");
  meta.set_num_rows(30);
  meta.set_num_features(3);
  return meta;
}

v1::StartTrainingRequest SlangRequest() {
  v1::StartTrainingRequest request;
  request.set_dataset_id("ds-0123456789abcdef");
  request.set_method("slang");
  request.mutable_model()->add_hidden_sizes(50);
  return request;
}

// The job record of a request (BuildTrainingJob's plan, as stored).
absl::StatusOr<store::JobRecord> RecordOf(absl::StatusOr<TrainingJob> job) {
  if (!job.ok()) return job.status();
  return job->record;
}

absl::StatusOr<store::JobRecord> Build(const v1::StartTrainingRequest& r) {
  return RecordOf(
      BuildTrainingJob(r, RegressionDataset(), MethodRegistry::Builtin()));
}

TEST(TypedOptionsToParamsTest, SetFieldsOnlyPrintedExactly) {
  v1::SlangOptions options;
  EXPECT_TRUE(TypedOptionsToParams(options)->empty());
  options.set_rank(5);
  options.set_learning_rate(0.1);
  options.set_prior_precision(1e-5);
  options.set_noise_precision(100.0);
  options.set_precision("float32");
  const absl::StatusOr<ParamMap> params = TypedOptionsToParams(options);
  ASSERT_TRUE(params.ok()) << params.status();
  EXPECT_THAT(*params, UnorderedElementsAre(Pair("rank", "5"),
                                            Pair("learning_rate", "0.1"),
                                            Pair("prior_precision", "1e-05"),
                                            Pair("noise_precision", "100"),
                                            Pair("precision", "float32")));
}

TEST(TypedOptionsToParamsTest, ExplicitZeroIsSet) {
  v1::SlangOptions options;
  options.set_momentum(0.0);  // proto3 optional: presence, not value
  EXPECT_THAT(*TypedOptionsToParams(options),
              ElementsAre(Pair("momentum", "0")));
}

TEST(TypedOptionsToParamsTest, RejectsFieldsWithoutParameterForm) {
  // Any message works; ModelSpec has repeated fields.
  v1::ModelSpec model;
  model.add_hidden_sizes(3);
  EXPECT_THAT(TypedOptionsToParams(model).status(),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       "ModelSpec.hidden_sizes has no parameter form"));
}

TEST(BuildTrainingJobTest, MergesTypedOptionsOverridesEpochsAndSeed) {
  v1::StartTrainingRequest request = SlangRequest();
  request.mutable_slang()->set_rank(3);
  request.mutable_slang()->set_mc_samples(8);
  (*request.mutable_params())["mc_samples"] = "2";  // overrides the typed 8
  request.set_epochs(7);
  request.set_seed(42);
  request.mutable_model()->add_activations("tanh");
  const absl::StatusOr<store::JobRecord> job = Build(request);
  ASSERT_TRUE(job.ok()) << job.status();
  EXPECT_EQ(job->dataset_id(), "ds-0123456789abcdef");
  EXPECT_EQ(job->dataset_version(), 1);
  EXPECT_EQ(job->method(), "slang");
  EXPECT_EQ(job->epochs(), 7);
  EXPECT_EQ(job->seed(), 42u);
  // Epochs and seed are stored once, in their own fields.
  EXPECT_THAT(job->params(),
              UnorderedElementsAre(Pair("rank", "3"), Pair("mc_samples", "2")));
  EXPECT_THAT(job->hidden_sizes(), ElementsAre(50));
  EXPECT_THAT(job->activations(), ElementsAre("tanh"));
}

TEST(BuildTrainingJobTest, ParamsOverrideTypedEpochsAndSeed) {
  v1::StartTrainingRequest request = SlangRequest();
  request.set_epochs(7);
  (*request.mutable_params())["epochs"] = "9";
  (*request.mutable_params())["seed"] = "5";
  const absl::StatusOr<store::JobRecord> job = Build(request);
  ASSERT_TRUE(job.ok()) << job.status();
  EXPECT_EQ(job->epochs(), 9);
  EXPECT_EQ(job->seed(), 5u);
  EXPECT_TRUE(job->params().empty());
}

TEST(BuildTrainingJobTest, DefaultsAreRecorded) {
  const absl::StatusOr<store::JobRecord> job = Build(SlangRequest());
  ASSERT_TRUE(job.ok()) << job.status();
  EXPECT_EQ(job->epochs(), TrainOptions().epochs);
  EXPECT_THAT(job->activations(), ElementsAre("relu"));
  EXPECT_TRUE(job->standardize());
  EXPECT_EQ(job->steps(), 0);
  // 100 passes over 30 rows in SLANG's default batches of 32.
  EXPECT_EQ(job->total_steps(), 100);
  // A random seed, recorded so that the job can be repeated.
  EXPECT_NE(job->seed(), Build(SlangRequest())->seed());
}

TEST(BuildTrainingJobTest, UnknownMethodListsKnownOnes) {
  v1::StartTrainingRequest request = SlangRequest();
  request.set_method("mcmc");
  EXPECT_THAT(Build(request).status(),
              StatusIs(absl::StatusCode::kInvalidArgument, "slang"));
  request.set_method("");
  EXPECT_THAT(
      Build(request).status(),
      StatusIs(absl::StatusCode::kInvalidArgument, "method is required"));
}

TEST(BuildTrainingJobTest, TypedOptionsMustMatchTheMethod) {
  MethodRegistry registry;
  MethodRegistry::Entry other =
      *MethodRegistry::Builtin().Find("slang").value();
  other.name = "other";
  ASSERT_TRUE(registry.Register(other).ok());
  v1::StartTrainingRequest request = SlangRequest();
  request.set_method("other");
  request.mutable_slang()->set_rank(2);
  EXPECT_THAT(BuildTrainingJob(request, RegressionDataset(), registry).status(),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       "options.slang is set but method is 'other'"));
}

TEST(BuildTrainingJobTest, RejectsUnknownAndInvalidParameters) {
  v1::StartTrainingRequest request = SlangRequest();
  (*request.mutable_params())["rnak"] = "3";
  EXPECT_THAT(
      Build(request).status(),
      StatusIs(absl::StatusCode::kInvalidArgument, "unknown parameter 'rnak'"));
  request = SlangRequest();
  request.mutable_slang()->set_rank(0);
  EXPECT_THAT(Build(request).status(),
              StatusIs(absl::StatusCode::kInvalidArgument, "rank"));
  request = SlangRequest();
  (*request.mutable_params())["learning_rate"] = "fast";
  EXPECT_THAT(Build(request).status(),
              StatusIs(absl::StatusCode::kInvalidArgument, "learning_rate"));
}

TEST(BuildTrainingJobTest, RejectsBadEpochs) {
  v1::StartTrainingRequest request = SlangRequest();
  request.set_epochs(0);
  EXPECT_THAT(Build(request).status(),
              StatusIs(absl::StatusCode::kInvalidArgument, "epochs"));
  request = SlangRequest();
  (*request.mutable_params())["epochs"] = "many";
  EXPECT_THAT(Build(request).status(),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       "parameter 'epochs': 'many' is not a valid int"));
  request = SlangRequest();
  (*request.mutable_params())["seed"] = "-1";
  EXPECT_THAT(
      Build(request).status(),
      StatusIs(absl::StatusCode::kInvalidArgument, "parameter 'seed': '-1'"));
}

TEST(BuildTrainingJobTest, RejectsBadModels) {
  v1::StartTrainingRequest request = SlangRequest();
  request.mutable_model()->add_hidden_sizes(0);
  EXPECT_THAT(Build(request).status(),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       "model.hidden_sizes[1] = 0"));
  // Every width is allowed alone, but the network is too big.
  request = SlangRequest();
  for (int i = 0; i < 3; ++i) request.mutable_model()->add_hidden_sizes(65536);
  EXPECT_EQ(Build(request).status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(BuildTrainingJobTest, RecordsTheDatasetVersion) {
  store::DatasetMeta dataset = RegressionDataset();
  dataset.set_version(3);
  const absl::StatusOr<store::JobRecord> job = RecordOf(
      BuildTrainingJob(SlangRequest(), dataset, MethodRegistry::Builtin()));
  ASSERT_TRUE(job.ok()) << job.status();
  EXPECT_EQ(job->dataset_version(), 3);
}

// A stored regression snapshot of the RegressionDataset schema, 8-8 tanh.
store::SnapshotMeta Parent() {
  store::SnapshotMeta parent;
  parent.set_snapshot_id("snap-00000000000000aa");
  parent.set_task("regression");
  parent.set_num_features(3);
  parent.add_hidden_sizes(8);
  parent.add_hidden_sizes(8);
  parent.add_activations("tanh");
  parent.add_activations("tanh");
  return parent;
}

absl::StatusOr<store::JobRecord> BuildWarm(
    const v1::StartTrainingRequest& request,
    const store::SnapshotMeta& parent = Parent(),
    const store::DatasetMeta& dataset = RegressionDataset()) {
  return RecordOf(
      BuildTrainingJob(request, dataset, MethodRegistry::Builtin(), &parent));
}

TEST(BuildTrainingJobTest, WarmStartKeepsTheParentsArchitecture) {
  v1::StartTrainingRequest request = SlangRequest();
  request.mutable_model()->Clear();
  request.set_parent_snapshot_id("snap-00000000000000aa");
  request.set_prior_from_parent(true);
  const absl::StatusOr<store::JobRecord> job = BuildWarm(request);
  ASSERT_TRUE(job.ok()) << job.status();
  EXPECT_EQ(job->parent_snapshot_id(), "snap-00000000000000aa");
  EXPECT_TRUE(job->prior_from_parent());
  EXPECT_THAT(job->hidden_sizes(), ElementsAre(8, 8));
  EXPECT_THAT(job->activations(), ElementsAre("tanh", "tanh"));
  // The parent's model, spelled out, is accepted too.
  request.mutable_model()->add_hidden_sizes(8);
  request.mutable_model()->add_hidden_sizes(8);
  request.mutable_model()->add_activations("tanh");
  EXPECT_TRUE(BuildWarm(request).ok());
}

TEST(BuildTrainingJobTest, WarmStartRejectsAnotherModel) {
  v1::StartTrainingRequest request = SlangRequest();  // hidden_sizes [50]
  EXPECT_THAT(BuildWarm(request).status(),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       "hidden_sizes [50] differ from the parent "
                       "snapshot's [8, 8]; leave it empty to keep the "
                       "parent's architecture"));
  request.mutable_model()->Clear();
  request.mutable_model()->add_activations("relu");
  EXPECT_THAT(BuildWarm(request).status(),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       "activations [relu, relu] differ from the parent "
                       "snapshot's [tanh, tanh]"));
}

TEST(BuildTrainingJobTest, WarmStartNeedsTheParentsInputsAndOutputs) {
  v1::StartTrainingRequest request = SlangRequest();
  request.mutable_model()->Clear();
  store::SnapshotMeta wide = Parent();
  wide.set_num_features(4);
  EXPECT_THAT(BuildWarm(request, wide).status(),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       "parent_snapshot_id 'snap-00000000000000aa' takes 4 "
                       "features; dataset_id 'ds-0123456789abcdef' has 3"));
  store::SnapshotMeta classifier = Parent();
  classifier.set_task("binary");
  classifier.add_class_values(2);
  classifier.add_class_values(4);
  EXPECT_THAT(BuildWarm(request, classifier).status(),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       "parent_snapshot_id 'snap-00000000000000aa' is a "
                       "binary model with classes 2, 4; dataset_id "
                       "'ds-0123456789abcdef' is regression"));
  store::DatasetMeta other_classes = RegressionDataset();
  other_classes.set_task("binary");
  other_classes.set_num_classes(2);
  other_classes.add_class_values(0);
  other_classes.add_class_values(1);
  EXPECT_THAT(BuildWarm(request, classifier, other_classes).status(),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       "is binary with classes 0, 1"));
}

TEST(BuildTrainingJobTest, PriorFromParentNeedsAParent) {
  v1::StartTrainingRequest request = SlangRequest();
  request.set_prior_from_parent(true);
  EXPECT_THAT(Build(request).status(),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       "prior_from_parent is set without parent_snapshot_id"));
}

}  // namespace
}  // namespace bnn::server
