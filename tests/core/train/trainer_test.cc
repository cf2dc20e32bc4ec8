// The method-agnostic training loop: validation, progress, cancellation and
// the snapshot it produces.
#include "bnn/train/trainer.h"

#include <atomic>
#include <cstdio>
#include <unistd.h>

#include <gtest/gtest.h>

#include "bnn/io/snapshot.h"
#include "bnn/posterior/posterior.h"

#include "tests/test_util/test_util.h"

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

// Issue 10, finding 2: an allocation failure inside a training job fails the
// job with ResourceExhausted instead of aborting the process. The child of
// the death test caps its address space 256 MiB above its size and trains a
// model whose state (9 M parameters, U of rank 64: 4.6 GB) cannot fit.
TEST(TrainerDeathTest, AllocationFailureIsResourceExhausted) {
  BNN_SKIP_IF_SANITIZED("ASan cannot run under RLIMIT_AS");
  const auto train_too_big = [] {
    if (!bnn::testing::LimitAddressSpace(int64_t{256} << 20)) _exit(2);
    TrainRequest r = SlangRequest();
    r.hidden_sizes = {3000, 3000};
    r.params["rank"] = "64";
    r.params["epochs"] = "1";
    const absl::StatusOr<Snapshot> s =
        Train(r, Linear(40), MethodRegistry::Builtin());
    std::fprintf(stderr, "%s\n", s.status().ToString().c_str());
    _exit(s.status().code() == absl::StatusCode::kResourceExhausted ? 0 : 1);
  };
  EXPECT_EXIT(train_too_big(), ::testing::ExitedWithCode(0),
              "RESOURCE_EXHAUSTED: training ran out");
}

