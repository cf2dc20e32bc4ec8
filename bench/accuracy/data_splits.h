// The train/test splits an experiment iterates over, whatever their origin:
// the fixed index files of the UCI layout, seeded random partitions of one
// CSV (SLANG's 50/50 logistic-regression splits) or an explicit test file;
// plus the K-fold partition used for cross-validation inside a training split.
#ifndef BNN_BENCH_ACCURACY_DATA_SPLITS_H_
#define BNN_BENCH_ACCURACY_DATA_SPLITS_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

#include "bnn/data/dataset.h"
#include "bnn/random.h"

namespace bnn::experiment {

class SplitSource {
 public:
  // The UCI layout in `dir` (data.txt, index_*.txt; see bnn/data/readers.h).
  // `n_hidden()` is the folder's n_hidden.txt (50 when absent).
  static absl::StatusOr<SplitSource> FromUciDir(const std::string& dir);
  // `num_splits` independent random partitions of `all`, each with
  // floor(train_fraction * N) training rows, drawn from `seed`.
  static absl::StatusOr<SplitSource> RandomPartitions(Dataset all,
                                                      int num_splits,
                                                      double train_fraction,
                                                      uint64_t seed);
  // A single split with the given training and test rows (same schema).
  static absl::StatusOr<SplitSource> Fixed(Dataset train, Dataset test);

  int num_splits() const { return static_cast<int>(train_.size()); }
  Dataset Train(int split) const { return all_.Subset(train_[split]); }
  Dataset Test(int split) const { return all_.Subset(test_[split]); }
  const Dataset& all() const { return all_; }
  int n_hidden() const { return n_hidden_; }

 private:
  Dataset all_;
  std::vector<std::vector<int64_t>> train_, test_;
  int n_hidden_ = 0;
};

// Reads a CSV with a header whose `target` column holds class labels (any
// distinct real values, e.g. -1/+1 or 2/4), and, if `test_path` is non-empty,
// a second CSV with the same columns. Labels are encoded over both files
// together, so a class missing from one file keeps its index.
struct LabeledCsv {
  Dataset train;  // every row of `path` when there is no test file
  Dataset test;   // empty without a test file
  bool has_test = false;
};
absl::StatusOr<LabeledCsv> ReadClassificationCsv(const std::string& path,
                                                 const std::string& test_path,
                                                 const std::string& target);

// Assigns rows 0..n-1 to `folds` validation folds of near-equal size after a
// shuffle by `rng`; fold f's training rows are all the others.
struct Fold {
  std::vector<int64_t> fit;
  std::vector<int64_t> validation;
};
std::vector<Fold> KFolds(int64_t n, int folds, Rng& rng);

}  // namespace bnn::experiment

#endif  // BNN_BENCH_ACCURACY_DATA_SPLITS_H_
