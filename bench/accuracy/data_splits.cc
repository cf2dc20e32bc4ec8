#include "bench/accuracy/data_splits.h"

#include <algorithm>
#include <numeric>
#include <utility>

#include "absl/strings/str_cat.h"

#include "bnn/data/readers.h"
#include "bnn/status.h"

namespace bnn::experiment {

absl::StatusOr<SplitSource> SplitSource::FromUciDir(const std::string& dir) {
  BNN_ASSIGN_OR_RETURN(UciDataset uci, ReadUciDataset(dir));
  if (uci.num_splits() < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat(dir, ": the dataset declares no splits"));
  }
  SplitSource source;
  source.all_ = std::move(uci.all);
  source.train_ = std::move(uci.train_indices);
  source.test_ = std::move(uci.test_indices);
  source.n_hidden_ = uci.n_hidden;
  return source;
}

absl::StatusOr<SplitSource> SplitSource::RandomPartitions(Dataset all,
                                                          int num_splits,
                                                          double train_fraction,
                                                          uint64_t seed) {
  const int64_t n = all.num_rows();
  const auto n_train = static_cast<int64_t>(train_fraction * n);
  if (num_splits < 1 || n_train < 1 || n_train >= n) {
    return absl::InvalidArgumentError(absl::StrCat(
        "cannot make ", num_splits, " splits with ", n_train,
        " training rows out of ", n, " (train fraction ", train_fraction, ")"));
  }
  SplitSource source;
  source.all_ = std::move(all);
  const Rng root(seed);
  std::vector<int64_t> order(n);
  for (int k = 0; k < num_splits; ++k) {
    // One independent stream per split: split k does not depend on how many
    // splits are requested.
    Rng rng = root.Fork(static_cast<uint64_t>(k));
    std::iota(order.begin(), order.end(), 0);
    std::shuffle(order.begin(), order.end(), rng.engine());
    source.train_.emplace_back(order.begin(), order.begin() + n_train);
    source.test_.emplace_back(order.begin() + n_train, order.end());
    // Sorted rows make a split independent of the shuffle's order and keep
    // Subset() cache-friendly.
    std::sort(source.train_.back().begin(), source.train_.back().end());
    std::sort(source.test_.back().begin(), source.test_.back().end());
  }
  return source;
}

absl::StatusOr<SplitSource> SplitSource::Fixed(Dataset train, Dataset test) {
  const int64_t n_train = train.num_rows();
  const int64_t n_test = test.num_rows();
  if (n_train < 1 || n_test < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("a fixed split needs rows on both sides; got ", n_train,
                     " training and ", n_test, " test rows"));
  }
  SplitSource source;
  source.all_ = std::move(train);
  BNN_RETURN_IF_ERROR(source.all_.Append(test));
  source.train_.emplace_back(n_train);
  std::iota(source.train_[0].begin(), source.train_[0].end(), 0);
  source.test_.emplace_back(n_test);
  std::iota(source.test_[0].begin(), source.test_[0].end(), n_train);
  return source;
}

absl::StatusOr<LabeledCsv> ReadClassificationCsv(const std::string& path,
                                                 const std::string& test_path,
                                                 const std::string& target) {
  // Read raw labels first and encode once over both files.
  CsvOptions options;
  options.target_column = target;
  options.classification = false;
  BNN_ASSIGN_OR_RETURN(Dataset combined, ReadCsv(path, options));
  const int64_t n_train = combined.num_rows();
  LabeledCsv out;
  if (!test_path.empty()) {
    BNN_ASSIGN_OR_RETURN(const Dataset test, ReadCsv(test_path, options));
    if (test.feature_names != combined.feature_names) {
      return absl::InvalidArgumentError(
          absl::StrCat(test_path, " does not have the same columns as ", path));
    }
    BNN_RETURN_IF_ERROR(combined.Append(test));
    out.has_test = true;
  }
  BNN_RETURN_IF_ERROR(EncodeClassLabels(&combined));
  std::vector<int64_t> train_rows(n_train),
      test_rows(combined.num_rows() - n_train);
  std::iota(train_rows.begin(), train_rows.end(), 0);
  std::iota(test_rows.begin(), test_rows.end(), n_train);
  out.train = combined.Subset(train_rows);
  out.test = combined.Subset(test_rows);
  return out;
}

std::vector<Fold> KFolds(int64_t n, int folds, Rng& rng) {
  std::vector<int64_t> order(n);
  std::iota(order.begin(), order.end(), 0);
  std::shuffle(order.begin(), order.end(), rng.engine());
  std::vector<Fold> out(folds);
  for (int64_t i = 0; i < n; ++i) {
    const int owner = static_cast<int>(i % folds);
    for (int f = 0; f < folds; ++f) {
      (f == owner ? out[f].validation : out[f].fit).push_back(order[i]);
    }
  }
  for (Fold& fold : out) {
    std::sort(fold.fit.begin(), fold.fit.end());
    std::sort(fold.validation.begin(), fold.validation.end());
  }
  return out;
}

}  // namespace bnn::experiment
