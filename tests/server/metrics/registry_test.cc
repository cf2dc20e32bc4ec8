#include "server/metrics/registry.h"

#include <cmath>
#include <limits>
#include <thread>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace bnn::server {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

TEST(RegistryTest, ExpositionFormat) {
  Registry registry;
  Family<Counter>& requests = registry.AddCounter(
      "test_requests_total", "Requests by rpc and code.", {"rpc", "code"});
  Family<Gauge>& temperature =
      registry.AddGauge("test_temperature", "Current temperature.");
  requests.WithLabels({"Predict", "OK"}).Increment(3);
  requests.WithLabels({"GetJob", "NOT_FOUND"}).Increment();
  temperature.WithLabels({}).Set(-2.5);
  // Series are sorted by label values; families keep definition order.
  EXPECT_EQ(registry.Serialize(),
            "# HELP test_requests_total Requests by rpc and code.\n"
            "# TYPE test_requests_total counter\n"
            "test_requests_total{rpc=\"GetJob\",code=\"NOT_FOUND\"} 1\n"
            "test_requests_total{rpc=\"Predict\",code=\"OK\"} 3\n"
            "# HELP test_temperature Current temperature.\n"
            "# TYPE test_temperature gauge\n"
            "test_temperature -2.5\n");
}

TEST(RegistryTest, UnlabelledFamiliesExportZeroBeforeUse) {
  Registry registry;
  registry.AddCounter("test_events_total", "Events.");
  registry.AddCounter("test_labelled_total", "Labelled.", {"kind"});
  EXPECT_EQ(registry.Serialize(),
            "# HELP test_events_total Events.\n"
            "# TYPE test_events_total counter\n"
            "test_events_total 0\n"
            "# HELP test_labelled_total Labelled.\n"
            "# TYPE test_labelled_total counter\n");
}

TEST(RegistryTest, LabelValuesAndHelpAreEscaped) {
  Registry registry;
  registry
      .AddGauge("test_escape", "Back\\slash and\nnewline \"quoted\".", {"path"})
      .WithLabels({"C:\\dir \"x\"\nnext"})
      .Set(1);
  EXPECT_EQ(registry.Serialize(),
            "# HELP test_escape Back\\\\slash and\\nnewline \"quoted\".\n"
            "# TYPE test_escape gauge\n"
            "test_escape{path=\"C:\\\\dir \\\"x\\\"\\nnext\"} 1\n");
}

TEST(RegistryTest, HistogramBucketsAreCumulative) {
  Registry registry;
  Histogram& latency = registry
                           .AddHistogram("test_latency_seconds", "Latency.",
                                         {"rpc"}, {0.25, 0.5, 2})
                           .WithLabels({"Predict"});
  // A value on a bound counts into that bucket (le = less or equal).
  for (const double v : {0.125, 0.25, 0.375, 1.0, 1.0, 8.0}) {
    latency.Observe(v);
  }
  EXPECT_EQ(registry.Serialize(),
            "# HELP test_latency_seconds Latency.\n"
            "# TYPE test_latency_seconds histogram\n"
            "test_latency_seconds_bucket{rpc=\"Predict\",le=\"0.25\"} 2\n"
            "test_latency_seconds_bucket{rpc=\"Predict\",le=\"0.5\"} 3\n"
            "test_latency_seconds_bucket{rpc=\"Predict\",le=\"2\"} 5\n"
            "test_latency_seconds_bucket{rpc=\"Predict\",le=\"+Inf\"} 6\n"
            "test_latency_seconds_sum{rpc=\"Predict\"} 10.75\n"
            "test_latency_seconds_count{rpc=\"Predict\"} 6\n");
}

TEST(RegistryTest, UnlabelledHistogram) {
  Registry registry;
  registry.AddHistogram("test_sizes", "Sizes.", {}, {10})
      .WithLabels({})
      .Observe(3);
  EXPECT_THAT(registry.Serialize(),
              HasSubstr("test_sizes_bucket{le=\"10\"} 1\n"
                        "test_sizes_bucket{le=\"+Inf\"} 1\n"
                        "test_sizes_sum 3\n"
                        "test_sizes_count 1\n"));
}

TEST(HistogramTest, CollectIsCumulative) {
  Histogram histogram({1, 2});
  histogram.Observe(0.5);
  histogram.Observe(1.5);
  histogram.Observe(1.5);
  histogram.Observe(9);
  const Histogram::Data data = histogram.Collect();
  EXPECT_THAT(data.cumulative_counts, ElementsAre(1, 3, 4));
  EXPECT_DOUBLE_EQ(data.sum, 12.5);
}

TEST(ExponentialBucketsTest, Geometric) {
  EXPECT_THAT(ExponentialBuckets(0.5, 2, 4), ElementsAre(0.5, 1, 2, 4));
}

TEST(FormatValueTest, PrometheusNumbers) {
  EXPECT_EQ(FormatValue(0), "0");
  EXPECT_EQ(FormatValue(12345678), "12345678");  // no 1.23457e+07
  EXPECT_EQ(FormatValue(0.1), "0.1");
  EXPECT_EQ(FormatValue(0.0005), "0.0005");
  EXPECT_EQ(FormatValue(1.0 / 3), "0.3333333333333333");
  EXPECT_EQ(FormatValue(std::numeric_limits<double>::infinity()), "+Inf");
  EXPECT_EQ(FormatValue(-std::numeric_limits<double>::infinity()), "-Inf");
  EXPECT_EQ(FormatValue(std::nan("")), "NaN");
}

TEST(CounterTest, ConcurrentIncrementsAreNotLost) {
  Registry registry;
  Family<Counter>& family =
      registry.AddCounter("test_concurrent_total", "Hits.", {"worker"});
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&family] {
      for (int i = 0; i < 10000; ++i) family.WithLabels({"shared"}).Increment();
    });
  }
  for (std::thread& thread : threads) thread.join();
  EXPECT_EQ(family.WithLabels({"shared"}).value(), 40000);
}

TEST(GaugeTest, GoesUpAndDown) {
  Gauge gauge;
  gauge.Increment(3);
  gauge.Decrement();
  EXPECT_EQ(gauge.value(), 2);
  gauge.Set(-1);
  EXPECT_EQ(gauge.value(), -1);
}

TEST(RegistryDeathTest, RejectsProgrammerErrors) {
  Registry registry;
  registry.AddCounter("test_once_total", "Once.");
  EXPECT_DEATH(registry.AddCounter("test_once_total", "Twice."), "CHECK");
  EXPECT_DEATH(registry.AddGauge("bad-name", "Dash."), "CHECK");
  EXPECT_DEATH(registry.AddHistogram("test_h", "H.", {"le"}, {1}), "CHECK");
  Family<Gauge>& family = registry.AddGauge("test_g", "G.", {"a", "b"});
  EXPECT_DEATH(family.WithLabels({"only one"}), "CHECK");
  EXPECT_DEATH(Counter().Increment(-1), "CHECK");
}

}  // namespace
}  // namespace bnn::server
