#include "client/bnnctl_args.h"

#include <cstdint>
#include <cstdlib>
#include <fstream>
#include <limits>
#include <string>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "bnn/version.h"

namespace bnn::client {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;
using ::testing::Not;
using ::testing::Pair;

absl::StatusOr<Invocation> Parse(std::vector<std::string> args) {
  return ParseBnnctlArgs(args);
}

// The message of a failed parse; fails the test if the parse succeeded or
// failed with another code than InvalidArgument.
std::string UsageError(std::vector<std::string> args) {
  absl::StatusOr<Invocation> result = ParseBnnctlArgs(args);
  EXPECT_FALSE(result.ok());
  if (result.ok()) return "";
  EXPECT_EQ(result.status().code(), absl::StatusCode::kInvalidArgument);
  return std::string(result.status().message());
}

// The text a --help, help or --version invocation prints; fails the test
// for anything else.
std::string Text(std::vector<std::string> args) {
  absl::StatusOr<Invocation> result = ParseBnnctlArgs(args);
  EXPECT_TRUE(result.ok()) << result.status();
  if (!result.ok()) return "";
  const auto* text = std::get_if<TextCommand>(&result->command);
  EXPECT_NE(text, nullptr);
  return text == nullptr ? "" : text->text;
}

// Every test starts without BNN_SERVER and BNN_TOKEN, whatever the
// environment of the test run holds.
class BnnctlArgsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    unsetenv("BNN_SERVER");
    unsetenv("BNN_TOKEN");
  }
  void TearDown() override { SetUp(); }
};

TEST_F(BnnctlArgsTest, UploadWithDefaultsForGlobalFlags) {
  absl::StatusOr<Invocation> parsed =
      Parse({"upload", "--name", "cubic", "--task", "regression", "--csv",
             "data.csv", "--target", "y"});
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  EXPECT_EQ(parsed->global.server, "127.0.0.1:50051");
  EXPECT_FALSE(parsed->global.json);
  EXPECT_EQ(parsed->global.timeout_seconds, 30.0);
  EXPECT_EQ(parsed->global.token, "");
  EXPECT_EQ(parsed->global.tls_ca_file, "");
  const auto* upload = std::get_if<UploadCommand>(&parsed->command);
  ASSERT_NE(upload, nullptr);
  EXPECT_EQ(upload->name, "cubic");
  EXPECT_FALSE(upload->classification);
  EXPECT_EQ(upload->csv_path, "data.csv");
  EXPECT_EQ(upload->target, "y");
}

TEST_F(BnnctlArgsTest, GlobalFlagsBeforeOrAfterTheCommandAndEqualsForm) {
  absl::StatusOr<Invocation> parsed =
      Parse({"--server=host:7", "datasets", "--json", "--timeout", "2.5"});
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  EXPECT_EQ(parsed->global.server, "host:7");
  EXPECT_TRUE(parsed->global.json);
  EXPECT_EQ(parsed->global.timeout_seconds, 2.5);
  EXPECT_TRUE(std::holds_alternative<DatasetsCommand>(parsed->command));
}

TEST_F(BnnctlArgsTest, TrainParsesLayersActivationsSeedAndParams) {
  absl::StatusOr<Invocation> parsed =
      Parse({"train", "--dataset", "d1", "--method", "slang", "--hidden",
             "50,20", "--activation", "relu,tanh", "--epochs", "40", "--seed",
             "7", "--param", "rank=2", "--param=learning_rate = 0.05"});
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  const auto* train = std::get_if<TrainCommand>(&parsed->command);
  ASSERT_NE(train, nullptr);
  EXPECT_EQ(train->dataset_id, "d1");
  EXPECT_EQ(train->method, "slang");
  EXPECT_THAT(train->hidden_sizes, ElementsAre(50, 20));
  EXPECT_THAT(train->activations, ElementsAre("relu", "tanh"));
  EXPECT_EQ(train->epochs, 40);
  EXPECT_EQ(train->seed, uint64_t{7});
  EXPECT_THAT(train->params,
              ElementsAre(Pair("learning_rate", "0.05"), Pair("rank", "2")));
}

TEST_F(BnnctlArgsTest, TrainHiddenNoneMeansNoHiddenLayer) {
  absl::StatusOr<Invocation> parsed =
      Parse({"train", "--dataset", "d", "--method", "slang", "--hidden", "none",
             "--epochs", "1"});
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  const auto& train = std::get<TrainCommand>(parsed->command);
  EXPECT_THAT(train.hidden_sizes, IsEmpty());
  EXPECT_THAT(train.activations, IsEmpty());
  EXPECT_FALSE(train.seed.has_value());
}

TEST_F(BnnctlArgsTest, TrainErrorsNameTheFlag) {
  const std::vector<std::string> base = {"train", "--dataset", "d", "--method",
                                         "slang"};
  auto with = [&](std::vector<std::string> extra) {
    std::vector<std::string> args = base;
    args.insert(args.end(), extra.begin(), extra.end());
    return UsageError(args);
  };
  EXPECT_THAT(with({"--hidden", "50"}), HasSubstr("--epochs"));
  EXPECT_THAT(with({"--epochs", "3"}), HasSubstr("--hidden"));
  EXPECT_THAT(with({"--hidden", "50,0", "--epochs", "3"}),
              HasSubstr("--hidden: '0'"));
  EXPECT_THAT(with({"--hidden", "50,", "--epochs", "3"}),
              HasSubstr("--hidden"));
  EXPECT_THAT(with({"--hidden", "50", "--epochs", "zero"}),
              HasSubstr("--epochs: 'zero' is not an integer"));
  EXPECT_THAT(with({"--hidden", "50", "--epochs", "0"}),
              HasSubstr("--epochs: '0' is not an integer >= 1"));
  EXPECT_THAT(with({"--hidden", "50", "--epochs", "1", "--seed", "-1"}),
              HasSubstr("--seed"));
  EXPECT_THAT(with({"--hidden", "50", "--epochs", "1", "--param", "rank"}),
              HasSubstr("--param"));
  EXPECT_THAT(with({"--hidden", "50", "--epochs", "1", "--param", "=3"}),
              HasSubstr("--param"));
  EXPECT_THAT(with({"--hidden", "50", "--epochs", "1", "--param", "rank=1",
                    "--param", "rank=2"}),
              HasSubstr("--param: 'rank' given more than once"));
  EXPECT_THAT(
      with({"--hidden", "50", "--epochs", "1", "--activation", "relu,,tanh"}),
      HasSubstr("--activation"));
  EXPECT_THAT(with({"--hidden", "50", "--epochs", "1", "--epochs", "2"}),
              HasSubstr("--epochs"));
}

