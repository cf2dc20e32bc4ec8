// Training checkpoints: where a training run stands between two steps, so
// that an interrupted run (a server shutting down, a job preempted) resumes
// and finishes with the snapshot an uninterrupted run would have produced,
// bit for bit (same plan, data, thread count and build).
//
// Train (bnn/train/trainer.h) hands checkpoints to TrainCallbacks::
// on_checkpoint and resumes from one (its `resume` argument). A checkpoint
// holds the plan it belongs to (it resumes no other), the hash of the
// training rows, the trainer's loop state (step, pass, the pass's minibatch
// order and position in it, the pass's loss sums, both random generators'
// complete state, the training time so far) and the method's full state
// (VariationalMethod::SaveState).
//
// On disk a checkpoint is a record (bnn/io/record.h) with magic "BNNCKPT1",
// format version kCheckpointFormatVersion and a bnn.checkpoint.Checkpoint
// payload (core/proto/bnn/core/checkpoint.proto). Decoding checks the frame
// (a newer version is refused with FailedPrecondition; truncation and
// corruption are DataLoss), then the contents.
#ifndef BNN_TRAIN_CHECKPOINT_H_
#define BNN_TRAIN_CHECKPOINT_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

#include "bnn/train/plan.h"

namespace bnn {

inline constexpr uint32_t kCheckpointFormatVersion = 1;

// The training loop between two steps.
struct TrainerState {
  int64_t step = 0;  // completed steps
  int epoch = 0;     // completed passes
  // The minibatch order of the current pass, a permutation of the rows.
  // With position == 0 the pass has not started: `order` is the previous
  // pass's, which the next pass shuffles in place.
  std::vector<int64_t> order;
  int64_t position = 0;  // rows of `order` the current pass has used
  // The current pass's sum of minibatch loss x rows, and its rows.
  double epoch_loss = 0.0;
  int64_t epoch_rows = 0;
  // Rng::SaveState() of the minibatch and the step generators.
  std::string batch_rng;
  std::string step_rng;
  // Training time so far (TrainingInfo::seconds), continued on resuming.
  double seconds = 0.0;
};

struct Checkpoint {
  uint32_t format_version = kCheckpointFormatVersion;
  std::string library_version;
  // The plan the run follows; Train resumes only this plan
  // (CheckCheckpointFitsPlan), on the training set with this hash
  // (DatasetHash, bnn/data/dataset_hash.h).
  TrainingPlan plan;
  std::string dataset_hash;
  TrainerState trainer;
  // VariationalMethod::SaveState as a serialised bnn.checkpoint.MethodState
  // (opaque here; a checkpoint's largest part for most methods).
  std::string method_state;
  int64_t created_unix_ms = 0;
};

// Serialises into the framed, checksummed byte form. ResourceExhausted at
// 2 GiB or more.
absl::StatusOr<std::string> EncodeCheckpoint(const Checkpoint& checkpoint);
// Inverse of EncodeCheckpoint. DataLoss naming the checkpoint on truncation
// or corruption, FailedPrecondition on a newer format, InvalidArgument on
// contents that do not make sense (a trainer state that does not fit the
// checkpoint's own plan).
absl::StatusOr<Checkpoint> DecodeCheckpoint(absl::string_view bytes);

// EncodeCheckpoint written with WriteFileAtomically (bnn/io/file.h).
absl::Status WriteCheckpointFile(const std::string& path,
                                 const Checkpoint& checkpoint);
// DecodeCheckpoint of the file; NotFound if it does not exist, other errors
// name the path.
absl::StatusOr<Checkpoint> ReadCheckpointFile(const std::string& path);

// OK if `checkpoint` was taken from a run of `plan`; InvalidArgument
// ("the checkpoint is of another plan: ...") naming the first field that
// differs otherwise, or if its trainer state does not fit the plan (a step
// beyond the run, an order that is not a permutation of the plan's rows).
// Train checks this, and the training set's hash, before resuming.
absl::Status CheckCheckpointFitsPlan(const Checkpoint& checkpoint,
                                     const TrainingPlan& plan);

}  // namespace bnn

#endif  // BNN_TRAIN_CHECKPOINT_H_
