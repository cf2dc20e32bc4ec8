#include "bnn/data/dataset.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/string_view.h"

#include "bnn/memory.h"
#include "bnn/status.h"

namespace bnn {

absl::string_view TaskToString(Task task) {
  switch (task) {
    case Task::kRegression:
      return "regression";
    case Task::kBinary:
      return "binary";
    case Task::kMulticlass:
      return "multiclass";
  }
  return "unknown";
}

absl::StatusOr<Task> StringToTask(absl::string_view name) {
  for (Task t : {Task::kRegression, Task::kBinary, Task::kMulticlass}) {
    if (name == TaskToString(t)) return t;
  }
  return absl::InvalidArgumentError(
      absl::StrCat("unknown task '", name,
                   "'; known tasks: regression, binary, multiclass"));
}

bool IsClassification(Task task) { return task != Task::kRegression; }

namespace {

absl::Status CheckRanges(const Dataset& data) {
  ColumnRanges ranges(data.num_features, !IsClassification(data.task));
  ranges.AddRows(data.features.data(), data.targets.data(), data.num_rows());
  return ranges.Check();
}

}  // namespace

ColumnRanges::ColumnRanges(int64_t num_features, bool with_target)
    : num_features_(num_features), with_target_(with_target) {}

absl::StatusOr<ColumnRanges> ColumnRanges::FromMinMax(int64_t num_features,
                                                      bool with_target,
                                                      std::vector<double> min,
                                                      std::vector<double> max) {
  ColumnRanges ranges(num_features, with_target);
  const size_t columns = num_features + (with_target ? 1 : 0);
  if (min.size() != max.size() || (!min.empty() && min.size() != columns)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "column ranges have ", min.size(), " minima and ", max.size(),
        " maxima; the dataset has ", columns, " columns"));
  }
  ranges.min_ = std::move(min);
  ranges.max_ = std::move(max);
  return ranges;
}

void ColumnRanges::AddRows(const double* features, const double* targets,
                           int64_t num_rows) {
  if (num_rows <= 0) return;
  const int64_t p = num_features_;
  if (min_.empty()) {
    min_.assign(features, features + p);
    if (with_target_) min_.push_back(targets[0]);
    max_ = min_;
  }
  for (int64_t i = 0; i < num_rows; ++i) {
    const double* row = features + i * p;
    for (int64_t j = 0; j < p; ++j) {
      min_[j] = std::min(min_[j], row[j]);
      max_[j] = std::max(max_[j], row[j]);
    }
  }
  if (with_target_) {
    const auto [lo, hi] = std::minmax_element(targets, targets + num_rows);
    min_[p] = std::min(min_[p], *lo);
    max_[p] = std::max(max_[p], *hi);
  }
}

absl::Status ColumnRanges::Check() const {
  for (size_t j = 0; j < min_.size(); ++j) {
    if (std::isfinite(max_[j] - min_[j])) continue;
    return absl::InvalidArgumentError(absl::StrCat(
        static_cast<int64_t>(j) < num_features_ ? absl::StrCat("feature ", j)
                                                : std::string("target"),
        " spans [", min_[j], ", ", max_[j],
        "]: max - min overflows double precision, so the column cannot be "
        "standardised; rescale it"));
  }
  return absl::OkStatus();
}

