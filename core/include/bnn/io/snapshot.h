// Versioned, checksummed posterior snapshots.
//
// A snapshot is a record (bnn/io/record.h) with magic "BNNSNAP1", format
// version kSnapshotFormatVersion and a bnn.snapshot.Snapshot payload.
// Loading checks the frame (magic, version: a newer one is refused, size:
// truncation, checksum: corruption), then the payload's contents.
#ifndef BNN_IO_SNAPSHOT_H_
#define BNN_IO_SNAPSHOT_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

#include "bnn/data/dataset.h"
#include "bnn/data/standardizer.h"
#include "bnn/methods/options.h"
#include "bnn/model/model_spec.h"

namespace bnn {

class Posterior;

inline constexpr uint32_t kSnapshotFormatVersion = 1;

struct TrainingInfo {
  std::string dataset_id;
  int64_t dataset_version = 0;
  std::string dataset_hash;
  int64_t num_train = 0;
  int64_t steps = 0;
  int epochs = 0;
  double final_loss = 0.0;
  double seconds = 0.0;
  uint64_t seed = 0;
  // Continual learning: the snapshot this one was warm-started from.
  std::string parent_snapshot_id;
  bool prior_from_parent = false;
};

struct Snapshot {
  uint32_t format_version = kSnapshotFormatVersion;
  std::string library_version;
  std::string method;
  ParamMap params;
  ModelSpec model;
  Task task = Task::kRegression;
  std::vector<double> class_values;
  Standardization standardization;
  double noise_precision = 1.0;
  TrainingInfo training;
  std::shared_ptr<const Posterior> posterior;
  int64_t created_unix_ms = 0;
};

// Serialises into the framed, checksummed byte form.
absl::StatusOr<std::string> EncodeSnapshot(const Snapshot& snapshot);
// Inverse of EncodeSnapshot; DataLoss on truncation or corruption,
// FailedPrecondition on a newer format, InvalidArgument on bad contents.
absl::StatusOr<Snapshot> DecodeSnapshot(absl::string_view bytes);

// EncodeSnapshot written with WriteFileAtomically (bnn/io/file.h): a crash
// leaves either the old file or the complete new one.
absl::Status WriteSnapshotFile(const std::string& path,
                               const Snapshot& snapshot);
// DecodeSnapshot of the file; NotFound if it does not exist, other errors
// name the path.
absl::StatusOr<Snapshot> ReadSnapshotFile(const std::string& path);

}  // namespace bnn

#endif  // BNN_IO_SNAPSHOT_H_
