#include "bench/accuracy/tuning.h"

#include <cmath>
#include <limits>
#include <set>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"

#include "bnn/random.h"

#include "bench/accuracy/data_splits.h"

namespace bnn::experiment {

int64_t TuningGrid::size() const {
  int64_t n = 1;
  for (const auto& v : values) n *= static_cast<int64_t>(v.size());
  return n;
}

ParamMap TuningGrid::Point(int64_t index) const {
  ParamMap point;
  for (size_t k = keys.size(); k-- > 0;) {
    const auto n = static_cast<int64_t>(values[k].size());
    for (const std::string& key : keys[k]) point[key] = values[k][index % n];
    index /= n;
  }
  return point;
}

absl::StatusOr<TuningGrid> ParseTuningGrid(
    const std::vector<std::string>& specs) {
  TuningGrid grid;
  std::set<std::string> seen;
  for (const std::string& spec : specs) {
    const size_t eq = spec.find('=');
    if (eq == std::string::npos || eq == 0 || eq + 1 == spec.size()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "--tune '", spec, "' must look like key=value1,value2,..."));
    }
    std::vector<std::string> tied =
        absl::StrSplit(spec.substr(0, eq), '+', absl::AllowEmpty());
    for (const std::string& key : tied) {
      if (key.empty()) {
        return absl::InvalidArgumentError(
            absl::StrCat("--tune '", spec, "' has an empty parameter name"));
      }
      if (!seen.insert(key).second) {
        return absl::InvalidArgumentError(
            absl::StrCat("--tune names '", key, "' more than once"));
      }
    }
    std::vector<std::string> values =
        absl::StrSplit(spec.substr(eq + 1), ',', absl::AllowEmpty());
    for (const std::string& v : values) {
      if (v.empty()) {
        return absl::InvalidArgumentError(
            absl::StrCat("--tune '", spec, "' has an empty value"));
      }
    }
    grid.keys.push_back(std::move(tied));
    grid.values.push_back(std::move(values));
  }
  return grid;
}

absl::StatusOr<TuningResult> CrossValidate(const TuningGrid& grid,
                                           const Dataset& train, int folds,
                                           uint64_t seed,
                                           const FoldScore& score) {
  if (folds < 2 || folds > train.num_rows()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "cannot make ", folds, " folds of ", train.num_rows(), " rows"));
  }
  Rng root(seed);
  Rng fold_rng = root.Fork(0);
  const std::vector<Fold> partition = KFolds(train.num_rows(), folds, fold_rng);
  std::vector<Dataset> fit_sets, validation_sets;
  for (const Fold& fold : partition) {
    fit_sets.push_back(train.Subset(fold.fit));
    validation_sets.push_back(train.Subset(fold.validation));
  }

  TuningResult result;
  double best = -std::numeric_limits<double>::infinity();
  for (int64_t p = 0; p < grid.size(); ++p) {
    GridPointScore point;
    point.params = grid.Point(p);
    double sum = 0;
    for (int f = 0; f < folds; ++f) {
      const uint64_t fold_seed = root.Fork(1 + static_cast<uint64_t>(f)).seed();
      absl::StatusOr<double> s =
          score(point.params, fit_sets[f], validation_sets[f], fold_seed);
      if (s.ok() && !std::isfinite(*s)) {
        s = absl::InternalError(absl::StrCat("non-finite score ", *s));
      }
      if (!s.ok()) {
        point.error = absl::StrCat("fold ", f, ": ", s.status().message());
        sum = -std::numeric_limits<double>::infinity();
        break;
      }
      point.fold_scores.push_back(*s);
      sum += *s;
    }
    point.mean = std::isfinite(sum) ? sum / folds : sum;
    if (std::isfinite(point.mean) && point.mean > best) {
      best = point.mean;
      result.best = point.params;
    }
    result.points.push_back(std::move(point));
  }
  if (!std::isfinite(best)) {
    return absl::InternalError(absl::StrCat(
        "every grid point failed in cross-validation; first error: ",
        result.points.empty() ? "" : result.points[0].error));
  }
  return result;
}

}  // namespace bnn::experiment