TEST_F(BnnctlArgsTest, TrainContinualLearningFlags) {
  absl::StatusOr<Invocation> parsed = Parse(
      {"train", "--dataset", "d", "--method", "slang", "--epochs", "5",
       "--dataset-version", "2", "--parent", "snap-1", "--prior-from-parent"});
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  const auto& train = std::get<TrainCommand>(parsed->command);
  EXPECT_EQ(train.dataset_version, int64_t{2});
  EXPECT_EQ(train.parent_snapshot_id, "snap-1");
  EXPECT_TRUE(train.prior_from_parent);
  // With a parent, --hidden may be left out: the parent's is used.
  EXPECT_THAT(train.hidden_sizes, IsEmpty());

  absl::StatusOr<Invocation> from_scratch =
      Parse({"train", "--dataset", "d", "--method", "slang", "--hidden", "8",
             "--epochs", "5"});
  ASSERT_TRUE(from_scratch.ok()) << from_scratch.status();
  const auto& plain = std::get<TrainCommand>(from_scratch->command);
  EXPECT_FALSE(plain.dataset_version.has_value());
  EXPECT_EQ(plain.parent_snapshot_id, "");
  EXPECT_FALSE(plain.prior_from_parent);

  const std::vector<std::string> base = {"train", "--dataset", "d", "--method",
                                         "slang", "--epochs",  "5"};
  auto with = [&](std::vector<std::string> extra) {
    std::vector<std::string> args = base;
    args.insert(args.end(), extra.begin(), extra.end());
    return UsageError(args);
  };
  EXPECT_THAT(with({"--hidden", "8", "--prior-from-parent"}),
              HasSubstr("--prior-from-parent needs --parent"));
  EXPECT_THAT(with({"--parent", "s", "--hidden", "0"}), HasSubstr("--hidden"));
  EXPECT_THAT(with({"--parent", ""}), HasSubstr("--parent: must not be empty"));
  EXPECT_THAT(with({"--hidden", "8", "--dataset-version", "0"}),
              HasSubstr("--dataset-version: '0' is not a version"));
  EXPECT_THAT(with({"--hidden", "8", "--dataset-version", "latest"}),
              HasSubstr("--dataset-version"));
}

TEST_F(BnnctlArgsTest, SeedAcceptsTheFullUnsignedRange) {
  absl::StatusOr<Invocation> parsed =
      Parse({"predict", "--snapshot", "s", "--csv", "x.csv", "--samples", "64",
             "--seed", "18446744073709551615"});
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  const auto& predict = std::get<PredictCommand>(parsed->command);
  EXPECT_EQ(predict.seed, std::numeric_limits<uint64_t>::max());
  EXPECT_EQ(predict.num_samples, 64);
  EXPECT_EQ(predict.target, "");

  EXPECT_THAT(UsageError({"predict", "--snapshot", "s", "--csv", "x.csv",
                          "--samples", "64", "--seed", "18446744073709551616"}),
              HasSubstr("--seed"));
}

TEST_F(BnnctlArgsTest, PredictTargetAndSampleChecks) {
  absl::StatusOr<Invocation> parsed =
      Parse({"predict", "--snapshot", "s", "--csv", "x.csv", "--samples", "8",
             "--target", "y"});
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  const auto& predict = std::get<PredictCommand>(parsed->command);
  EXPECT_EQ(predict.target, "y");
  EXPECT_FALSE(predict.linearized);
  EXPECT_THAT(predict.quantiles, IsEmpty());
  EXPECT_FALSE(predict.per_sample);

  EXPECT_THAT(UsageError({"predict", "--snapshot", "s", "--csv", "x.csv"}),
              HasSubstr("--samples"));
  EXPECT_THAT(UsageError({"predict", "--snapshot", "s", "--csv", "x.csv",
                          "--samples", "0"}),
              HasSubstr("--samples: '0' is not an integer >= 1"));
  EXPECT_THAT(UsageError({"predict", "--snapshot", "", "--csv", "x.csv",
                          "--samples", "1"}),
              HasSubstr("--snapshot: must not be empty"));
}

