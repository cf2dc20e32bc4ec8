#include "server/metrics/server_metrics.h"

#include <optional>
#include <prometheus/client_metric.h>
#include <prometheus/metric_family.h>
#include <string>
#include <vector>

#include <absl/strings/str_cat.h>
#include <absl/time/clock.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace bnn::server {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

// The sample of family `name` with exactly `labels` (a histogram's count),
// or nullopt.
std::optional<double> Sample(const ServerMetrics& metrics,
                             const std::string& name,
                             const prometheus::Labels& labels = {}) {
  for (const prometheus::MetricFamily& family : metrics.registry().Collect()) {
    if (family.name != name) continue;
    for (const prometheus::ClientMetric& metric : family.metric) {
      prometheus::Labels found;
      for (const auto& label : metric.label) found[label.name] = label.value;
      if (found != labels) continue;
      switch (family.type) {
        case prometheus::MetricType::Counter:
          return metric.counter.value;
        case prometheus::MetricType::Gauge:
          return metric.gauge.value;
        case prometheus::MetricType::Histogram:
          return static_cast<double>(metric.histogram.sample_count);
        default:
          return std::nullopt;
      }
    }
  }
  return std::nullopt;
}

TEST(ServerMetricsTest, RpcsByMethodAndCode) {
  ServerMetrics metrics;
  metrics.RecordRpc("GetJob", absl::StatusCode::kNotFound,
                    absl::Milliseconds(2));
  metrics.RecordRpc("GetJob", absl::StatusCode::kOk, absl::Milliseconds(1));
  metrics.RecordRpc("GetJob", absl::StatusCode::kOk, absl::Milliseconds(1));
  EXPECT_EQ(Sample(metrics, "bnn_rpc_requests_total",
                   {{"rpc", "GetJob"}, {"code", "OK"}}),
            2);
  EXPECT_EQ(Sample(metrics, "bnn_rpc_requests_total",
                   {{"rpc", "GetJob"}, {"code", "NOT_FOUND"}}),
            1);
  EXPECT_EQ(Sample(metrics, "bnn_rpc_latency_seconds", {{"rpc", "GetJob"}}), 3);
  EXPECT_THAT(metrics.registry().Serialize(),
              HasSubstr("bnn_build_info{version=\"0.1.0\"} 1\n"));
}

TEST(ServerMetricsTest, ModelLabelsAreABoundedSet) {
  ServerMetrics metrics;
  EXPECT_EQ(metrics.ModelLabel(""), ServerMetrics::kUnnamedModel);
  for (int i = 0; i < ServerMetrics::kMaxModelLabels; ++i) {
    const std::string name = absl::StrCat("model-", i);
    EXPECT_EQ(metrics.ModelLabel(name), name);
  }
  EXPECT_EQ(metrics.ModelLabel("one-too-many"), ServerMetrics::kOtherModel);
  // Names seen before keep their label.
  EXPECT_EQ(metrics.ModelLabel("model-0"), "model-0");
  EXPECT_EQ(metrics.ModelLabel(""), ServerMetrics::kUnnamedModel);
}

TEST(ServerMetricsTest, InferenceByRpcMethodAndModel) {
  ServerMetrics metrics;
  metrics.RecordInference("Predict", "slang", "", absl::Milliseconds(5), 64);
  metrics.RecordInference("Predict", "slang", "", absl::Milliseconds(7), 0);
  metrics.RecordInference("Acquire", "vogn", "prices", absl::Milliseconds(30),
                          16);
  const prometheus::Labels predict = {
      {"rpc", "Predict"}, {"method", "slang"}, {"model", "unnamed"}};
  EXPECT_EQ(Sample(metrics, "bnn_inference_seconds", predict), 2);
  EXPECT_EQ(Sample(metrics, "bnn_inference_samples_total", predict), 64);
  EXPECT_EQ(
      Sample(metrics, "bnn_inference_samples_total",
             {{"rpc", "Acquire"}, {"method", "vogn"}, {"model", "prices"}}),
      16);
  metrics.RecordComputeQueueWait("Predict", absl::Milliseconds(3));
  EXPECT_EQ(
      Sample(metrics, "bnn_compute_queue_wait_seconds", {{"rpc", "Predict"}}),
      1);
}

