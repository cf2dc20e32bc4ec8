#include "server/metrics/registry.h"

#include <memory>
#include <prometheus/client_metric.h>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace bnn::server {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::Not;

TEST(RegistryTest, ExponentialBuckets) {
  EXPECT_THAT(ExponentialBuckets(0.5, 2, 4), ElementsAre(0.5, 1, 2, 4));
  EXPECT_THAT(ExponentialBuckets(1, 10, 1), ElementsAre(1));
}

TEST(RegistryTest, SerializesFamiliesInTheTextFormat) {
  MetricsRegistry registry;
  prometheus::BuildCounter()
      .Name("test_requests_total")
      .Help("Requests.")
      .Register(registry.families())
      .Add({{"rpc", "Predict"}, {"code", "OK"}})
      .Increment(3);
  prometheus::BuildGauge()
      .Name("test_temperature")
      .Help("Temperature.")
      .Register(registry.families())
      .Add({})
      .Set(-2.5);
  const std::string text = registry.Serialize();
  EXPECT_THAT(text, HasSubstr("# HELP test_requests_total Requests.\n"
                              "# TYPE test_requests_total counter\n"
                              "test_requests_total{code=\"OK\",rpc="
                              "\"Predict\"} 3\n"));
  EXPECT_THAT(text, HasSubstr("test_temperature -2.5\n"));
}

TEST(RegistryTest, ProbesAreReadAtEachScrape) {
  MetricsRegistry registry;
  double value = 1;
  registry.probes().AddGauge("test_probe", "A probe.", [&] { return value; });
  registry.probes().Add(
      "test_lookups_total", "Lookups.", prometheus::MetricType::Counter, [] {
        return std::vector<ProbeCollector::Sample>{{{{"result", "hit"}}, 4},
                                                   {{{"result", "miss"}}, 1}};
      });
  // Families without samples are left out, as prometheus-cpp does.
  registry.probes().Add("test_empty", "Nothing.", prometheus::MetricType::Gauge,
                        [] { return std::vector<ProbeCollector::Sample>{}; });
  EXPECT_THAT(registry.Serialize(), HasSubstr("test_probe 1\n"));
  value = 7;
  const std::string text = registry.Serialize();
  EXPECT_THAT(text, HasSubstr("test_probe 7\n"));
  EXPECT_THAT(text, HasSubstr("# TYPE test_lookups_total counter\n"
                              "test_lookups_total{result=\"hit\"} 4\n"
                              "test_lookups_total{result=\"miss\"} 1\n"));
  EXPECT_THAT(text, Not(HasSubstr("test_empty")));
  registry.probes().Clear();
  EXPECT_THAT(registry.Serialize(), Not(HasSubstr("test_probe")));
}

class FixedCollector : public prometheus::Collectable {
 public:
  std::vector<prometheus::MetricFamily> Collect() const override {
    prometheus::MetricFamily family;
    family.name = "test_collected";
    family.help = "Collected.";
    family.type = prometheus::MetricType::Gauge;
    family.metric.emplace_back();
    family.metric.back().gauge.value = 42;
    return {family};
  }
};

TEST(RegistryTest, CollectorsJoinTheScrape) {
  MetricsRegistry registry;
  registry.AddCollector(std::make_shared<FixedCollector>());
  EXPECT_THAT(registry.Serialize(), HasSubstr("test_collected 42\n"));
}

}  // namespace
}  // namespace bnn::server