TEST_F(BnnctlArgsTest, PredictLinearizedQuantilesAndPerSample) {
  // The linearised predictive draws no samples, so --samples is optional.
  absl::StatusOr<Invocation> parsed =
      Parse({"predict", "--snapshot", "s", "--csv", "x.csv", "--linearized",
             "--quantiles", "0.05,0.5,0.95"});
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  const auto& predict = std::get<PredictCommand>(parsed->command);
  EXPECT_TRUE(predict.linearized);
  EXPECT_EQ(predict.num_samples, 0);
  EXPECT_THAT(predict.quantiles, ElementsAre(0.05, 0.5, 0.95));
  EXPECT_FALSE(predict.per_sample);

  absl::StatusOr<Invocation> sampled =
      Parse({"predict", "--snapshot", "s", "--csv", "x.csv", "--samples", "8",
             "--per-sample"});
  ASSERT_TRUE(sampled.ok()) << sampled.status();
  EXPECT_TRUE(std::get<PredictCommand>(sampled->command).per_sample);
  EXPECT_THAT(UsageError({"predict", "--snapshot", "s", "--csv", "x.csv",
                          "--linearized", "--per-sample"}),
              HasSubstr("--per-sample needs Monte Carlo samples"));

  const std::vector<std::string> base = {"predict", "--snapshot", "s", "--csv",
                                         "x.csv",   "--samples",  "4"};
  for (const char* bad : {"0", "1", "0.5,", "-0.1", "nan", "0.2,x"}) {
    std::vector<std::string> args = base;
    args.insert(args.end(), {"--quantiles", bad});
    EXPECT_THAT(UsageError(args), HasSubstr("--quantiles")) << bad;
  }
  std::vector<std::string> args = base;
  args.push_back("--linearized=yes");
  EXPECT_THAT(UsageError(args), HasSubstr("linearized"));
}

TEST_F(BnnctlArgsTest, AcquireFromADatasetOrACsvPool) {
  absl::StatusOr<Invocation> parsed =
      Parse({"acquire", "--snapshot", "s", "--dataset", "d", "--version", "3",
             "--k", "5", "--heuristic", "bald", "--samples", "32", "--seed",
             "4", "--diversity-power", "2.5"});
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  const auto& acquire = std::get<AcquireCommand>(parsed->command);
  EXPECT_EQ(acquire.snapshot_id, "s");
  EXPECT_EQ(acquire.dataset_id, "d");
  EXPECT_EQ(acquire.dataset_version, int64_t{3});
  EXPECT_EQ(acquire.csv_path, "");
  EXPECT_EQ(acquire.k, 5);
  EXPECT_EQ(acquire.heuristic, "bald");
  EXPECT_EQ(acquire.num_samples, 32);
  EXPECT_EQ(acquire.seed, uint64_t{4});
  EXPECT_EQ(acquire.diversity_power, 2.5);

  absl::StatusOr<Invocation> csv =
      Parse({"acquire", "--snapshot", "s", "--csv", "pool.csv", "--k", "1",
             "--heuristic", "max_variance"});
  ASSERT_TRUE(csv.ok()) << csv.status();
  const auto& from_csv = std::get<AcquireCommand>(csv->command);
  EXPECT_EQ(from_csv.csv_path, "pool.csv");
  EXPECT_EQ(from_csv.dataset_id, "");
  EXPECT_FALSE(from_csv.dataset_version.has_value());
  EXPECT_EQ(from_csv.num_samples, 0);
  EXPECT_FALSE(from_csv.seed.has_value());
  EXPECT_EQ(from_csv.diversity_power, 0.0);
}

TEST_F(BnnctlArgsTest, EvaluateFromACsvOrADataset) {
  absl::StatusOr<Invocation> csv =
      Parse({"evaluate", "--model", "m@stable", "--csv", "test.csv", "--target",
             "y", "--ood-csv", "far.csv", "--samples", "32", "--seed", "4",
             "--ece-bins", "10"});
  ASSERT_TRUE(csv.ok()) << csv.status();
  const auto& evaluate = std::get<EvaluateCommand>(csv->command);
  EXPECT_EQ(evaluate.model, "m@stable");
  EXPECT_EQ(evaluate.csv_path, "test.csv");
  EXPECT_EQ(evaluate.target, "y");
  EXPECT_EQ(evaluate.ood_csv_path, "far.csv");
  EXPECT_EQ(evaluate.num_samples, 32);
  EXPECT_EQ(evaluate.seed, uint64_t{4});
  EXPECT_EQ(evaluate.ece_bins, 10);

  absl::StatusOr<Invocation> stored =
      Parse({"evaluate", "--snapshot", "s", "--dataset", "d", "--version", "2",
             "--ood-dataset", "far"});
  ASSERT_TRUE(stored.ok()) << stored.status();
  const auto& from_dataset = std::get<EvaluateCommand>(stored->command);
  EXPECT_EQ(from_dataset.dataset_id, "d");
  EXPECT_EQ(from_dataset.dataset_version, int64_t{2});
  EXPECT_EQ(from_dataset.ood_dataset_id, "far");
  EXPECT_EQ(from_dataset.num_samples, 0);
  EXPECT_EQ(from_dataset.ece_bins, 0);
}

TEST_F(BnnctlArgsTest, EvaluateErrorsNameTheFlag) {
  EXPECT_THAT(UsageError({"evaluate", "--snapshot", "s"}),
              HasSubstr("--dataset ID or --csv FILE"));
  EXPECT_THAT(UsageError({"evaluate", "--snapshot", "s", "--csv", "t.csv"}),
              HasSubstr("needs --target COL"));
  EXPECT_THAT(UsageError({"evaluate", "--snapshot", "s", "--dataset", "d",
                          "--target", "y"}),
              HasSubstr("--target needs --csv"));
  EXPECT_THAT(UsageError({"evaluate", "--snapshot", "s", "--dataset", "d",
                          "--ood-dataset", "a", "--ood-csv", "b.csv"}),
              HasSubstr("at most one of --ood-dataset and --ood-csv"));
  EXPECT_THAT(UsageError({"evaluate", "--dataset", "d"}),
              HasSubstr("--snapshot"));
  EXPECT_THAT(UsageError({"evaluate", "--snapshot", "s", "--dataset", "d",
                          "--ece-bins", "0"}),
              HasSubstr("--ece-bins"));
}

TEST_F(BnnctlArgsTest, AcquireTakesBatchBald) {
  absl::StatusOr<Invocation> parsed =
      Parse({"acquire", "--snapshot", "s", "--dataset", "d", "--k", "4",
             "--heuristic", "batchbald"});
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  EXPECT_EQ(std::get<AcquireCommand>(parsed->command).heuristic, "batchbald");
}

