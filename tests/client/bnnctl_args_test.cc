#include "client/bnnctl_args.h"

#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace bnn::client {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;
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

TEST(BnnctlArgsTest, UploadWithDefaultsForGlobalFlags) {
  absl::StatusOr<Invocation> parsed =
      Parse({"upload", "--name", "cubic", "--task", "regression", "--csv",
             "data.csv", "--target", "y"});
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  EXPECT_EQ(parsed->global.server, "127.0.0.1:50051");
  EXPECT_FALSE(parsed->global.json);
  EXPECT_EQ(parsed->global.timeout_seconds, 30.0);
  const auto* upload = std::get_if<UploadCommand>(&parsed->command);
  ASSERT_NE(upload, nullptr);
  EXPECT_EQ(upload->name, "cubic");
  EXPECT_FALSE(upload->classification);
  EXPECT_EQ(upload->csv_path, "data.csv");
  EXPECT_EQ(upload->target, "y");
}

TEST(BnnctlArgsTest, GlobalFlagsBeforeOrAfterTheCommandAndEqualsForm) {
  absl::StatusOr<Invocation> parsed =
      Parse({"--server=host:7", "datasets", "--json", "--timeout", "2.5"});
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  EXPECT_EQ(parsed->global.server, "host:7");
  EXPECT_TRUE(parsed->global.json);
  EXPECT_EQ(parsed->global.timeout_seconds, 2.5);
  EXPECT_TRUE(std::holds_alternative<DatasetsCommand>(parsed->command));
}

TEST(BnnctlArgsTest, TrainParsesLayersActivationsSeedAndParams) {
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

TEST(BnnctlArgsTest, TrainHiddenNoneMeansNoHiddenLayer) {
  absl::StatusOr<Invocation> parsed =
      Parse({"train", "--dataset", "d", "--method", "slang", "--hidden", "none",
             "--epochs", "1"});
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  const auto& train = std::get<TrainCommand>(parsed->command);
  EXPECT_THAT(train.hidden_sizes, IsEmpty());
  EXPECT_THAT(train.activations, IsEmpty());
  EXPECT_FALSE(train.seed.has_value());
}

TEST(BnnctlArgsTest, TrainErrorsNameTheFlag) {
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
              HasSubstr("--epochs must be >= 1"));
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
              HasSubstr("--epochs given more than once"));
}

TEST(BnnctlArgsTest, SeedAcceptsTheFullUnsignedRange) {
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

TEST(BnnctlArgsTest, PredictTargetAndSampleChecks) {
  absl::StatusOr<Invocation> parsed =
      Parse({"predict", "--snapshot", "s", "--csv", "x.csv", "--samples", "8",
             "--target", "y"});
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  EXPECT_EQ(std::get<PredictCommand>(parsed->command).target, "y");

  EXPECT_THAT(UsageError({"predict", "--snapshot", "s", "--csv", "x.csv"}),
              HasSubstr("--samples"));
  EXPECT_THAT(UsageError({"predict", "--snapshot", "s", "--csv", "x.csv",
                          "--samples", "0"}),
              HasSubstr("--samples must be >= 1"));
  EXPECT_THAT(UsageError({"predict", "--snapshot", "", "--csv", "x.csv",
                          "--samples", "1"}),
              HasSubstr("--snapshot must not be empty"));
}

TEST(BnnctlArgsTest, JobTakesOneIdAndOptionalWait) {
  absl::StatusOr<Invocation> parsed =
      Parse({"job", "j-1", "--wait", "--wait-timeout", "90"});
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  const auto& job = std::get<JobCommand>(parsed->command);
  EXPECT_EQ(job.job_id, "j-1");
  EXPECT_TRUE(job.wait);
  EXPECT_EQ(job.wait_timeout_seconds, 90.0);

  EXPECT_THAT(UsageError({"job"}), HasSubstr("JOB_ID"));
  EXPECT_THAT(UsageError({"job", "a", "b"}), HasSubstr("JOB_ID, got 2"));
  EXPECT_THAT(UsageError({"job", "a", "--wait-timeout", "5"}),
              HasSubstr("--wait-timeout needs --wait"));
  EXPECT_THAT(UsageError({"job", "a", "--wait=yes"}),
              HasSubstr("--wait takes no value"));
}

TEST(BnnctlArgsTest, IdCommands) {
  absl::StatusOr<Invocation> cancel = Parse({"cancel", "j-2"});
  ASSERT_TRUE(cancel.ok()) << cancel.status();
  EXPECT_EQ(std::get<CancelCommand>(cancel->command).job_id, "j-2");
  absl::StatusOr<Invocation> dataset = Parse({"--json", "dataset", "d-3"});
  ASSERT_TRUE(dataset.ok()) << dataset.status();
  EXPECT_EQ(std::get<DatasetCommand>(dataset->command).dataset_id, "d-3");
  EXPECT_THAT(UsageError({"methods", "extra"}),
              HasSubstr("takes no positional argument, got 'extra'"));
}

TEST(BnnctlArgsTest, UsageErrorsNameTheFlagOrCommand) {
  EXPECT_THAT(UsageError({}), HasSubstr("missing command"));
  EXPECT_THAT(UsageError({"fly"}), HasSubstr("unknown command 'fly'"));
  EXPECT_THAT(UsageError({"datasets", "--verbose"}),
              HasSubstr("unknown flag --verbose for 'datasets'"));
  EXPECT_THAT(UsageError({"--csv", "x", "upload"}),
              HasSubstr("unknown flag --csv before the command"));
  EXPECT_THAT(UsageError({"datasets", "-v"}), HasSubstr("unknown flag -v"));
  EXPECT_THAT(UsageError({"upload", "--name", "n", "--task", "regression",
                          "--target", "y", "--csv"}),
              HasSubstr("--csv needs a value"));
  EXPECT_THAT(UsageError({"upload", "--name", "--task", "regression"}),
              HasSubstr("--name needs a value"));
  EXPECT_THAT(UsageError({"upload", "--name", "n", "--task", "ordinal", "--csv",
                          "c", "--target", "y"}),
              HasSubstr("--task must be regression or classification"));
  EXPECT_THAT(UsageError({"upload", "--task", "regression", "--csv", "c",
                          "--target", "y"}),
              HasSubstr("needs the flag --name"));
  EXPECT_THAT(UsageError({"datasets", "--timeout", "0"}),
              HasSubstr("--timeout"));
  EXPECT_THAT(UsageError({"datasets", "--timeout", "soon"}),
              HasSubstr("--timeout"));
  EXPECT_THAT(UsageError({"datasets", "--server="}), HasSubstr("--server"));
}

TEST(BnnctlArgsTest, HelpWinsOverEverythingElse) {
  for (const std::vector<std::string>& args :
       std::vector<std::vector<std::string>>{
           {"help"}, {"--help"}, {"-h"}, {"train", "--help"}}) {
    absl::StatusOr<Invocation> parsed = Parse(args);
    ASSERT_TRUE(parsed.ok()) << parsed.status();
    EXPECT_TRUE(std::holds_alternative<HelpCommand>(parsed->command));
  }
  EXPECT_THAT(std::string(BnnctlUsage()), HasSubstr("predict"));
}

}  // namespace
}  // namespace bnn::client