absl::Status Dataset::Validate() const {
  if (num_features < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("num_features = ", num_features, " must be >= 1"));
  }
  if (static_cast<int64_t>(features.size()) != num_rows() * num_features) {
    return absl::InvalidArgumentError(
        absl::StrCat("features has ", features.size(), " values; expected ",
                     num_rows(), " rows x ", num_features, " features"));
  }
  if (!feature_names.empty() &&
      static_cast<int64_t>(feature_names.size()) != num_features) {
    return absl::InvalidArgumentError(
        absl::StrCat("feature_names has ", feature_names.size(),
                     " entries; expected ", num_features));
  }
  for (int64_t i = 0; i < num_rows(); ++i) {
    for (int64_t j = 0; j < num_features; ++j) {
      if (!std::isfinite(row(i)[j])) {
        return absl::InvalidArgumentError(absl::StrCat(
            "row ", i, ", feature ", j, " is not finite (", row(i)[j], ")"));
      }
    }
    if (!std::isfinite(targets[i])) {
      return absl::InvalidArgumentError(
          absl::StrCat("row ", i, ": target is not finite (", targets[i], ")"));
    }
  }
  BNN_RETURN_IF_ERROR(CheckRanges(*this));
  if (IsClassification(task)) {
    if (num_classes < 2 || (task == Task::kBinary && num_classes != 2)) {
      return absl::InvalidArgumentError(
          absl::StrCat("num_classes = ", num_classes, " is invalid for task ",
                       TaskToString(task)));
    }
    if (!class_values.empty() &&
        static_cast<int>(class_values.size()) != num_classes) {
      return absl::InvalidArgumentError(
          absl::StrCat("class_values has ", class_values.size(),
                       " entries; expected num_classes = ", num_classes));
    }
    for (int64_t i = 0; i < num_rows(); ++i) {
      const double y = targets[i];
      if (y != std::floor(y) || y < 0 || y >= num_classes) {
        return absl::InvalidArgumentError(
            absl::StrCat("row ", i, ": class index ", y, " is not in [0, ",
                         num_classes, ")"));
      }
    }
  }
  return absl::OkStatus();
}

Dataset Dataset::Subset(const std::vector<int64_t>& indices) const {
  Dataset out;
  out.task = task;
  out.num_features = num_features;
  out.num_classes = num_classes;
  out.class_values = class_values;
  out.feature_names = feature_names;
  out.target_name = target_name;
  out.features.resize(indices.size() * num_features);
  out.targets.resize(indices.size());
  for (size_t k = 0; k < indices.size(); ++k) {
    std::copy_n(row(indices[k]), num_features,
                out.features.data() + k * num_features);
    out.targets[k] = targets[indices[k]];
  }
  return out;
}

namespace {

// "2 features (binary, classes -1, 1)", for schema mismatches.
std::string SchemaOf(const Dataset& data) {
  std::string classes;
  if (data.num_classes != 0 || !data.class_values.empty()) {
    classes =
        absl::StrCat(", ", data.num_classes,
                     " classes: ", absl::StrJoin(data.class_values, ", "));
  }
  return absl::StrCat(data.num_features, " features (", TaskToString(data.task),
                      classes, ")");
}

}  // namespace

absl::Status Dataset::CheckSameSchema(const Dataset& other) const {
  if (other.num_features != num_features || other.task != task ||
      other.num_classes != num_classes || other.class_values != class_values) {
    return absl::InvalidArgumentError(
        absl::StrCat("schema mismatch: appending ", SchemaOf(other), " to ",
                     SchemaOf(*this)));
  }
  return absl::OkStatus();
}

absl::Status Dataset::Append(const Dataset& other) {
  BNN_RETURN_IF_ERROR(CheckSameSchema(other));
  features.insert(features.end(), other.features.begin(), other.features.end());
  targets.insert(targets.end(), other.targets.begin(), other.targets.end());
  return absl::OkStatus();
}

int64_t DatasetBytes(int64_t num_rows, int64_t num_features) {
  return MulBytes({num_rows, num_features + 1, sizeof(double)});
}

absl::Status EncodeClassLabels(Dataset* dataset) {
  std::vector<double> values = dataset->targets;
  for (size_t i = 0; i < values.size(); ++i) {
    if (!std::isfinite(values[i]) || values[i] != std::floor(values[i])) {
      return absl::InvalidArgumentError(absl::StrCat(
          "row ", i, ": class label ", values[i], " is not an integer"));
    }
  }
  std::sort(values.begin(), values.end());
  values.erase(std::unique(values.begin(), values.end()), values.end());
  if (values.size() < 2) {
    return absl::InvalidArgumentError(
        absl::StrCat("classification needs at least 2 distinct labels; found ",
                     values.size()));
  }
  for (double& y : dataset->targets) {
    y = static_cast<double>(ClassIndex(values, y));
  }
  dataset->num_classes = static_cast<int>(values.size());
  dataset->class_values = std::move(values);
  dataset->task = dataset->num_classes == 2 ? Task::kBinary : Task::kMulticlass;
  return absl::OkStatus();
}

int64_t ClassIndex(absl::Span<const double> class_values, double label) {
  const auto match =
      std::lower_bound(class_values.begin(), class_values.end(), label);
  if (match == class_values.end() || *match != label) return -1;
  return match - class_values.begin();
}

}  // namespace bnn