TEST_F(BnnctlArgsTest, AcquireErrorsNameTheFlag) {
  const std::vector<std::string> base = {"acquire", "--snapshot", "s"};
  auto with = [&](std::vector<std::string> extra) {
    std::vector<std::string> args = base;
    args.insert(args.end(), extra.begin(), extra.end());
    return UsageError(args);
  };
  EXPECT_THAT(with({"--dataset", "d", "--heuristic", "bald"}),
              HasSubstr("--k is required"));
  EXPECT_THAT(with({"--dataset", "d", "--k", "1"}),
              HasSubstr("--heuristic is required"));
  EXPECT_THAT(with({"--k", "1", "--heuristic", "bald"}),
              HasSubstr("exactly one pool: --dataset ID or --csv FILE"));
  EXPECT_THAT(with({"--dataset", "d", "--csv", "p.csv", "--k", "1",
                    "--heuristic", "bald"}),
              HasSubstr("exactly one pool"));
  EXPECT_THAT(with({"--csv", "p.csv", "--version", "2", "--k", "1",
                    "--heuristic", "bald"}),
              HasSubstr("--version needs --dataset"));
  EXPECT_THAT(
      with({"--dataset", "d", "--k", "1", "--heuristic", "most_uncertain"}),
      HasSubstr("--heuristic: unknown heuristic 'most_uncertain'; known "
                "heuristics: max_variance"));
  EXPECT_THAT(with({"--dataset", "d", "--k", "0", "--heuristic", "bald"}),
              HasSubstr("--k: '0' is not an integer >= 1"));
  EXPECT_THAT(with({"--dataset", "d", "--k", "1", "--heuristic", "bald",
                    "--diversity-power", "-1"}),
              HasSubstr("--diversity-power: '-1' is not a number >= 0"));
  EXPECT_THAT(with({"--dataset", "d", "--k", "1", "--heuristic", "bald",
                    "--diversity-power", "inf"}),
              HasSubstr("--diversity-power"));
  EXPECT_THAT(with({"--dataset", "d", "--k", "1", "--heuristic", "bald",
                    "--samples", "0"}),
              HasSubstr("--samples: '0' is not an integer >= 1"));
  EXPECT_THAT(with({"--dataset", "d", "--version", "-2", "--k", "1",
                    "--heuristic", "bald"}),
              HasSubstr("--version"));
}

TEST_F(BnnctlArgsTest, AppendAndDatasetVersions) {
  absl::StatusOr<Invocation> parsed =
      Parse({"append", "--dataset", "d", "--csv", "new.csv", "--target", "y",
             "--expected-version", "4"});
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  const auto& append = std::get<AppendCommand>(parsed->command);
  EXPECT_EQ(append.dataset_id, "d");
  EXPECT_EQ(append.csv_path, "new.csv");
  EXPECT_EQ(append.target, "y");
  EXPECT_EQ(append.expected_version, int64_t{4});
  EXPECT_THAT(UsageError({"append", "--dataset", "d", "--csv", "new.csv"}),
              HasSubstr("--target is required"));
  EXPECT_THAT(UsageError({"append", "--dataset", "d", "--csv", "new.csv",
                          "--target", "y", "--expected-version", "x"}),
              HasSubstr("--expected-version: 'x' is not a version"));

  absl::StatusOr<Invocation> dataset =
      Parse({"dataset", "d", "--version", "2"});
  ASSERT_TRUE(dataset.ok()) << dataset.status();
  EXPECT_EQ(std::get<DatasetCommand>(dataset->command).version, int64_t{2});
  EXPECT_THAT(UsageError({"dataset", "d", "--version", "0"}),
              HasSubstr("--version"));
}

TEST_F(BnnctlArgsTest, PlotCommands) {
  absl::StatusOr<Invocation> loss =
      Parse({"plot", "loss", "job-1", "--out", "l.png", "--python", "py3"});
  ASSERT_TRUE(loss.ok()) << loss.status();
  const PlotCommand& l = std::get<PlotCommand>(loss->command);
  EXPECT_EQ(l.kind, "loss");
  EXPECT_EQ(l.target, "job-1");
  EXPECT_EQ(l.out_path, "l.png");
  EXPECT_EQ(l.python, "py3");
  EXPECT_TRUE(l.csv_path.empty());

  absl::StatusOr<Invocation> bands =
      Parse({"plot", "bands", "cubic@stable", "--csv", "c.csv", "--target", "y",
             "--samples", "16", "--seed", "3", "--json"});
  ASSERT_TRUE(bands.ok()) << bands.status();
  const PlotCommand& b = std::get<PlotCommand>(bands->command);
  EXPECT_EQ(b.kind, "bands");
  EXPECT_EQ(b.target, "cubic@stable");
  EXPECT_EQ(b.csv_path, "c.csv");
  EXPECT_EQ(b.target_column, "y");
  EXPECT_EQ(b.num_samples, 16);
  EXPECT_EQ(b.seed, uint64_t{3});
  EXPECT_EQ(b.python, "/usr/bin/python3");

  absl::StatusOr<Invocation> reliability =
      Parse({"plot", "reliability", "m", "--csv", "r.csv", "--target", "label",
             "--bins", "5"});
  ASSERT_TRUE(reliability.ok()) << reliability.status();
  EXPECT_EQ(std::get<PlotCommand>(reliability->command).kind, "reliability");
  EXPECT_EQ(std::get<PlotCommand>(reliability->command).bins, 5);

  EXPECT_THAT(UsageError({"plot"}), HasSubstr("subcommand"));
  EXPECT_THAT(UsageError({"plot", "bands", "m"}), HasSubstr("--csv"));
  EXPECT_THAT(UsageError({"plot", "reliability", "m", "--csv", "r.csv"}),
              HasSubstr("--target"));
  EXPECT_THAT(UsageError({"plot", "bands", "m", "--csv", "-"}),
              HasSubstr("not '-'"));
}

