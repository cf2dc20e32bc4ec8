// Feature/target standardisation fitted on a training split and applied to
// every other split and to prediction inputs (SLANG §9.4, UCI protocol).
#ifndef BNN_DATA_STANDARDIZER_H_
#define BNN_DATA_STANDARDIZER_H_

#include <vector>

#include "absl/status/status.h"

#include "bnn/data/dataset.h"

namespace bnn {

struct Standardization {
  // Per-feature mean and standard deviation (population). A constant feature
  // gets std 1 so that it maps to 0 instead of dividing by zero.
  std::vector<double> feature_mean;
  std::vector<double> feature_std;
  // Regression targets only; identity (0, 1) otherwise.
  double target_mean = 0.0;
  double target_std = 1.0;

  bool empty() const { return feature_mean.empty(); }
  // x <- (x - mean) / std for a row of num_features values.
  void TransformRow(double* row) const;
  // Applies to features and (regression) targets in place.
  absl::Status Apply(Dataset* dataset) const;
  // Maps a standardised prediction back to original target units.
  double UnscaleMean(double y) const { return y * target_std + target_mean; }
  double UnscaleVariance(double v) const { return v * target_std * target_std; }
};

// Fits on `train`. `features`/`targets` choose what is standardised; the
// others stay identity.
Standardization FitStandardization(const Dataset& train, bool features = true,
                                   bool targets = true);

}  // namespace bnn

#endif  // BNN_DATA_STANDARDIZER_H_
