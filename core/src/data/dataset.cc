#include "bnn/data/dataset.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "absl/strings/str_cat.h"
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

absl::Status RangeError(absl::string_view column, double lo, double hi) {
  return absl::InvalidArgumentError(absl::StrCat(
      column, " spans [", lo, ", ", hi,
      "]: max - min overflows double precision, so the column cannot be "
      "standardised; rescale it"));
}

// Standardisation (standardizer.h) subtracts the mean, which lies between
// min and max, so it stays finite exactly when every column's max - min
// does. Values are finite (checked before).
absl::Status CheckRanges(const Dataset& data) {
  const int64_t n = data.num_rows();
  if (n == 0) return absl::OkStatus();
  std::vector<double> lo(data.row(0), data.row(0) + data.num_features);
  std::vector<double> hi = lo;
  for (int64_t i = 1; i < n; ++i) {
    const double* row = data.row(i);
    for (int64_t j = 0; j < data.num_features; ++j) {
      lo[j] = std::min(lo[j], row[j]);
      hi[j] = std::max(hi[j], row[j]);
    }
  }
  for (int64_t j = 0; j < data.num_features; ++j) {
    if (!std::isfinite(hi[j] - lo[j])) {
      return RangeError(absl::StrCat("feature ", j), lo[j], hi[j]);
    }
  }
  if (!IsClassification(data.task)) {
    const auto [min, max] =
        std::minmax_element(data.targets.begin(), data.targets.end());
    if (!std::isfinite(*max - *min)) return RangeError("target", *min, *max);
  }
  return absl::OkStatus();
}

}  // namespace

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

absl::Status Dataset::CheckSameSchema(const Dataset& other) const {
  if (other.num_features != num_features || other.task != task ||
      other.num_classes != num_classes || other.class_values != class_values) {
    return absl::InvalidArgumentError(
        absl::StrCat("schema mismatch: appending ", other.num_features,
                     " features (", TaskToString(other.task), ") to ",
                     num_features, " features (", TaskToString(task), ")"));
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