TEST_F(BnnctlArgsTest, SnapshotCommands) {
  absl::StatusOr<Invocation> all = Parse({"snapshots"});
  ASSERT_TRUE(all.ok()) << all.status();
  EXPECT_EQ(std::get<SnapshotsCommand>(all->command).dataset_id, "");
  absl::StatusOr<Invocation> of_dataset = Parse({"snapshots", "--dataset=d"});
  ASSERT_TRUE(of_dataset.ok()) << of_dataset.status();
  EXPECT_EQ(std::get<SnapshotsCommand>(of_dataset->command).dataset_id, "d");

  absl::StatusOr<Invocation> one = Parse({"snapshot", "s-1"});
  ASSERT_TRUE(one.ok()) << one.status();
  EXPECT_EQ(std::get<SnapshotCommand>(one->command).snapshot_id, "s-1");
  absl::StatusOr<Invocation> deleted = Parse({"delete-snapshot", "s-2"});
  ASSERT_TRUE(deleted.ok()) << deleted.status();
  EXPECT_EQ(std::get<DeleteSnapshotCommand>(deleted->command).snapshot_id,
            "s-2");

  absl::StatusOr<Invocation> exported =
      Parse({"export", "--snapshot", "s-1", "--out", "s.bin"});
  ASSERT_TRUE(exported.ok()) << exported.status();
  EXPECT_EQ(std::get<ExportCommand>(exported->command).snapshot_id, "s-1");
  EXPECT_EQ(std::get<ExportCommand>(exported->command).out_path, "s.bin");
  absl::StatusOr<Invocation> imported = Parse({"import", "--in", "s.bin"});
  ASSERT_TRUE(imported.ok()) << imported.status();
  EXPECT_EQ(std::get<ImportCommand>(imported->command).in_path, "s.bin");

  EXPECT_THAT(UsageError({"snapshot"}), HasSubstr("SNAPSHOT_ID is required"));
  EXPECT_THAT(UsageError({"delete-snapshot", "a", "b"}),
              HasSubstr("unexpected argument 'b' for 'delete-snapshot'"));
  EXPECT_THAT(UsageError({"export", "--snapshot", "s"}),
              HasSubstr("--out is required"));
  EXPECT_THAT(UsageError({"import"}), HasSubstr("--in is required"));
  EXPECT_THAT(UsageError({"snapshots", "--dataset", ""}),
              HasSubstr("--dataset: must not be empty"));
}

TEST_F(BnnctlArgsTest, JobTakesOneIdAndOptionalWait) {
  absl::StatusOr<Invocation> parsed =
      Parse({"job", "j-1", "--wait", "--wait-timeout", "90"});
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  const auto& job = std::get<JobCommand>(parsed->command);
  EXPECT_EQ(job.job_id, "j-1");
  EXPECT_TRUE(job.wait);
  EXPECT_EQ(job.wait_timeout_seconds, 90.0);

  EXPECT_THAT(UsageError({"job"}), HasSubstr("JOB_ID"));
  EXPECT_THAT(UsageError({"job", "a", "b"}),
              HasSubstr("unexpected argument 'b' for 'job'"));
  EXPECT_THAT(UsageError({"job", "a", "--wait-timeout", "5"}),
              HasSubstr("--wait-timeout needs --wait"));
  EXPECT_THAT(UsageError({"job", "a", "--wait=yes"}), HasSubstr("wait"));
}

TEST_F(BnnctlArgsTest, JobsFiltersAndLimit) {
  absl::StatusOr<Invocation> parsed =
      Parse({"jobs", "--state", "running,interrupted", "--dataset", "ds-1",
             "--method", "slang", "--model", "m", "--limit", "5"});
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  const auto& jobs = std::get<JobsCommand>(parsed->command);
  EXPECT_THAT(jobs.states, ElementsAre("running", "interrupted"));
  EXPECT_EQ(jobs.dataset_id, "ds-1");
  EXPECT_EQ(jobs.method, "slang");
  EXPECT_EQ(jobs.model_name, "m");
  EXPECT_EQ(jobs.limit, 5);
  absl::StatusOr<Invocation> plain = Parse({"jobs"});
  ASSERT_TRUE(plain.ok()) << plain.status();
  EXPECT_EQ(std::get<JobsCommand>(plain->command).limit, 20);
  EXPECT_THAT(std::get<JobsCommand>(plain->command).states, IsEmpty());

  EXPECT_THAT(
      UsageError({"jobs", "--state", "running,done"}),
      AllOf(HasSubstr("--state"), HasSubstr("'done' is not a job state")));
  EXPECT_THAT(UsageError({"jobs", "--limit", "0"}), HasSubstr("--limit"));
}

TEST_F(BnnctlArgsTest, WatchTakesOneIdAndATimeout) {
  absl::StatusOr<Invocation> parsed =
      Parse({"watch", "job-1", "--wait-timeout", "30"});
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  const auto& watch = std::get<WatchCommand>(parsed->command);
  EXPECT_EQ(watch.job_id, "job-1");
  EXPECT_EQ(watch.wait_timeout_seconds, 30.0);
  EXPECT_THAT(UsageError({"watch"}), HasSubstr("JOB_ID"));
  EXPECT_THAT(UsageError({"watch", "a", "b"}),
              HasSubstr("unexpected argument 'b' for 'watch'"));
}