TEST(TrainerTest, StepsReplaceEpochsAndEndMidPass) {
  TrainRequest r = SlangRequest();
  r.params["steps"] = "5";  // 3 steps per pass: one full, one partial
  std::vector<TrainProgress> seen;
  auto snapshot = Train(r, Linear(40), MethodRegistry::Builtin(),
                        [&](const TrainProgress& p) { seen.push_back(p); });
  ASSERT_TRUE(snapshot.ok()) << snapshot.status();
  EXPECT_EQ(snapshot->training.steps, 5);
  EXPECT_EQ(snapshot->training.epochs, 2);
  ASSERT_FALSE(seen.empty());
  EXPECT_EQ(seen.back().total_steps, 5);

  r.params["steps"] = "-1";
  EXPECT_EQ(Train(r, Linear(40), MethodRegistry::Builtin()).status().code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(TrainerTest, SnapshotsEveryKStepsAndAtTheEnd) {
  TrainRequest r = SlangRequest();  // 9 steps
  r.snapshot_every = 4;
  std::vector<int64_t> steps;
  r.on_snapshot = [&](const Snapshot& s) {
    steps.push_back(s.training.steps);
    EXPECT_EQ(s.posterior->dim(), s.model.NumParameters());
    return absl::OkStatus();
  };
  auto snapshot = Train(r, Linear(40), MethodRegistry::Builtin());
  ASSERT_TRUE(snapshot.ok()) << snapshot.status();
  EXPECT_EQ(steps, (std::vector<int64_t>{4, 8, 9}));

  // An observer's error ends training with it.
  r.on_snapshot = [](const Snapshot&) { return absl::AbortedError("enough"); };
  EXPECT_EQ(Train(r, Linear(40), MethodRegistry::Builtin()).status().code(),
            absl::StatusCode::kAborted);
  r.on_snapshot = nullptr;
  EXPECT_EQ(Train(r, Linear(40), MethodRegistry::Builtin()).status().code(),
            absl::StatusCode::kInvalidArgument);
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
      Interrupt::OnFlag(&cancel, "training"));
  EXPECT_EQ(result.status().code(), absl::StatusCode::kCancelled);
  EXPECT_EQ(result.status().message(), "training cancelled after 2 steps");
  EXPECT_EQ(last_step, 2);
}

// Issue 10, finding 5: a deadline stops training between steps with
// DeadlineExceeded.
TEST(TrainerTest, DeadlineStopsBetweenSteps) {
  int checks = 0;
  const Interrupt deadline([&checks] {
    return ++checks > 3 ? absl::DeadlineExceededError("deadline exceeded")
                        : absl::OkStatus();
  });
  auto result = Train(SlangRequest(), Linear(40), MethodRegistry::Builtin(),
                      nullptr, deadline);
  EXPECT_EQ(result.status().code(), absl::StatusCode::kDeadlineExceeded);
  EXPECT_EQ(result.status().message(), "deadline exceeded after 3 steps");
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

namespace bnn {
namespace {

// y = 2 x1 - x2 + 0.5 + noise: a linear model, so a network without hidden
// layers can represent the truth and posterior means can be compared with it.
Dataset LinearData(int n, uint64_t seed) {
  Dataset d;
  d.num_features = 2;
  Rng rng(seed);
  for (int i = 0; i < n; ++i) {
    const double a = rng.Normal(), b = rng.Normal();
    d.features.push_back(a);
    d.features.push_back(b);
    d.targets.push_back(2 * a - b + 0.5 + 0.3 * rng.Normal());
  }
  return d;
}

TrainRequest LinearSlang(int epochs) {
  TrainRequest r;
  r.method = "slang";
  r.params = {{"rank", "3"},
              {"batch_size", "20"},
              {"learning_rate", "0.2"},
              {"beta", "0.2"},
              {"noise_precision", "10"},
              {"prior_precision", "1"},
              {"bias_prior_precision", "1"},
              {"mc_samples", "4"}};
  r.options.epochs = epochs;
  r.options.seed = 4;
  return r;
}

TEST(TrainerWarmStartTest, ContinuesFromTheParentPosterior) {
  const Dataset data = LinearData(200, 1);
  auto parent = Train(LinearSlang(30), data, MethodRegistry::Builtin());
  ASSERT_TRUE(parent.ok()) << parent.status();
  auto shared = std::make_shared<Snapshot>(*std::move(parent));

  TrainRequest child = LinearSlang(1);
  child.params["learning_rate"] = "1e-6";  // barely move: stay at the parent
  child.params["beta"] = "1e-6";
  child.parent = shared;
  child.parent_snapshot_id = "snap-parent";
  auto warm = Train(child, data, MethodRegistry::Builtin());
  ASSERT_TRUE(warm.ok()) << warm.status();
  EXPECT_EQ(warm->training.parent_snapshot_id, "snap-parent");
  EXPECT_FALSE(warm->training.prior_from_parent);
  EXPECT_EQ(warm->model.hidden_sizes, shared->model.hidden_sizes);
  EXPECT_EQ(warm->standardization.target_mean,
            shared->standardization.target_mean);
  EXPECT_LT((warm->posterior->mean() - shared->posterior->mean())
                .cwiseAbs()
                .maxCoeff(),
            1e-3);
  // From scratch, one such epoch stays near the random initialisation.
  TrainRequest cold = LinearSlang(1);
  cold.params = child.params;
  auto scratch = Train(cold, data, MethodRegistry::Builtin());
  ASSERT_TRUE(scratch.ok());
  EXPECT_GT((scratch->posterior->mean() - shared->posterior->mean())
                .cwiseAbs()
                .maxCoeff(),
            0.1);
  // The parent link survives the snapshot format.
  auto round_trip = DecodeSnapshot(*EncodeSnapshot(*warm));
  ASSERT_TRUE(round_trip.ok()) << round_trip.status();
  EXPECT_EQ(round_trip->training.parent_snapshot_id, "snap-parent");
}

TEST(TrainerWarmStartTest, PriorFromParentIsAnOnlineBayesianUpdate) {
  // Old data A (400 rows) then new data B (10 rows): B alone says little,
  // B with A's posterior as the prior should know what A knew.
  const Dataset a = LinearData(400, 2);
  const Dataset b = LinearData(10, 3);
  auto on_a = Train(LinearSlang(40), a, MethodRegistry::Builtin());
  ASSERT_TRUE(on_a.ok()) << on_a.status();
  auto parent = std::make_shared<Snapshot>(*std::move(on_a));

  TrainRequest update = LinearSlang(300);
  update.params["batch_size"] = "10";
  update.parent = parent;
  update.prior_from_parent = true;
  auto with_prior = Train(update, b, MethodRegistry::Builtin());
  ASSERT_TRUE(with_prior.ok()) << with_prior.status();
  EXPECT_TRUE(with_prior->training.prior_from_parent);

  // Same 10 rows without the prior (warm start only): the isotropic prior
  // and 10 points pull the weights away from what A established.
  update.prior_from_parent = false;
  auto no_prior = Train(update, b, MethodRegistry::Builtin());
  ASSERT_TRUE(no_prior.ok());
  const Eigen::VectorXd& m0 = parent->posterior->mean();
  const double drift_with = (with_prior->posterior->mean() - m0).norm();
  const double drift_without = (no_prior->posterior->mean() - m0).norm();
  EXPECT_LT(drift_with, 0.5 * drift_without)
      << drift_with << " vs " << drift_without;
  // And the posterior stays as confident as A made it (variances do not
  // reset to the isotropic prior's).
  EXPECT_LT(with_prior->posterior->MarginalVariances().maxCoeff(),
            no_prior->posterior->MarginalVariances().maxCoeff());
}

TEST(TrainerWarmStartTest, RejectsParentsThatDoNotFit) {
  const Dataset data = LinearData(50, 5);
  auto parent = Train(LinearSlang(2), data, MethodRegistry::Builtin());
  ASSERT_TRUE(parent.ok());
  auto shared = std::make_shared<Snapshot>(*std::move(parent));

  TrainRequest r = LinearSlang(1);
  r.parent = shared;
  r.hidden_sizes = {4};
  auto s = Train(r, data, MethodRegistry::Builtin());
  EXPECT_NE(s.status().message().find("hidden_sizes"), absl::string_view::npos)
      << s.status();

  Dataset wider = data;
  wider.num_features = 1;
  wider.features.resize(wider.targets.size());
  r.hidden_sizes.clear();
  s = Train(r, wider, MethodRegistry::Builtin());
  EXPECT_EQ(s.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(s.status().message().find("2 features"), absl::string_view::npos)
      << s.status();
}

}  // namespace
}  // namespace bnn
