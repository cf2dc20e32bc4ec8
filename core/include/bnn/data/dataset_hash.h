// The fingerprint of a dataset: hex SHA-256 of its schema and rows, recorded
// by the server for every dataset version and by the trainer in snapshots
// (TrainingInfo::dataset_hash), so a snapshot names exactly the rows it was
// trained on.
//
// Hashed bytes: the task name, the feature count (int64), then every row as
// its features followed by its target (doubles, in row order), and last a
// trailer of the row count, the class count and the class values. The rows
// come before anything that grows with them, so the hash can be extended:
// DatasetHasher keeps the SHA-256 state after a version's rows (State()),
// and the next version's hash costs only the rows it adds.
#ifndef BNN_DATA_DATASET_HASH_H_
#define BNN_DATA_DATASET_HASH_H_

#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"

#include "bnn/data/dataset.h"

namespace bnn {
namespace internal {
class Sha256;
}  // namespace internal

class DatasetHasher {
 public:
  // Starts the hash of a dataset with this task and feature count.
  DatasetHasher(Task task, int64_t num_features);

  // Resumes from a State() of a hasher of a dataset with `num_features`
  // features (and the task the caller knows it had). DataLoss if `state` is
  // not one.
  static absl::StatusOr<DatasetHasher> FromState(absl::string_view state,
                                                 int64_t num_features);

  // Adds `num_rows` rows: `features` row-major num_rows x num_features,
  // `targets` one per row (class indices for classification). O(rows),
  // no allocation.
  void AddRows(const double* features, const double* targets, int64_t num_rows);

  int64_t num_rows() const { return num_rows_; }

  // The hash state after the rows so far (a few hundred bytes), to be
  // resumed with FromState.
  std::string State() const;

  // Hex SHA-256 of the rows so far with the trailer for `class_values`
  // (empty for regression). The hasher can take more rows afterwards.
  std::string HexDigest(absl::Span<const double> class_values) const;

  DatasetHasher(const DatasetHasher& other);
  DatasetHasher& operator=(const DatasetHasher& other);
  DatasetHasher(DatasetHasher&&) noexcept;
  DatasetHasher& operator=(DatasetHasher&&) noexcept;
  ~DatasetHasher();

 private:
  DatasetHasher(std::unique_ptr<internal::Sha256> sha, int64_t num_features,
                int64_t num_rows);

  std::unique_ptr<internal::Sha256> sha_;
  int64_t num_features_ = 0;
  int64_t num_rows_ = 0;
};

// DatasetHasher over all of `data`'s rows, with its class values.
std::string DatasetHash(const Dataset& data);

}  // namespace bnn

#endif  // BNN_DATA_DATASET_HASH_H_
