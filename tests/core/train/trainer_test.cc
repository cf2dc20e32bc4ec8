// The method-agnostic training loop: validation, progress, cancellation and
// the snapshot it produces.
#include "bnn/train/trainer.h"

#include <atomic>

#include <gtest/gtest.h>

#include "bnn/posterior/posterior.h"

namespace bnn {
namespace {

Dataset Linear(int n) {
  Dataset d;
  d.num_features = 2;
  Rng rng(1);
  for (int i = 0; i < n; ++i) {
    const double a = rng.Normal(), b = rng.Normal();
    d.features.push_back(a);
    d.features.push_back(b);
    d.targets.push_back(100 + 3 * a - b + 0.1 * rng.Normal());
  }
  return d;
}

TrainRequest SlangRequest() {
  TrainRequest r;
  r.method = "slang";
  r.hidden_sizes = {8};
  r.params = {{"batch_size", "16"}, {"epochs", "3"}, {"seed", "11"}};
  r.dataset_id = "ds-test";
  r.dataset_version = 2;
  return r;
}

TEST(TrainerTest, ProducesACompleteSnapshot) {
  const Dataset data = Linear(40);
  std::vector<TrainProgress> seen;
  auto snapshot = Train(SlangRequest(), data, MethodRegistry::Builtin(),
                        [&](const TrainProgress& p) { seen.push_back(p); });
  ASSERT_TRUE(snapshot.ok()) << snapshot.status();
  EXPECT_EQ(snapshot->method, "slang");
  EXPECT_EQ(snapshot->params.at("batch_size"), "16");
  EXPECT_EQ(snapshot->params.count("rank"), 1u);  // every option recorded
  EXPECT_EQ(snapshot->training.epochs, 3);
  EXPECT_EQ(snapshot->training.seed, 11u);
  EXPECT_EQ(snapshot->training.steps, 3 * 3);  // ceil(40 / 16) per epoch
  EXPECT_EQ(snapshot->training.dataset_id, "ds-test");
  EXPECT_EQ(snapshot->training.dataset_version, 2);
  EXPECT_EQ(snapshot->training.dataset_hash, DatasetHash(data));
  EXPECT_EQ(snapshot->training.num_train, 40);
  EXPECT_NEAR(snapshot->standardization.target_mean, 100, 1.0);
  EXPECT_EQ(snapshot->model.hidden_sizes, std::vector<int>{8});
  EXPECT_EQ(snapshot->posterior->dim(), snapshot->model.NumParameters());
  ASSERT_FALSE(seen.empty());
  EXPECT_EQ(seen.back().step, 9);
  EXPECT_EQ(seen.back().total_steps, 9);
  EXPECT_EQ(seen.back().epoch, 3);
  for (size_t i = 1; i < seen.size(); ++i) {
    EXPECT_GE(seen[i].step, seen[i - 1].step);
  }
}

TEST(TrainerTest, CancelStopsBetweenSteps) {
  std::atomic<bool> cancel{false};
  int64_t last_step = 0;
  auto result = Train(
      SlangRequest(), Linear(40), MethodRegistry::Builtin(),
      [&](const TrainProgress& p) {
        last_step = p.step;
        if (p.step == 2) cancel = true;
      },
      &cancel);
  EXPECT_EQ(result.status().code(), absl::StatusCode::kCancelled);
  EXPECT_EQ(last_step, 2);
}

TEST(TrainerTest, RejectsBadRequestsWithNamedFields) {
  const Dataset data = Linear(10);
  TrainRequest r = SlangRequest();
  r.method = "nope";
  auto s = Train(r, data, MethodRegistry::Builtin());
  EXPECT_EQ(s.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(s.status().message().find("slang"), absl::string_view::npos);

  r = SlangRequest();
  r.params["epochs"] = "0";
  s = Train(r, data, MethodRegistry::Builtin());
  EXPECT_NE(s.status().message().find("epochs = 0"), absl::string_view::npos)
      << s.status();

  r = SlangRequest();
  r.params["rnak"] = "2";
  s = Train(r, data, MethodRegistry::Builtin());
  EXPECT_NE(s.status().message().find("'rnak'"), absl::string_view::npos);
  EXPECT_NE(s.status().message().find("epochs"), absl::string_view::npos)
      << "known keys should include the trainer's";

  r = SlangRequest();
  r.hidden_sizes = {4, 4, 4};
  r.activations = {Activation::kRelu, Activation::kTanh};
  s = Train(r, data, MethodRegistry::Builtin());
  EXPECT_NE(s.status().message().find("activations"), absl::string_view::npos);

  Dataset bad = data;
  bad.features[5] = std::numeric_limits<double>::infinity();
  s = Train(SlangRequest(), bad, MethodRegistry::Builtin());
  EXPECT_EQ(s.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(s.status().message().find("row 2, feature 1"),
            absl::string_view::npos)
      << s.status();

  Dataset empty;
  empty.num_features = 2;
  s = Train(SlangRequest(), empty, MethodRegistry::Builtin());
  EXPECT_EQ(s.status().code(), absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace bnn
