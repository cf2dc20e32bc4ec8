// The crash test's operations and the content they send: seeded rows of
// uploads and appends with the hash the server must record for them, and
// the fingerprints by which a snapshot is recognised after a restart (its
// bytes' SHA-256 and the numbers a fixed Predict call returns).
#ifndef BNN_BENCH_FAULTS_WORKLOAD_H_
#define BNN_BENCH_FAULTS_WORKLOAD_H_

#include <cstdint>
#include <string>
#include <vector>

#include <absl/status/statusor.h>
#include <absl/strings/string_view.h>

#include "bnn/data/dataset.h"
#include "bnn/data/dataset_hash.h"

#include "client/bnn_client.h"

namespace bnn::faults {

// What a cycle's operations do. Every cycle has a primary operation, whose
// expected duration sets the kill moment, and may run others beside it.
// kModel: publishes of snapshots as model versions and alias moves.
enum class OpKind { kUpload, kAppend, kImport, kTrain, kModel };
inline constexpr int kNumOpKinds = 5;
inline constexpr OpKind kAllOpKinds[kNumOpKinds] = {
    OpKind::kUpload, OpKind::kAppend, OpKind::kImport, OpKind::kTrain,
    OpKind::kModel};
// "upload", "append", "import", "train", "model".
const char* OpKindName(OpKind kind);

// The schema a dataset's hash depends on: task, feature count and, for
// classification, the sorted class values (the labels of version 1).
struct Schema {
  Task task = Task::kRegression;
  int64_t num_features = 0;
  std::vector<double> class_values;
};

// The rows of one upload or append, as sent.
struct Rows {
  int64_t num_features = 0;
  std::vector<double> features;  // row-major num_rows() x num_features
  // Regression targets, or raw class labels (values of the schema's
  // class_values, not indices).
  std::vector<double> labels;

  int64_t num_rows() const { return static_cast<int64_t>(labels.size()); }
};

// `num_rows` (>= 1) rows from `seed`. Regression (empty `class_labels`):
// features uniform in [-2, 2], target their sum plus noise. Classification:
// labels drawn from `class_labels`, the first rows taking each once, so that
// an upload of at least |class_labels| rows has every class.
Rows MakeRows(uint64_t seed, int64_t num_rows, int64_t num_features,
              const std::vector<double>& class_labels);

// The schema of a dataset uploaded with `rows`: classification iff
// `classification`, class values the distinct labels sorted.
Schema SchemaOf(const Rows& rows, bool classification);

// Adds `rows` to `hasher` as the server stores them (class labels encoded as
// indices of schema.class_values), so that hasher->HexDigest(class_values)
// is the hash of the version they end.
void HashRows(const Schema& schema, const Rows& rows, DatasetHasher* hasher);

// Hex SHA-256 of `bytes`.
std::string Sha256Hex(absl::string_view bytes);

// The numbers Predict returns for `snapshot_id` on a fixed set of rows with
// a fixed seed and sample count (means and variances, or class
// probabilities, in order). The server documents these as bitwise
// reproducible, so a snapshot that predicts them again is the same snapshot.
absl::StatusOr<std::vector<double>> PredictFingerprint(
    client::BnnClient& client, const std::string& snapshot_id,
    int64_t num_features);

}  // namespace bnn::faults

#endif  // BNN_BENCH_FAULTS_WORKLOAD_H_
