// ResolveTrainingPlan, the one place a training request is resolved, and
// Train()'s checks that it is given the data and parent its plan was made
// for.
#include "bnn/train/plan.h"

#include <memory>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "bnn/io/snapshot.h"
#include "bnn/posterior/posterior.h"
#include "bnn/random.h"
#include "bnn/train/trainer.h"

namespace bnn {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::Pair;
using ::testing::UnorderedElementsAre;

DatasetShape Regression(int64_t rows, int64_t features) {
  DatasetShape shape;
  shape.task = Task::kRegression;
  shape.num_rows = rows;
  shape.num_features = features;
  return shape;
}

Dataset LinearData(int n) {
  Dataset d;
  d.num_features = 2;
  Rng rng(7);
  for (int i = 0; i < n; ++i) {
    const double a = rng.Normal(), b = rng.Normal();
    d.features.push_back(a);
    d.features.push_back(b);
    d.targets.push_back(2 * a - b + 0.1 * rng.Normal());
  }
  return d;
}

TrainRequest Slang() {
  TrainRequest r;
  r.method = "slang";
  r.hidden_sizes = {8, 4};
  r.activations = {Activation::kTanh};
  r.params = {{"batch_size", "16"}, {"rank", "2"}};
  r.dataset_id = "ds-a";
  r.dataset_version = 3;
  return r;
}

absl::StatusOr<TrainingPlan> Resolve(const TrainRequest& request,
                                     const DatasetShape& shape,
                                     const ParentModel* parent = nullptr) {
  return ResolveTrainingPlan(request, shape, parent, MethodRegistry::Builtin());
}

TEST(ResolveTrainingPlanTest, ResolvesEveryPartOnce) {
  TrainRequest request = Slang();
  request.options.seed = 5;
  request.params["epochs"] = "3";  // overrides options.epochs
  const absl::StatusOr<TrainingPlan> plan = Resolve(request, Regression(40, 2));
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_EQ(plan->method, "slang");
  // The trainer's keys leave the method's parameters for the options.
  EXPECT_THAT(plan->params, UnorderedElementsAre(Pair("batch_size", "16"),
                                                 Pair("rank", "2")));
  EXPECT_EQ(plan->options.epochs, 3);
  EXPECT_EQ(plan->options.seed, 5u);
  EXPECT_TRUE(plan->options.standardize);
  EXPECT_EQ(plan->model.input_dim, 2);
  EXPECT_THAT(plan->model.hidden_sizes, ElementsAre(8, 4));
  EXPECT_THAT(plan->model.activations,
              ElementsAre(Activation::kTanh, Activation::kTanh));
  EXPECT_EQ(plan->batch_rows, 16);
  EXPECT_EQ(plan->steps_per_epoch, 3);  // ceil(40 / 16)
  EXPECT_EQ(plan->total_steps, 9);
  EXPECT_EQ(plan->epochs, 3);
  EXPECT_EQ(plan->dataset_id, "ds-a");
  EXPECT_EQ(plan->dataset_version, 3);
  EXPECT_FALSE(plan->warm_start);
}

TEST(ResolveTrainingPlanTest, StepsReplaceEpochsAndBatchesFitTheData) {
  TrainRequest request = Slang();
  request.params["steps"] = "7";
  request.params["batch_size"] = "100";  // more than the 40 rows
  const absl::StatusOr<TrainingPlan> plan = Resolve(request, Regression(40, 2));
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_EQ(plan->batch_rows, 40);
  EXPECT_EQ(plan->steps_per_epoch, 1);
  EXPECT_EQ(plan->total_steps, 7);
  EXPECT_EQ(plan->epochs, 7);
}

TEST(ResolveTrainingPlanTest, ResolvingAPlansRequestAgainGivesThePlan) {
  const absl::StatusOr<TrainingPlan> plan = Resolve(Slang(), Regression(40, 2));
  ASSERT_TRUE(plan.ok()) << plan.status();
  // What a server stores of the plan, resolved again later.
  TrainRequest again;
  again.method = plan->method;
  again.params = plan->params;
  again.options = plan->options;
  again.hidden_sizes = plan->model.hidden_sizes;
  again.activations = plan->model.activations;
  again.dataset_id = plan->dataset_id;
  again.dataset_version = plan->dataset_version;
  const absl::StatusOr<TrainingPlan> second = Resolve(again, Regression(40, 2));
  ASSERT_TRUE(second.ok()) << second.status();
  EXPECT_EQ(second->params, plan->params);
  EXPECT_EQ(second->options.seed, plan->options.seed);
  EXPECT_EQ(second->model.hidden_sizes, plan->model.hidden_sizes);
  EXPECT_EQ(second->model.activations, plan->model.activations);
  EXPECT_EQ(second->total_steps, plan->total_steps);
}

TEST(ResolveTrainingPlanTest, RejectsBadRequestsNamingTheField) {
  TrainRequest request = Slang();
  request.method = "";
  EXPECT_THAT(Resolve(request, Regression(40, 2)).status().message(),
              HasSubstr("method is required"));
  request.method = "nope";
  EXPECT_THAT(Resolve(request, Regression(40, 2)).status().message(),
              HasSubstr("slang"));
  request = Slang();
  request.params["rnak"] = "2";
  const absl::Status unknown = Resolve(request, Regression(40, 2)).status();
  EXPECT_THAT(unknown.message(), HasSubstr("'rnak'"));
  EXPECT_THAT(unknown.message(), HasSubstr("epochs"))
      << "known keys should include the trainer's";
  request = Slang();
  request.params["seed"] = "-1";
  EXPECT_THAT(Resolve(request, Regression(40, 2)).status().message(),
              HasSubstr("parameter 'seed'"));
  request = Slang();
  request.options.epochs = 0;
  EXPECT_THAT(Resolve(request, Regression(40, 2)).status().message(),
              HasSubstr("epochs"));
  request = Slang();
  request.activations = {Activation::kRelu, Activation::kTanh,
                         Activation::kTanh};
  EXPECT_THAT(Resolve(request, Regression(40, 2)).status().message(),
              HasSubstr("activations"));
  EXPECT_THAT(Resolve(Slang(), Regression(0, 2)).status().message(),
              HasSubstr("no rows"));
  EXPECT_THAT(Resolve(Slang(), Regression(40, 0)).status().message(),
              HasSubstr("0 features"));
  request = Slang();
  request.prior_from_parent = true;
  EXPECT_THAT(Resolve(request, Regression(40, 2)).status().message(),
              HasSubstr("prior_from_parent is set without parent_snapshot_id"));
  request = Slang();
  request.parent_snapshot_id = "snap-x";
  EXPECT_THAT(Resolve(request, Regression(40, 2)).status().message(),
              HasSubstr("its snapshot was not given"));
}

ParentModel Parent() {
  ParentModel parent;
  parent.snapshot_id = "snap-p";
  parent.model =
      ModelSpec::ForTask(Task::kRegression, 2, 0, {6, 6}, Activation::kTanh);
  return parent;
}

TEST(ResolveTrainingPlanTest, AWarmStartKeepsTheParentsArchitecture) {
  const ParentModel parent = Parent();
  TrainRequest request = Slang();
  request.hidden_sizes.clear();
  request.activations.clear();
  request.prior_from_parent = true;
  const absl::StatusOr<TrainingPlan> plan =
      Resolve(request, Regression(40, 2), &parent);
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_TRUE(plan->warm_start);
  EXPECT_TRUE(plan->prior_from_parent);
  EXPECT_EQ(plan->parent_snapshot_id, "snap-p");
  EXPECT_THAT(plan->model.hidden_sizes, ElementsAre(6, 6));
  // The parent's architecture spelled out is accepted too.
  request.hidden_sizes = {6, 6};
  request.activations = {Activation::kTanh};
  EXPECT_TRUE(Resolve(request, Regression(40, 2), &parent).ok());
}

TEST(ResolveTrainingPlanTest, AWarmStartRejectsAnotherModelOrData) {
  const ParentModel parent = Parent();
  EXPECT_EQ(Resolve(Slang(), Regression(40, 2), &parent).status().message(),
            "hidden_sizes [8, 4] differ from the parent snapshot's [6, 6]; "
            "leave it empty to keep the parent's architecture");
  TrainRequest request = Slang();
  request.hidden_sizes.clear();
  request.activations = {Activation::kRelu};
  EXPECT_THAT(Resolve(request, Regression(40, 2), &parent).status().message(),
              HasSubstr("activations [relu, relu] differ from the parent "
                        "snapshot's [tanh, tanh]"));
  request.activations.clear();
  EXPECT_EQ(Resolve(request, Regression(40, 3), &parent).status().message(),
            "parent_snapshot_id 'snap-p' takes 2 features; dataset_id 'ds-a' "
            "has 3");
  DatasetShape binary = Regression(40, 2);
  binary.task = Task::kBinary;
  binary.num_classes = 2;
  binary.class_values = {0, 1};
  EXPECT_EQ(Resolve(request, binary, &parent).status().message(),
            "parent_snapshot_id 'snap-p' is a regression model; dataset_id "
            "'ds-a' is binary with classes 0, 1");
}

TEST(TrainPlanTest, TheRequestAndItsPlanTrainTheSameSnapshot) {
  const Dataset data = LinearData(40);
  TrainRequest request = Slang();
  request.params["epochs"] = "2";
  request.params["seed"] = "9";
  const absl::StatusOr<Snapshot> direct =
      Train(request, data, MethodRegistry::Builtin());
  ASSERT_TRUE(direct.ok()) << direct.status();
  const absl::StatusOr<TrainingPlan> plan = Resolve(request, ShapeOf(data));
  ASSERT_TRUE(plan.ok()) << plan.status();
  const absl::StatusOr<Snapshot> planned =
      Train(*plan, data, nullptr, MethodRegistry::Builtin());
  ASSERT_TRUE(planned.ok()) << planned.status();
  EXPECT_EQ(planned->training.steps, 6);
  EXPECT_EQ(planned->training.seed, 9u);
  EXPECT_EQ(planned->posterior->mean(), direct->posterior->mean());
}

TEST(TrainPlanTest, TrainRefusesDataOrAParentThePlanWasNotMadeFor) {
  const Dataset data = LinearData(40);
  const absl::StatusOr<TrainingPlan> plan = Resolve(Slang(), ShapeOf(data));
  ASSERT_TRUE(plan.ok()) << plan.status();
  const Dataset more = LinearData(41);
  EXPECT_THAT(
      Train(*plan, more, nullptr, MethodRegistry::Builtin()).status().message(),
      HasSubstr("not the one the plan was made for"));

  absl::StatusOr<Snapshot> parent =
      Train(*plan, data, nullptr, MethodRegistry::Builtin());
  ASSERT_TRUE(parent.ok()) << parent.status();
  // A parent for a plan without a warm start, and a warm start without one.
  EXPECT_THAT(Train(*plan, data, &*parent, MethodRegistry::Builtin())
                  .status()
                  .message(),
              HasSubstr("without a warm start"));
  const ParentModel model = ParentModelOf(*parent, "snap-q");
  TrainRequest warm = Slang();
  warm.hidden_sizes.clear();
  warm.activations.clear();
  const absl::StatusOr<TrainingPlan> warm_plan =
      Resolve(warm, ShapeOf(data), &model);
  ASSERT_TRUE(warm_plan.ok()) << warm_plan.status();
  EXPECT_THAT(Train(*warm_plan, data, nullptr, MethodRegistry::Builtin())
                  .status()
                  .message(),
              HasSubstr("no posterior was given"));
  EXPECT_TRUE(
      Train(*warm_plan, data, &*parent, MethodRegistry::Builtin()).ok());
  // A parent of another architecture than the plan's.
  Snapshot other = *parent;
  other.model.hidden_sizes = {8, 5};
  EXPECT_THAT(Train(*warm_plan, data, &other, MethodRegistry::Builtin())
                  .status()
                  .message(),
              HasSubstr("another architecture"));
}

}  // namespace
}  // namespace bnn
