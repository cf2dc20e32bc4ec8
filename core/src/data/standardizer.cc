#include "bnn/data/standardizer.h"

#include <algorithm>
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

namespace {

struct Moments {
  double mean = 0.0;
  double sd = 0.0;  // population standard deviation
};

// Mean and standard deviation of value(0..n-1), n >= 1. The values are
// scaled by a power of two that brings the largest magnitude into [1, 2), so
// neither the sum nor the squared deviations overflow for any finite values
// whose range max - min is finite (Dataset::Validate), e.g. y near +-1e308.
// Scaling by a power of two is exact, so the result is bit for bit that of
// the plain formulas whenever those do not overflow.
template <typename Value>
Moments ColumnMoments(int64_t n, const Value& value) {
  double largest = 0;
  for (int64_t i = 0; i < n; ++i) {
    largest = std::max(largest, std::abs(value(i)));
  }
  const int exponent = largest > 0 ? std::ilogb(largest) : 0;
  const double down = std::ldexp(1.0, -exponent);
  double mean = 0;
  for (int64_t i = 0; i < n; ++i) mean += value(i) * down;
  mean /= n;
  double var = 0;
  for (int64_t i = 0; i < n; ++i) {
    const double r = value(i) * down - mean;
    var += r * r;
  }
  return {std::ldexp(mean, exponent), std::ldexp(std::sqrt(var / n), exponent)};
}

}  // namespace

Standardization FitStandardization(const Dataset& train, bool features,
                                   bool targets) {
  Standardization s;
  const int64_t p = train.num_features;
  const int64_t n = train.num_rows();
  s.feature_mean.assign(p, 0.0);
  s.feature_std.assign(p, 1.0);
  if (features && n > 0) {
    for (int64_t j = 0; j < p; ++j) {
      const Moments m =
          ColumnMoments(n, [&](int64_t i) { return train.row(i)[j]; });
      s.feature_mean[j] = m.mean;
      s.feature_std[j] = m.sd > kMinStd ? m.sd : 1.0;
    }
  }
  if (targets && n > 0 && !IsClassification(train.task)) {
    const Moments m =
        ColumnMoments(n, [&](int64_t i) { return train.targets[i]; });
    s.target_mean = m.mean;
    s.target_std = m.sd > kMinStd ? m.sd : 1.0;
  }
  return s;
}

}  // namespace bnn