TEST(ServerMetricsTest, RunningJobsReportLossAndCheckpointAgeByMethod) {
  ServerMetrics metrics;
  metrics.JobStarted("job-a", "slang");
  metrics.JobStarted("job-b", "slang");
  metrics.JobStarted("job-c", "vogn");
  EXPECT_EQ(Sample(metrics, "bnn_training_loss", {{"method", "slang"}}),
            std::nullopt);
  metrics.JobLoss("job-a", 3.0);
  metrics.JobLoss("job-b", 2.0);
  EXPECT_EQ(Sample(metrics, "bnn_training_loss", {{"method", "slang"}}), 2.0);
  metrics.JobLoss("job-a", 1.5);
  EXPECT_EQ(Sample(metrics, "bnn_training_loss", {{"method", "slang"}}), 1.5);
  metrics.JobLoss("unknown", 9.0);  // ignored

  // The oldest of the method's running jobs: job-b never checkpointed.
  absl::SleepFor(absl::Milliseconds(50));
  metrics.JobCheckpointed("job-a", absl::Now());
  const std::optional<double> age = Sample(
      metrics, "bnn_training_checkpoint_age_seconds", {{"method", "slang"}});
  ASSERT_TRUE(age.has_value());
  EXPECT_GE(*age, 0.05);
  metrics.JobFinished("job-b", "succeeded");
  EXPECT_LT(*Sample(metrics, "bnn_training_checkpoint_age_seconds",
                    {{"method", "slang"}}),
            0.05);

  EXPECT_EQ(Sample(metrics, "bnn_training_job_duration_seconds",
                   {{"method", "slang"}, {"state", "succeeded"}}),
            1);
  // No final state recorded: no observation, but no longer running.
  metrics.JobFinished("job-c", "");
  EXPECT_EQ(Sample(metrics, "bnn_training_checkpoint_age_seconds",
                   {{"method", "vogn"}}),
            std::nullopt);
  metrics.JobFinished("job-a", "failed");
  EXPECT_THAT(metrics.registry().Serialize(),
              Not(HasSubstr("bnn_training_loss{")));
  EXPECT_EQ(Sample(metrics, "bnn_training_job_duration_seconds",
                   {{"method", "slang"}, {"state", "failed"}}),
            1);
}

TEST(ServerMetricsTest, SourcesAreReadWhenScraped) {
  ServerMetrics metrics;
  EXPECT_EQ(Sample(metrics, "bnn_compute_queue_length"), std::nullopt);
  int64_t queued = 2;
  metrics.SetComputeQueueSource([&queued] { return queued; });
  metrics.SetPredictorCacheSource([] {
    ServerMetrics::PredictorCacheStats stats;
    stats.predictors = 3;
    stats.sample_bytes = 1000;
    stats.hits = 7;
    stats.misses = 4;
    return stats;
  });
  EXPECT_EQ(Sample(metrics, "bnn_compute_queue_length"), 2);
  queued = 5;
  EXPECT_EQ(Sample(metrics, "bnn_compute_queue_length"), 5);
  EXPECT_EQ(Sample(metrics, "bnn_predictor_cache_predictors"), 3);
  EXPECT_EQ(Sample(metrics, "bnn_predictor_cache_bytes"), 1000);
  EXPECT_EQ(
      Sample(metrics, "bnn_predictor_cache_lookups_total", {{"result", "hit"}}),
      7);
  EXPECT_EQ(Sample(metrics, "bnn_predictor_cache_lookups_total",
                   {{"result", "miss"}}),
            4);
  metrics.ClearSources();
  EXPECT_EQ(Sample(metrics, "bnn_compute_queue_length"), std::nullopt);
  EXPECT_EQ(Sample(metrics, "bnn_predictor_cache_bytes"), std::nullopt);
}

TEST(ServerMetricsTest, ExportsTheProcessMetrics) {
  ServerMetrics metrics;
  EXPECT_GT(*Sample(metrics, "process_resident_memory_bytes"), 0);
  EXPECT_GT(*Sample(metrics, "process_start_time_seconds"), 0);
}

}  // namespace
}  // namespace bnn::server
