// Dense in-memory datasets: the unit every reader produces and every trainer,
// predictor and store consumes. Deliberately free of Eigen so the server layer
// can build and inspect datasets without numerical headers.
#ifndef BNN_DATA_DATASET_H_
#define BNN_DATA_DATASET_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"

namespace bnn {

enum class Task {
  kRegression,  // real-valued target
  kBinary,      // two classes, targets 0/1
  kMulticlass,  // C > 2 classes, targets 0..C-1
};

absl::string_view TaskToString(Task task);
// Accepts "regression", "binary", "multiclass".
absl::StatusOr<Task> StringToTask(absl::string_view name);
bool IsClassification(Task task);

struct Dataset {
  Task task = Task::kRegression;
  int64_t num_features = 0;
  // Row-major num_rows() x num_features.
  std::vector<double> features;
  // Regression: the target value. Classification: the class index 0..C-1.
  std::vector<double> targets;
  // Classification only: number of classes C (2 for kBinary) and the original
  // label value of each class index (e.g. {-1, +1} or {2, 4}).
  int num_classes = 0;
  std::vector<double> class_values;
  // Optional column names (empty or num_features long) and target name.
  std::vector<std::string> feature_names;
  std::string target_name;

  int64_t num_rows() const { return static_cast<int64_t>(targets.size()); }
  const double* row(int64_t i) const {
    return features.data() + i * num_features;
  }

  // Checks sizes, finiteness of every value, that every feature's (and a
  // regression target's) range max - min is finite, so that standardisation
  // cannot overflow (y = +-1e308 is refused), and, for classification, that
  // targets are valid class indices. The message names the row or column.
  absl::Status Validate() const;

  // The rows `indices` (in that order), everything else copied.
  Dataset Subset(const std::vector<int64_t>& indices) const;

  // InvalidArgument ("schema mismatch") unless `other` has this dataset's
  // task, feature count and classes.
  absl::Status CheckSameSchema(const Dataset& other) const;
  // A training minibatch: the features of `rows` into x (|rows| x
  // num_features) and their targets into y (|rows|), converted to the
  // scalar types of any resizable dense matrix and vector (Eigen's).
  template <typename Matrix, typename Vector>
  void Gather(const std::vector<int64_t>& rows, Matrix* x, Vector* y) const {
    using X = typename Matrix::Scalar;
    using Y = typename Vector::Scalar;
    const auto m = static_cast<typename Matrix::Index>(rows.size());
    x->resize(m, num_features);
    y->resize(m);
    for (typename Matrix::Index i = 0; i < m; ++i) {
      const double* r = row(rows[i]);
      for (int64_t f = 0; f < num_features; ++f) (*x)(i, f) = X(r[f]);
      (*y)[i] = Y(targets[rows[i]]);
    }
  }

  // Appends the rows of `other`, which must have the same schema.
  absl::Status Append(const Dataset& other);
};

// Each feature's (and a regression target's) minimum and maximum over rows
// that may arrive in pieces (a streamed upload, appends), for the check that
// standardisation (standardizer.h) stays finite: it subtracts the mean,
// which lies between min and max, so it is finite exactly when every
// column's max - min is. Dataset::Validate checks whole datasets with it.
class ColumnRanges {
 public:
  // Columns: `num_features` features, then the target if `with_target`.
  ColumnRanges(int64_t num_features, bool with_target);
  // Ranges kept as min() and max() (as ColumnRanges stores them with a
  // dataset version); InvalidArgument if their sizes do not match.
  static absl::StatusOr<ColumnRanges> FromMinMax(int64_t num_features,
                                                 bool with_target,
                                                 std::vector<double> min,
                                                 std::vector<double> max);

  // Takes in `num_rows` rows: `features` row-major num_rows x
  // num_features, `targets` num_rows values. Values must be finite.
  void AddRows(const double* features, const double* targets, int64_t num_rows);
  // InvalidArgument naming the first column whose max - min overflows
  // ("target spans [-1e+308, 1e+308]: ...").
  absl::Status Check() const;

  // Per column; empty until a row was added.
  const std::vector<double>& min() const { return min_; }
  const std::vector<double>& max() const { return max_; }

 private:
  int64_t num_features_;
  bool with_target_;
  std::vector<double> min_, max_;
};

// Heap bytes of a Dataset's rows: num_rows x num_features features and
// num_rows targets, as doubles (bnn/memory.h).
int64_t DatasetBytes(int64_t num_rows, int64_t num_features);

// Turns raw classification labels (any real values) in `targets` into class
// indices: distinct values sorted ascending become 0..C-1, C == 2 gives
// kBinary, C > 2 kMulticlass. Fails on fewer than two distinct labels or
// non-integer labels.
absl::Status EncodeClassLabels(Dataset* dataset);

// The class index of the raw label `label` among `class_values` (distinct,
// ascending, as EncodeClassLabels leaves them), or -1 if it is not one.
int64_t ClassIndex(absl::Span<const double> class_values, double label);

}  // namespace bnn

#endif  // BNN_DATA_DATASET_H_
