// The server's metrics in Prometheus' data model (prometheus-cpp): a
// prometheus::Registry of families that code updates as things happen, plus
// collectors whose values are read when a scrape asks for them (the process
// and probes of other parts' state, see ProbeCollector). Serialize() renders
// everything in the text exposition format 0.0.4.
#ifndef BNN_SERVER_METRICS_REGISTRY_H_
#define BNN_SERVER_METRICS_REGISTRY_H_

#include <functional>
#include <memory>
#include <prometheus/collectable.h>
#include <prometheus/counter.h>
#include <prometheus/family.h>
#include <prometheus/gauge.h>
#include <prometheus/histogram.h>
#include <prometheus/labels.h>
#include <prometheus/metric_family.h>
#include <prometheus/metric_type.h>
#include <prometheus/registry.h>
#include <string>
#include <vector>

#include <absl/base/thread_annotations.h>
#include <absl/synchronization/mutex.h>

namespace bnn::server {

// The metric types code updates.
using Counter = prometheus::Counter;
using Gauge = prometheus::Gauge;
using Histogram = prometheus::Histogram;

// `count` bucket bounds start, start*factor, start*factor^2, ... (the +Inf
// bucket is implicit). start > 0, factor > 1, count >= 1.
prometheus::Histogram::BucketBoundaries ExponentialBuckets(double start,
                                                           double factor,
                                                           int count);

// Metrics whose values are read from other parts when scraped: queue
// lengths, cache sizes, counts another part keeps. Each family has a
// function returning its samples (one per label set; a family without
// samples is left out, as prometheus-cpp does). Thread-safe; the
// functions run on the scraping thread, so they must be quick and
// thread-safe.
class ProbeCollector final : public prometheus::Collectable {
 public:
  struct Sample {
    prometheus::Labels labels;
    double value = 0.0;
  };
  using Probe = std::function<std::vector<Sample>()>;

  // Defines family `name` (a valid, unique metric name; counters end in
  // _total) of `type` Counter or Gauge, read through `probe`. A counter's
  // probe must never return a smaller value for the same labels.
  void Add(std::string name, std::string help, prometheus::MetricType type,
           Probe probe);
  // A family with one unlabelled sample.
  void AddGauge(std::string name, std::string help,
                std::function<double()> value);
  // Forgets every probe (before the parts they read are destroyed).
  void Clear();

  std::vector<prometheus::MetricFamily> Collect() const override;

 private:
  struct Entry {
    std::string name;
    std::string help;
    prometheus::MetricType type;
    Probe probe;
  };
  mutable absl::Mutex mu_;
  std::vector<Entry> entries_ ABSL_GUARDED_BY(mu_);
};

// Thread-safe.
class MetricsRegistry {
 public:
  MetricsRegistry();

  // Families defined with prometheus::BuildCounter() etc. register here.
  // Names must be unique (the registry throws on a name defined twice;
  // families are defined in code), and help texts must hold no backslash
  // or newline (prometheus-cpp 1.0.1 writes them unescaped).
  prometheus::Registry& families() { return *families_; }
  ProbeCollector& probes() { return *probes_; }

  // Adds a collector (e.g. the process collector) to every scrape; kept
  // alive by the registry.
  void AddCollector(std::shared_ptr<prometheus::Collectable> collector);

  // Every family: the registry's, then each collector's.
  std::vector<prometheus::MetricFamily> Collect() const;
  // Collect() in the text exposition format 0.0.4.
  std::string Serialize() const;

 private:
  const std::shared_ptr<prometheus::Registry> families_;
  const std::shared_ptr<ProbeCollector> probes_;
  mutable absl::Mutex mu_;
  std::vector<std::shared_ptr<prometheus::Collectable>> collectors_
      ABSL_GUARDED_BY(mu_);
};

}  // namespace bnn::server

#endif  // BNN_SERVER_METRICS_REGISTRY_H_
