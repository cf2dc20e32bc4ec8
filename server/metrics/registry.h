// A small in-process metrics registry rendered in the Prometheus text
// exposition format 0.0.4 (prometheus-cpp is not packaged for Debian 12).
//
// Families are defined once (see server_metrics.h) and live as long as the
// registry; the series of a family are created on first use of a label-value
// combination. Every class here is thread-safe.
#ifndef BNN_SERVER_METRICS_REGISTRY_H_
#define BNN_SERVER_METRICS_REGISTRY_H_

#include <atomic>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include <absl/base/thread_annotations.h>
#include <absl/strings/string_view.h>
#include <absl/synchronization/mutex.h>
#include <absl/types/span.h>

namespace bnn::server {

// A monotonically increasing value.
class Counter {
 public:
  // `delta` must be >= 0.
  void Increment(double delta = 1.0);
  double value() const { return value_.load(std::memory_order_relaxed); }

 private:
  std::atomic<double> value_{0.0};
};

// A value that goes up and down.
class Gauge {
 public:
  void Set(double value) { value_.store(value, std::memory_order_relaxed); }
  void Increment(double delta = 1.0);
  void Decrement(double delta = 1.0) { Increment(-delta); }
  double value() const { return value_.load(std::memory_order_relaxed); }

 private:
  std::atomic<double> value_{0.0};
};

// Observations counted into buckets with fixed upper bounds.
class Histogram {
 public:
  // `bounds` must be strictly increasing and finite; the +Inf bucket is
  // implicit.
  explicit Histogram(std::vector<double> bounds);

  void Observe(double value);

  struct Data {
    std::vector<double> bounds;
    // Cumulative: cumulative_counts[i] observations <= bounds[i]; the last
    // entry (one past bounds) is the total count, i.e. the +Inf bucket.
    std::vector<uint64_t> cumulative_counts;
    double sum = 0.0;
  };
  Data Collect() const;

 private:
  const std::vector<double> bounds_;
  mutable absl::Mutex mu_;
  // Non-cumulative per bucket; bounds_.size() + 1 entries.
  std::vector<uint64_t> counts_ ABSL_GUARDED_BY(mu_);
  double sum_ ABSL_GUARDED_BY(mu_) = 0.0;
};

// `count` bounds start, start*factor, start*factor^2, ...
std::vector<double> ExponentialBuckets(double start, double factor, int count);

// Type-independent part of a family: identity and rendering.
class FamilyBase {
 public:
  FamilyBase(std::string name, std::string help,
             std::vector<std::string> label_names);
  virtual ~FamilyBase() = default;

  const std::string& name() const { return name_; }
  // Appends HELP, TYPE and every series of the family to `out`.
  void Serialize(std::string* out) const;

 protected:
  virtual absl::string_view type() const = 0;
  // Appends the sample lines of every series.
  virtual void SerializeSeries(std::string* out) const = 0;
  // `name{labels}` for the series with `values` plus an optional extra label
  // (the histogram's `le`).
  std::string SeriesName(absl::string_view suffix,
                         const std::vector<std::string>& values,
                         absl::string_view extra_label = {},
                         absl::string_view extra_value = {}) const;

  const std::string name_;
  const std::string help_;
  const std::vector<std::string> label_names_;
};

template <typename Metric>
class Family final : public FamilyBase {
 public:
  // `bounds` is used by histogram families only.
  Family(std::string name, std::string help,
         std::vector<std::string> label_names, std::vector<double> bounds = {});

  // The series for `label_values` (one per label name, in order), created on
  // first use; the reference is valid for the life of the registry.
  Metric& WithLabels(absl::Span<const absl::string_view> label_values);

 private:
  absl::string_view type() const override;
  void SerializeSeries(std::string* out) const override;

  const std::vector<double> bounds_;
  mutable absl::Mutex mu_;
  // Ordered so that the exposition is deterministic.
  std::map<std::vector<std::string>, std::unique_ptr<Metric>> series_
      ABSL_GUARDED_BY(mu_);
};

class Registry {
 public:
  // Defines a family. Names must be valid Prometheus metric and label names
  // and unique within the registry (a CHECK: families are defined in code).
  // A family without labels gets its single series at once, so it is
  // exported (as 0) before first use.
  Family<Counter>& AddCounter(std::string name, std::string help,
                              std::vector<std::string> label_names = {});
  Family<Gauge>& AddGauge(std::string name, std::string help,
                          std::vector<std::string> label_names = {});
  Family<Histogram>& AddHistogram(std::string name, std::string help,
                                  std::vector<std::string> label_names,
                                  std::vector<double> bounds);

  // Every family in definition order, in text format 0.0.4.
  std::string Serialize() const;

 private:
  template <typename Metric>
  Family<Metric>& Add(std::unique_ptr<Family<Metric>> family);

  mutable absl::Mutex mu_;
  std::vector<std::unique_ptr<FamilyBase>> families_ ABSL_GUARDED_BY(mu_);
};

// Prometheus sample value: integers without a fraction, otherwise the
// shortest form that parses back exactly; "+Inf", "-Inf", "NaN".
std::string FormatValue(double value);
// Label value escaping of the text format: backslash, double quote, newline.
std::string EscapeLabelValue(absl::string_view value);

}  // namespace bnn::server

#endif  // BNN_SERVER_METRICS_REGISTRY_H_