TEST_F(BnnctlArgsTest, TrainModelPublishAndWait) {
  const std::vector<std::string> base = {"train",    "--dataset", "d",
                                         "--method", "slang",     "--hidden",
                                         "4",        "--epochs",  "1"};
  std::vector<std::string> args = base;
  args.insert(args.end(), {"--model", "cubic", "--publish", "--wait",
                           "--wait-timeout", "60"});
  absl::StatusOr<Invocation> parsed = Parse(args);
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  const auto& train = std::get<TrainCommand>(parsed->command);
  EXPECT_EQ(train.model_name, "cubic");
  EXPECT_TRUE(train.publish);
  EXPECT_TRUE(train.wait);
  EXPECT_EQ(train.wait_timeout_seconds, 60.0);
  absl::StatusOr<Invocation> plain = Parse(base);
  ASSERT_TRUE(plain.ok()) << plain.status();
  EXPECT_FALSE(std::get<TrainCommand>(plain->command).wait);
  EXPECT_EQ(std::get<TrainCommand>(plain->command).model_name, "");

  args = base;
  args.push_back("--publish");
  EXPECT_THAT(UsageError(args), HasSubstr("--publish needs --model"));
  args = base;
  args.insert(args.end(), {"--wait-timeout", "5"});
  EXPECT_THAT(UsageError(args), HasSubstr("--wait-timeout needs --wait"));
}

TEST_F(BnnctlArgsTest, IdCommands) {
  absl::StatusOr<Invocation> cancel = Parse({"cancel", "j-2"});
  ASSERT_TRUE(cancel.ok()) << cancel.status();
  EXPECT_EQ(std::get<CancelCommand>(cancel->command).job_id, "j-2");
  absl::StatusOr<Invocation> dataset = Parse({"--json", "dataset", "d-3"});
  ASSERT_TRUE(dataset.ok()) << dataset.status();
  EXPECT_EQ(std::get<DatasetCommand>(dataset->command).dataset_id, "d-3");
  EXPECT_THAT(UsageError({"methods", "extra"}),
              HasSubstr("unexpected argument 'extra' for 'methods'"));
}

TEST_F(BnnctlArgsTest, UsageErrorsNameTheFlagOrCommand) {
  EXPECT_THAT(UsageError({}), HasSubstr("missing command"));
  EXPECT_THAT(UsageError({"fly"}), HasSubstr("unknown command 'fly'"));
  EXPECT_THAT(UsageError({"datasets", "--verbose"}),
              HasSubstr("unknown flag --verbose for 'datasets'"));
  EXPECT_THAT(UsageError({"--csv", "x", "upload"}),
              HasSubstr("flag --csv of 'upload' must follow the command"));
  EXPECT_THAT(UsageError({"--verbose", "datasets"}),
              HasSubstr("unknown flag --verbose for 'datasets'"));
  EXPECT_THAT(UsageError({"--verbose"}), HasSubstr("unknown flag --verbose"));
  EXPECT_THAT(UsageError({"datasets", "-v"}), HasSubstr("unknown flag -v"));
  EXPECT_THAT(UsageError({"upload", "--name", "n", "--task", "regression",
                          "--target", "y", "--csv"}),
              HasSubstr("--csv: 1 required FILE missing"));
  // A flag that needs a value takes the next argument whatever it looks
  // like, so here --name is "--task" and "regression" is left over.
  EXPECT_THAT(UsageError({"upload", "--name", "--task", "regression"}),
              HasSubstr("unexpected argument 'regression' for 'upload'"));
  EXPECT_THAT(UsageError({"upload", "--name", "n", "--task", "ordinal", "--csv",
                          "c", "--target", "y"}),
              HasSubstr("--task: must be regression or classification"));
  EXPECT_THAT(UsageError({"upload", "--task", "regression", "--csv", "c",
                          "--target", "y"}),
              HasSubstr("--name is required"));
  // An unknown flag is reported before the missing ones.
  EXPECT_THAT(UsageError({"upload", "--nme", "n"}),
              HasSubstr("unknown flag --nme for 'upload'"));
  EXPECT_THAT(UsageError({"datasets", "--timeout", "0"}),
              HasSubstr("--timeout"));
  EXPECT_THAT(UsageError({"datasets", "--timeout", "soon"}),
              HasSubstr("--timeout"));
  EXPECT_THAT(UsageError({"datasets", "--server="}), HasSubstr("--server"));
}

TEST_F(BnnctlArgsTest, HelpWinsOverEverythingElse) {
  const std::string usage = Text({"--help"});
  for (const char* command :
       {"upload",     "append",          "datasets",  "dataset",    "train",
        "job",        "cancel",          "predict",   "acquire",    "snapshots",
        "snapshot",   "delete-snapshot", "export",    "import",     "methods",
        "--server",   "--json",          "--timeout", "--token",    "--tls-ca",
        "--tls-cert", "--tls-key",       "--version", "BNN_SERVER", "BNN_TOKEN",
        "Exit status"}) {
    EXPECT_THAT(usage, HasSubstr(command));
  }
  EXPECT_EQ(Text({"-h"}), usage);
  EXPECT_EQ(Text({"help"}), usage);
  EXPECT_EQ(Text({"--json", "help"}), usage);

  // Every command has its own help, also when its required flags are missing
  // or another flag is wrong.
  const std::string train = Text({"train", "--help"});
  EXPECT_THAT(train, HasSubstr("bnnctl train"));
  EXPECT_THAT(train, HasSubstr("--prior-from-parent"));
  EXPECT_THAT(train, HasSubstr("--epochs"));
  EXPECT_THAT(train, Not(HasSubstr("--quantiles")));
  EXPECT_EQ(Text({"help", "train"}), train);
  EXPECT_EQ(Text({"train", "-h", "--epochs", "0"}), train);
  const std::string predict = Text({"predict", "--help"});
  EXPECT_THAT(predict, HasSubstr("--quantiles"));
  EXPECT_THAT(predict, HasSubstr("standard input"));
  EXPECT_THAT(UsageError({"help", "fly"}),
              HasSubstr("help: unknown command 'fly'"));
}

