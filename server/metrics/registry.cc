#include "server/metrics/registry.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <type_traits>
#include <utility>

#include <absl/strings/ascii.h>
#include <absl/strings/str_cat.h>

#include "bnn/check.h"
#include "bnn/format.h"

namespace bnn::server {
namespace {

// std::atomic<double>::fetch_add is C++20.
void AtomicAdd(std::atomic<double>& target, double delta) {
  double current = target.load(std::memory_order_relaxed);
  while (!target.compare_exchange_weak(current, current + delta,
                                       std::memory_order_relaxed)) {
  }
}

// [a-zA-Z_:][a-zA-Z0-9_:]* for metric names; labels exclude ':'.
bool IsValidName(absl::string_view name, bool allow_colon) {
  if (name.empty()) return false;
  for (size_t i = 0; i < name.size(); ++i) {
    const char c = name[i];
    const bool ok = absl::ascii_isalpha(c) || c == '_' ||
                    (allow_colon && c == ':') ||
                    (i > 0 && absl::ascii_isdigit(c));
    if (!ok) return false;
  }
  return true;
}

// HELP text escapes only backslash and newline.
std::string EscapeHelp(absl::string_view help) {
  std::string out;
  for (const char c : help) {
    if (c == '\\') {
      out += "\\\\";
    } else if (c == '\n') {
      out += "\\n";
    } else {
      out += c;
    }
  }
  return out;
}

void CheckFamilyNames(absl::string_view name,
                      const std::vector<std::string>& label_names,
                      bool histogram) {
  BNN_CHECK(IsValidName(name, /*allow_colon=*/true));
  for (const auto& label : label_names) {
    BNN_CHECK(IsValidName(label, /*allow_colon=*/false) &&
              label.rfind("__", 0) != 0);
    BNN_CHECK(!histogram || label != "le");
  }
}

}  // namespace

void Counter::Increment(double delta) {
  BNN_CHECK(delta >= 0.0);  // counters only go up
  AtomicAdd(value_, delta);
}

void Gauge::Increment(double delta) { AtomicAdd(value_, delta); }

Histogram::Histogram(std::vector<double> bounds)
    : bounds_(std::move(bounds)), counts_(bounds_.size() + 1, 0) {
  for (size_t i = 0; i < bounds_.size(); ++i) {
    BNN_CHECK(std::isfinite(bounds_[i]));
    BNN_CHECK(i == 0 || bounds_[i - 1] < bounds_[i]);
  }
}

void Histogram::Observe(double value) {
  // Bucket i holds values in (bounds_[i-1], bounds_[i]]; the last is +Inf.
  const size_t bucket =
      std::lower_bound(bounds_.begin(), bounds_.end(), value) - bounds_.begin();
  absl::MutexLock lock(&mu_);
  ++counts_[bucket];
  sum_ += value;
}

Histogram::Data Histogram::Collect() const {
  Data data;
  data.bounds = bounds_;
  absl::MutexLock lock(&mu_);
  data.sum = sum_;
  uint64_t running = 0;
  for (const uint64_t count : counts_) {
    running += count;
    data.cumulative_counts.push_back(running);
  }
  return data;
}

std::vector<double> ExponentialBuckets(double start, double factor, int count) {
  BNN_CHECK(start > 0.0 && factor > 1.0);
  std::vector<double> bounds;
  double bound = start;
  for (int i = 0; i < count; ++i) {
    bounds.push_back(bound);
    bound *= factor;
  }
  return bounds;
}

std::string FormatValue(double value) {
  if (std::isnan(value)) return "NaN";
  if (std::isinf(value)) return value > 0 ? "+Inf" : "-Inf";
  return ShortestDouble(value);
}

std::string EscapeLabelValue(absl::string_view value) {
  std::string out;
  out.reserve(value.size());
  for (const char c : value) {
    switch (c) {
      case '\\':
        out += "\\\\";
        break;
      case '"':
        out += "\\\"";
        break;
      case '\n':
        out += "\\n";
        break;
      default:
        out += c;
    }
  }
  return out;
}

FamilyBase::FamilyBase(std::string name, std::string help,
                       std::vector<std::string> label_names)
    : name_(std::move(name)),
      help_(std::move(help)),
      label_names_(std::move(label_names)) {}

void FamilyBase::Serialize(std::string* out) const {
  absl::StrAppend(out, "# HELP ", name_, " ", EscapeHelp(help_), "\n");
  absl::StrAppend(out, "# TYPE ", name_, " ", type(), "\n");
  SerializeSeries(out);
}

std::string FamilyBase::SeriesName(absl::string_view suffix,
                                   const std::vector<std::string>& values,
                                   absl::string_view extra_label,
                                   absl::string_view extra_value) const {
  std::string out = absl::StrCat(name_, suffix);
  if (values.empty() && extra_label.empty()) return out;
  out += '{';
  for (size_t i = 0; i < values.size(); ++i) {
    if (i > 0) out += ',';
    absl::StrAppend(&out, label_names_[i], "=\"", EscapeLabelValue(values[i]),
                    "\"");
  }
  if (!extra_label.empty()) {
    if (!values.empty()) out += ',';
    absl::StrAppend(&out, extra_label, "=\"", extra_value, "\"");
  }
  out += '}';
  return out;
}

template <typename Metric>
Family<Metric>::Family(std::string name, std::string help,
                       std::vector<std::string> label_names,
                       std::vector<double> bounds)
    : FamilyBase(std::move(name), std::move(help), std::move(label_names)),
      bounds_(std::move(bounds)) {}

template <typename Metric>
Metric& Family<Metric>::WithLabels(
    absl::Span<const absl::string_view> label_values) {
  BNN_CHECK_EQ(label_values.size(), label_names_.size());
  std::vector<std::string> key(label_values.begin(), label_values.end());
  absl::MutexLock lock(&mu_);
  std::unique_ptr<Metric>& metric = series_[std::move(key)];
  if (metric == nullptr) {
    if constexpr (std::is_same_v<Metric, Histogram>) {
      metric = std::make_unique<Histogram>(bounds_);
    } else {
      metric = std::make_unique<Metric>();
    }
  }
  return *metric;
}

template <>
absl::string_view Family<Counter>::type() const {
  return "counter";
}
template <>
absl::string_view Family<Gauge>::type() const {
  return "gauge";
}
template <>
absl::string_view Family<Histogram>::type() const {
  return "histogram";
}

template <typename Metric>
void Family<Metric>::SerializeSeries(std::string* out) const {
  absl::MutexLock lock(&mu_);
  for (const auto& [values, metric] : series_) {
    absl::StrAppend(out, SeriesName("", values), " ",
                    FormatValue(metric->value()), "\n");
  }
}

template <>
void Family<Histogram>::SerializeSeries(std::string* out) const {
  absl::MutexLock lock(&mu_);
  for (const auto& [values, histogram] : series_) {
    const Histogram::Data data = histogram->Collect();
    for (size_t i = 0; i <= data.bounds.size(); ++i) {
      const std::string le =
          i < data.bounds.size() ? FormatValue(data.bounds[i]) : "+Inf";
      absl::StrAppend(out, SeriesName("_bucket", values, "le", le), " ",
                      data.cumulative_counts[i], "\n");
    }
    absl::StrAppend(out, SeriesName("_sum", values), " ", FormatValue(data.sum),
                    "\n");
    absl::StrAppend(out, SeriesName("_count", values), " ",
                    data.cumulative_counts.back(), "\n");
  }
}

template class Family<Counter>;
template class Family<Gauge>;
template class Family<Histogram>;

template <typename Metric>
Family<Metric>& Registry::Add(std::unique_ptr<Family<Metric>> family) {
  Family<Metric>& ref = *family;
  absl::MutexLock lock(&mu_);
  for (const auto& existing : families_) {
    BNN_CHECK(existing->name() != ref.name());  // defined twice
  }
  families_.push_back(std::move(family));
  return ref;
}

Family<Counter>& Registry::AddCounter(std::string name, std::string help,
                                      std::vector<std::string> label_names) {
  CheckFamilyNames(name, label_names, /*histogram=*/false);
  const bool unlabelled = label_names.empty();
  Family<Counter>& family = Add(std::make_unique<Family<Counter>>(
      std::move(name), std::move(help), std::move(label_names)));
  if (unlabelled) family.WithLabels({});
  return family;
}

Family<Gauge>& Registry::AddGauge(std::string name, std::string help,
                                  std::vector<std::string> label_names) {
  CheckFamilyNames(name, label_names, /*histogram=*/false);
  const bool unlabelled = label_names.empty();
  Family<Gauge>& family = Add(std::make_unique<Family<Gauge>>(
      std::move(name), std::move(help), std::move(label_names)));
  if (unlabelled) family.WithLabels({});
  return family;
}

Family<Histogram>& Registry::AddHistogram(std::string name, std::string help,
                                          std::vector<std::string> label_names,
                                          std::vector<double> bounds) {
  CheckFamilyNames(name, label_names, /*histogram=*/true);
  const bool unlabelled = label_names.empty();
  Family<Histogram>& family = Add(std::make_unique<Family<Histogram>>(
      std::move(name), std::move(help), std::move(label_names),
      std::move(bounds)));
  if (unlabelled) family.WithLabels({});
  return family;
}

std::string Registry::Serialize() const {
  std::string out;
  absl::MutexLock lock(&mu_);
  for (const auto& family : families_) family->Serialize(&out);
  return out;
}

}  // namespace bnn::server
