#include "bnn/data/standardizer.h"

#include <cmath>

#include "absl/strings/str_cat.h"

namespace bnn {
namespace {

// Below this a column is treated as constant (std set to 1).
constexpr double kMinStd = 1e-12;

}  // namespace

void Standardization::TransformRow(double* row) const {
  for (size_t j = 0; j < feature_mean.size(); ++j) {
    row[j] = (row[j] - feature_mean[j]) / feature_std[j];
  }
}

absl::Status Standardization::Apply(Dataset* dataset) const {
  if (static_cast<int64_t>(feature_mean.size()) != dataset->num_features) {
    return absl::InvalidArgumentError(
        absl::StrCat("standardisation has ", feature_mean.size(),
                     " features; dataset has ", dataset->num_features));
  }
  for (int64_t i = 0; i < dataset->num_rows(); ++i) {
    TransformRow(dataset->features.data() + i * dataset->num_features);
  }
  if (!IsClassification(dataset->task)) {
    for (double& y : dataset->targets) y = (y - target_mean) / target_std;
  }
  return absl::OkStatus();
}

Standardization FitStandardization(const Dataset& train, bool features,
                                   bool targets) {
  Standardization s;
  const int64_t p = train.num_features;
  const int64_t n = train.num_rows();
  s.feature_mean.assign(p, 0.0);
  s.feature_std.assign(p, 1.0);
  if (features && n > 0) {
    for (int64_t j = 0; j < p; ++j) {
      double mean = 0;
      for (int64_t i = 0; i < n; ++i) mean += train.row(i)[j];
      mean /= n;
      double var = 0;
      for (int64_t i = 0; i < n; ++i) {
        const double r = train.row(i)[j] - mean;
        var += r * r;
      }
      const double sd = std::sqrt(var / n);
      s.feature_mean[j] = mean;
      s.feature_std[j] = sd > kMinStd ? sd : 1.0;
    }
  }
  if (targets && n > 0 && !IsClassification(train.task)) {
    double mean = 0;
    for (double y : train.targets) mean += y;
    mean /= n;
    double var = 0;
    for (double y : train.targets) var += (y - mean) * (y - mean);
    const double sd = std::sqrt(var / n);
    s.target_mean = mean;
    s.target_std = sd > kMinStd ? sd : 1.0;
  }
  return s;
}

}  // namespace bnn