TEST_F(BnnctlArgsTest, VersionNamesTheLibraryVersionAndTheCommit) {
  const std::string version = Text({"--version"});
  EXPECT_THAT(version, HasSubstr(std::string("bnnctl ") + kLibraryVersion +
                                 " (commit "));
  EXPECT_EQ(version, BnnctlVersion() + "\n");
  EXPECT_EQ(Text({"datasets", "--version"}), version);
  // `dataset ID --version V` is the dataset's version.
  absl::StatusOr<Invocation> dataset =
      Parse({"dataset", "d", "--version", "3"});
  ASSERT_TRUE(dataset.ok()) << dataset.status();
  EXPECT_EQ(std::get<DatasetCommand>(dataset->command).version, int64_t{3});
}

TEST_F(BnnctlArgsTest, ServerAndTokenFromTheEnvironmentUnlessGiven) {
  setenv("BNN_SERVER", "env-host:1", 1);
  setenv("BNN_TOKEN", "env-token", 1);
  absl::StatusOr<Invocation> from_env = Parse({"datasets"});
  ASSERT_TRUE(from_env.ok()) << from_env.status();
  EXPECT_EQ(from_env->global.server, "env-host:1");
  EXPECT_EQ(from_env->global.token, "env-token");

  absl::StatusOr<Invocation> given =
      Parse({"datasets", "--server", "flag-host:2", "--token=flag-token"});
  ASSERT_TRUE(given.ok()) << given.status();
  EXPECT_EQ(given->global.server, "flag-host:2");
  EXPECT_EQ(given->global.token, "flag-token");

  // An empty variable is no setting.
  setenv("BNN_SERVER", "", 1);
  unsetenv("BNN_TOKEN");
  absl::StatusOr<Invocation> empty = Parse({"datasets"});
  ASSERT_TRUE(empty.ok()) << empty.status();
  EXPECT_EQ(empty->global.server, "127.0.0.1:50051");
  EXPECT_EQ(empty->global.token, "");
  EXPECT_THAT(UsageError({"datasets", "--token", ""}),
              HasSubstr("--token: must not be empty"));
}

TEST_F(BnnctlArgsTest, TlsFilesMustExist) {
  const std::string ca = testing::TempDir() + "/bnnctl_args_test_ca.pem";
  std::ofstream(ca) << "not checked here\n";
  absl::StatusOr<Invocation> parsed =
      Parse({"--tls-ca", ca, "datasets", "--tls-cert", ca, "--tls-key", ca});
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  EXPECT_EQ(parsed->global.tls_ca_file, ca);
  EXPECT_EQ(parsed->global.tls_cert_file, ca);
  EXPECT_EQ(parsed->global.tls_key_file, ca);
  EXPECT_THAT(UsageError({"datasets", "--tls-ca", ca + ".missing"}),
              HasSubstr("--tls-ca"));
  EXPECT_THAT(UsageError({"datasets", "--tls-cert", ca}),
              HasSubstr("--tls-cert requires --tls-key"));
  EXPECT_THAT(UsageError({"datasets", "--tls-key", ca}),
              HasSubstr("--tls-key requires --tls-cert"));
  std::remove(ca.c_str());
}

TEST_F(BnnctlArgsTest, CsvPathsMayBeStandardInput) {
  absl::StatusOr<Invocation> parsed =
      Parse({"predict", "--snapshot", "s", "--csv", "-", "--samples", "2"});
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  EXPECT_EQ(std::get<PredictCommand>(parsed->command).csv_path, "-");
  absl::StatusOr<Invocation> upload =
      Parse({"upload", "--name", "n", "--task", "classification", "--csv=-",
             "--target", "y"});
  ASSERT_TRUE(upload.ok()) << upload.status();
  EXPECT_EQ(std::get<UploadCommand>(upload->command).csv_path, "-");
  EXPECT_TRUE(std::get<UploadCommand>(upload->command).classification);
}

TEST_F(BnnctlArgsTest, TokenCreateChecksScopesAndName) {
  absl::StatusOr<Invocation> parsed =
      Parse({"token", "create", "--scopes", "predict,train", "--name", "loop"});
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  const auto* create = std::get_if<TokenCreateCommand>(&parsed->command);
  ASSERT_NE(create, nullptr);
  EXPECT_EQ(create->scopes, "predict,train");
  EXPECT_EQ(create->name, "loop");
  parsed = Parse({"token", "create", "--scopes", "admin"});
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  EXPECT_EQ(std::get<TokenCreateCommand>(parsed->command).name, "");

  EXPECT_THAT(UsageError({"token", "create"}), HasSubstr("--scopes"));
  EXPECT_THAT(UsageError({"token"}), Not(IsEmpty()));
  EXPECT_THAT(UsageError({"token", "delete", "--scopes", "admin"}),
              Not(IsEmpty()));
  EXPECT_THAT(UsageError({"token", "create", "--scopes", "predict,root"}),
              HasSubstr("unknown scope 'root'"));
  EXPECT_THAT(UsageError({"token", "create", "--scopes", "admin", "--name",
                          "has space"}),
              HasSubstr("token name 'has space' may only hold"));
}

TEST_F(BnnctlArgsTest, HealthTakesNoArguments) {
  absl::StatusOr<Invocation> parsed = Parse({"health"});
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  EXPECT_TRUE(std::holds_alternative<HealthCommand>(parsed->command));
  EXPECT_THAT(UsageError({"health", "x"}), Not(IsEmpty()));
}

}  // namespace
}  // namespace bnn::client

