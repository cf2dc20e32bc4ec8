// Feeds the server's exposition to `promtool check metrics`, Prometheus' own
// parser and linter. Registered only when promtool was found at configure
// time (BNN_PROMTOOL_PATH).
#include <fstream>
#include <limits>
#include <stdio.h>
#include <string>
#include <sys/wait.h>

#include <absl/status/status.h>
#include <absl/time/time.h>
#include <gtest/gtest.h>

#include "server/metrics/registry.h"
#include "server/metrics/server_metrics.h"
#include "tests/server/server_test_util.h"

namespace bnn::server {
namespace {

struct CheckResult {
  int exit_code = -1;
  std::string output;
};

CheckResult PromtoolCheck(const std::string& exposition) {
  testutil::TempDir dir;
  const std::string path = dir.path() + "/metrics.txt";
  std::ofstream(path) << exposition;
  const std::string command =
      std::string(BNN_PROMTOOL_PATH) + " check metrics < " + path + " 2>&1";
  CheckResult result;
  FILE* pipe = popen(command.c_str(), "r");
  if (pipe == nullptr) return result;
  char buffer[512];
  while (fgets(buffer, sizeof(buffer), pipe) != nullptr) {
    result.output += buffer;
  }
  const int status = pclose(pipe);
  result.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return result;
}

TEST(PromtoolTest, DetectsAProblem) {
  // The harness itself: an exposition without HELP fails the lint.
  const CheckResult result = PromtoolCheck("test_untyped 1\n");
  EXPECT_NE(result.exit_code, 0) << result.output;
}

TEST(PromtoolTest, ServerMetricsPassTheLinter) {
  ServerMetrics metrics;
  metrics.RecordRpc("Predict", absl::StatusCode::kOk, absl::Milliseconds(3));
  metrics.RecordRpc("GetJob", absl::StatusCode::kNotFound,
                    absl::Microseconds(80));
  metrics.training_jobs("running").Set(1);
  metrics.training_steps("slang").Increment(1234);
  metrics.predict_rows().Increment(1000);
  metrics.datasets().Set(2);
  metrics.snapshots().Set(1);
  const CheckResult result = PromtoolCheck(metrics.registry().Serialize());
  EXPECT_EQ(result.exit_code, 0) << result.output;
  EXPECT_EQ(result.output, "");
}

TEST(PromtoolTest, EscapedLabelsAndSpecialValuesParse) {
  Registry registry;
  registry.AddGauge("test_escaped", "Odd\\help\nlines.", {"path"})
      .WithLabels({"a\\b \"c\"\nd"})
      .Set(std::numeric_limits<double>::infinity());
  registry
      .AddHistogram("test_seconds", "Seconds.", {"rpc"},
                    ExponentialBuckets(0.0005, 2, 16))
      .WithLabels({"x"})
      .Observe(0.3);
  const CheckResult result = PromtoolCheck(registry.Serialize());
  EXPECT_EQ(result.exit_code, 0) << result.output;
}

}  // namespace
}  // namespace bnn::server
