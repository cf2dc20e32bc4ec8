#include "server/metrics/registry.h"

#include <prometheus/client_metric.h>
#include <prometheus/text_serializer.h>
#include <utility>

#include "bnn/check.h"

namespace bnn::server {

prometheus::Histogram::BucketBoundaries ExponentialBuckets(double start,
                                                           double factor,
                                                           int count) {
  BNN_CHECK(start > 0.0 && factor > 1.0 && count >= 1);
  prometheus::Histogram::BucketBoundaries bounds;
  double bound = start;
  for (int i = 0; i < count; ++i) {
    bounds.push_back(bound);
    bound *= factor;
  }
  return bounds;
}

void ProbeCollector::Add(std::string name, std::string help,
                         prometheus::MetricType type, Probe probe) {
  BNN_CHECK(type == prometheus::MetricType::Counter ||
            type == prometheus::MetricType::Gauge);
  absl::MutexLock lock(&mu_);
  for (const Entry& entry : entries_) BNN_CHECK(entry.name != name);
  entries_.push_back(
      Entry{std::move(name), std::move(help), type, std::move(probe)});
}

void ProbeCollector::AddGauge(std::string name, std::string help,
                              std::function<double()> value) {
  Add(std::move(name), std::move(help), prometheus::MetricType::Gauge,
      [value = std::move(value)] {
        return std::vector<Sample>{Sample{{}, value()}};
      });
}

void ProbeCollector::Clear() {
  absl::MutexLock lock(&mu_);
  entries_.clear();
}

std::vector<prometheus::MetricFamily> ProbeCollector::Collect() const {
  std::vector<prometheus::MetricFamily> families;
  absl::MutexLock lock(&mu_);
  for (const Entry& entry : entries_) {
    prometheus::MetricFamily family;
    family.name = entry.name;
    family.help = entry.help;
    family.type = entry.type;
    for (const Sample& sample : entry.probe()) {
      prometheus::ClientMetric metric;
      for (const auto& [name, value] : sample.labels) {
        metric.label.push_back({name, value});
      }
      if (entry.type == prometheus::MetricType::Counter) {
        metric.counter.value = sample.value;
      } else {
        metric.gauge.value = sample.value;
      }
      family.metric.push_back(std::move(metric));
    }
    // As prometheus-cpp does: a family without samples is left out.
    if (!family.metric.empty()) families.push_back(std::move(family));
  }
  return families;
}

MetricsRegistry::MetricsRegistry()
    : families_(std::make_shared<prometheus::Registry>(
          prometheus::Registry::InsertBehavior::Throw)),
      probes_(std::make_shared<ProbeCollector>()) {}

void MetricsRegistry::AddCollector(
    std::shared_ptr<prometheus::Collectable> collector) {
  absl::MutexLock lock(&mu_);
  collectors_.push_back(std::move(collector));
}

std::vector<prometheus::MetricFamily> MetricsRegistry::Collect() const {
  std::vector<prometheus::MetricFamily> families = families_->Collect();
  std::vector<prometheus::MetricFamily> probed = probes_->Collect();
  families.insert(families.end(), std::make_move_iterator(probed.begin()),
                  std::make_move_iterator(probed.end()));
  absl::MutexLock lock(&mu_);
  for (const auto& collector : collectors_) {
    std::vector<prometheus::MetricFamily> more = collector->Collect();
    families.insert(families.end(), std::make_move_iterator(more.begin()),
                    std::make_move_iterator(more.end()));
  }
  return families;
}

std::string MetricsRegistry::Serialize() const {
  return prometheus::TextSerializer().Serialize(Collect());
}

}  // namespace bnn::server