namespace bnn::client {
namespace {

absl::StatusOr<Invocation> ParseModels(std::vector<std::string> args) {
  return ParseBnnctlArgs(args);
}

std::string ModelsUsageError(std::vector<std::string> args) {
  absl::StatusOr<Invocation> result = ParseBnnctlArgs(args);
  EXPECT_FALSE(result.ok());
  return result.ok() ? "" : std::string(result.status().message());
}

TEST(BnnctlModelArgsTest, ModelsPublishAliasAndDeleteModel) {
  absl::StatusOr<Invocation> all = ParseModels({"models"});
  ASSERT_TRUE(all.ok()) << all.status();
  EXPECT_EQ(std::get<ModelsCommand>(all->command).name, "");
  absl::StatusOr<Invocation> one = ParseModels({"models", "fraud"});
  ASSERT_TRUE(one.ok()) << one.status();
  EXPECT_EQ(std::get<ModelsCommand>(one->command).name, "fraud");

  absl::StatusOr<Invocation> published =
      ParseModels({"publish", "snap-1", "--model", "fraud", "--alias", "stable",
                   "--alias=canary"});
  ASSERT_TRUE(published.ok()) << published.status();
  const auto& publish = std::get<PublishCommand>(published->command);
  EXPECT_EQ(publish.snapshot_id, "snap-1");
  EXPECT_EQ(publish.model, "fraud");
  EXPECT_THAT(publish.aliases, ::testing::ElementsAre("stable", "canary"));
  EXPECT_THAT(ModelsUsageError({"publish", "snap-1"}),
              ::testing::HasSubstr("--model is required"));

  absl::StatusOr<Invocation> set =
      ParseModels({"alias", "fraud", "stable", "3"});
  ASSERT_TRUE(set.ok()) << set.status();
  const auto& alias = std::get<AliasCommand>(set->command);
  EXPECT_EQ(alias.model, "fraud");
  EXPECT_EQ(alias.alias, "stable");
  EXPECT_EQ(alias.version, 3);
  EXPECT_FALSE(alias.remove);
  absl::StatusOr<Invocation> removed =
      ParseModels({"alias", "fraud", "stable", "--delete"});
  ASSERT_TRUE(removed.ok()) << removed.status();
  EXPECT_TRUE(std::get<AliasCommand>(removed->command).remove);
  EXPECT_THAT(ModelsUsageError({"alias", "fraud", "stable"}),
              ::testing::HasSubstr("needs a VERSION"));
  EXPECT_THAT(ModelsUsageError({"alias", "fraud", "stable", "2", "--delete"}),
              ::testing::HasSubstr("not both"));
  EXPECT_THAT(ModelsUsageError({"alias", "fraud", "stable", "0"}),
              ::testing::HasSubstr("'0' is not a version"));

  absl::StatusOr<Invocation> deleted = ParseModels({"delete-model", "fraud"});
  ASSERT_TRUE(deleted.ok()) << deleted.status();
  EXPECT_EQ(std::get<DeleteModelCommand>(deleted->command).model, "fraud");
}

TEST(BnnctlModelArgsTest, ModelReferencesWhereSnapshotsGo) {
  absl::StatusOr<Invocation> predict =
      ParseModels({"predict", "--model", "fraud@stable", "--csv", "x.csv",
                   "--samples", "8"});
  ASSERT_TRUE(predict.ok()) << predict.status();
  EXPECT_EQ(std::get<PredictCommand>(predict->command).model, "fraud@stable");
  EXPECT_EQ(std::get<PredictCommand>(predict->command).snapshot_id, "");
  absl::StatusOr<Invocation> acquire =
      ParseModels({"acquire", "--model", "fraud:2", "--dataset", "d", "--k",
                   "1", "--heuristic", "random"});
  ASSERT_TRUE(acquire.ok()) << acquire.status();
  EXPECT_EQ(std::get<AcquireCommand>(acquire->command).model, "fraud:2");
  absl::StatusOr<Invocation> exported =
      ParseModels({"export", "--model", "fraud", "--out", "f.bin"});
  ASSERT_TRUE(exported.ok()) << exported.status();
  EXPECT_EQ(std::get<ExportCommand>(exported->command).model, "fraud");

  for (const std::vector<std::string>& args :
       {std::vector<std::string>{"predict", "--csv", "x.csv", "--samples", "8"},
        {"predict", "--snapshot", "s", "--model", "m", "--csv", "x.csv",
         "--samples", "8"},
        {"acquire", "--dataset", "d", "--k", "1", "--heuristic", "random"},
        {"export", "--out", "f.bin"},
        {"export", "--snapshot", "s", "--model", "m", "--out", "f.bin"}}) {
    EXPECT_THAT(ModelsUsageError(args),
                ::testing::HasSubstr(
                    "needs exactly one of --snapshot ID and --model REF"))
        << args[0];
  }
}

TEST(BnnctlModelArgsTest, DeletesWithForce) {
  absl::StatusOr<Invocation> snapshot =
      ParseModels({"delete-snapshot", "snap-1", "--force"});
  ASSERT_TRUE(snapshot.ok()) << snapshot.status();
  EXPECT_TRUE(std::get<DeleteSnapshotCommand>(snapshot->command).force);
  absl::StatusOr<Invocation> unforced =
      ParseModels({"delete-snapshot", "snap-1"});
  ASSERT_TRUE(unforced.ok()) << unforced.status();
  EXPECT_FALSE(std::get<DeleteSnapshotCommand>(unforced->command).force);

  absl::StatusOr<Invocation> dataset =
      ParseModels({"delete-dataset", "cubic", "--force"});
  ASSERT_TRUE(dataset.ok()) << dataset.status();
  EXPECT_EQ(std::get<DeleteDatasetCommand>(dataset->command).dataset_id,
            "cubic");
  EXPECT_TRUE(std::get<DeleteDatasetCommand>(dataset->command).force);
  EXPECT_THAT(ModelsUsageError({"delete-dataset"}),
              ::testing::HasSubstr("DATASET is required"));
}

}  // namespace
}  // namespace bnn::client
