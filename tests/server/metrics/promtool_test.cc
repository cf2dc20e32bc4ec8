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
  metrics.store_bytes("datasets").Set(4096);
  metrics.RecordInference("Predict", "slang", "", absl::Milliseconds(12), 64);
  metrics.RecordInference("Acquire", "vogn", "my model", absl::Milliseconds(40),
                          32);
  metrics.RecordComputeQueueWait("Predict", absl::Microseconds(300));
  metrics.JobStarted("job-1", "slang");
  metrics.JobLoss("job-1", 0.25);
  metrics.JobStarted("job-2", "bbb");
  metrics.JobFinished("job-2", "succeeded");
  metrics.SetComputeQueueSource([] { return int64_t{3}; });
  metrics.SetPredictorCacheSource([] {
    return ServerMetrics::PredictorCacheStats{2, 1 << 20, 5, 2};
  });
  // Every family has a sample (so that each is linted).
  const std::string exposition = metrics.registry().Serialize();
  for (const char* family :
       {"bnn_inference_seconds_bucket", "bnn_inference_samples_total",
        "bnn_compute_queue_wait_seconds_bucket", "bnn_compute_queue_length",
        "bnn_training_loss", "bnn_training_checkpoint_age_seconds",
        "bnn_training_job_duration_seconds_bucket", "bnn_store_bytes",
        "bnn_predictor_cache_bytes", "bnn_predictor_cache_lookups_total",
        "process_cpu_seconds_total", "process_resident_memory_bytes",
        "process_open_fds", "process_start_time_seconds"}) {
    EXPECT_NE(exposition.find(std::string(family)), std::string::npos)
        << family;
  }
  const CheckResult result = PromtoolCheck(exposition);
  EXPECT_EQ(result.exit_code, 0) << result.output;
  EXPECT_EQ(result.output, "");
}

TEST(PromtoolTest, EscapedLabelsAndSpecialValuesParse) {
  MetricsRegistry registry;
  prometheus::BuildGauge()
      .Name("test_escaped")
      // (prometheus-cpp 1.0.1 writes HELP text unescaped: help strings are
      // code's and hold no backslash or newline.)
      .Help("Odd \"help\".")
      .Register(registry.families())
      .Add({{"path", "a\\b \"c\"\nd"}})
      .Set(std::numeric_limits<double>::infinity());
  prometheus::BuildHistogram()
      .Name("test_seconds")
      .Help("Seconds.")
      .Register(registry.families())
      .Add({{"rpc", "x"}}, ExponentialBuckets(0.0005, 2, 16))
      .Observe(0.3);
  const CheckResult result = PromtoolCheck(registry.Serialize());
  EXPECT_EQ(result.exit_code, 0) << result.output;
}

}  // namespace
}  // namespace bnn::server
