// Hyperparameter selection by K-fold cross-validation over a grid, the way
// SLANG §9.4 tunes lambda and tau on each training split (the paper used 30
// steps of Bayesian optimisation scored by 5-fold CV; a grid is the
// documented, reproducible stand-in).
#ifndef BNN_BENCH_ACCURACY_TUNING_H_
#define BNN_BENCH_ACCURACY_TUNING_H_

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

#include "bnn/data/dataset.h"
#include "bnn/methods/options.h"

namespace bnn::experiment {

// The cartesian product of per-parameter value lists, from flags
// "--tune key=v1,v2,...". "--tune a+b=v1,v2" ties parameters: both take the
// same value (e.g. one isotropic prior precision for weights and biases, as
// in SLANG eq. 30). Points are enumerated with the last axis varying fastest.
struct TuningGrid {
  // One entry per axis: the parameter names it sets.
  std::vector<std::vector<std::string>> keys;
  std::vector<std::vector<std::string>> values;

  bool empty() const { return keys.empty(); }
  int64_t size() const;
  ParamMap Point(int64_t index) const;
};

// Fails on a malformed spec, an empty value or a parameter named twice.
absl::StatusOr<TuningGrid> ParseTuningGrid(
    const std::vector<std::string>& specs);

// Score of `params` fitted on `fit` and evaluated on `validation`, higher is
// better; `seed` is the training seed, shared by every grid point of a fold
// (common random numbers make the comparison between points paired).
using FoldScore = std::function<absl::StatusOr<double>(
    const ParamMap& params, const Dataset& fit, const Dataset& validation,
    uint64_t seed)>;

struct GridPointScore {
  ParamMap params;
  std::vector<double> fold_scores;
  // Mean over folds; -inf if any fold failed (e.g. training diverged).
  double mean = 0;
  std::string error;  // the first failure, if any
};

struct TuningResult {
  ParamMap best;  // the point with the highest mean score (first on ties)
  std::vector<GridPointScore> points;
};

// Scores every grid point on the same `folds`-fold partition of `train`
// (drawn from `seed`). A point whose training fails is disqualified, not
// fatal, because a diverging learning rate is a legitimate grid outcome;
// callers validate the parameter names and ranges beforehand. Fails only if
// every point fails.
absl::StatusOr<TuningResult> CrossValidate(const TuningGrid& grid,
                                           const Dataset& train, int folds,
                                           uint64_t seed,
                                           const FoldScore& score);

}  // namespace bnn::experiment

#endif  // BNN_BENCH_ACCURACY_TUNING_H_
