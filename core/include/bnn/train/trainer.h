// The method-agnostic training loop: standardisation, epochs, shuffled
// minibatches, progress reporting, cancellation between steps, checkpoints
// and resuming from them, and the final snapshot.
#ifndef BNN_TRAIN_TRAINER_H_
#define BNN_TRAIN_TRAINER_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"

#include "bnn/data/dataset.h"
#include "bnn/interrupt.h"
// DatasetHash, the snapshot's dataset_hash.
#include "bnn/data/dataset_hash.h"
#include "bnn/io/snapshot.h"
#include "bnn/memory.h"
#include "bnn/methods/options.h"
#include "bnn/methods/registry.h"
#include "bnn/model/model_spec.h"
#include "bnn/train/checkpoint.h"
#include "bnn/train/plan.h"

namespace bnn {

struct TrainProgress {
  int epoch = 0;     // completed epochs
  int64_t step = 0;  // completed steps
  int64_t total_steps = 0;
  double loss = 0.0;  // mean minibatch loss of the current epoch
};

// Called after every step from the training thread; must be cheap.
using ProgressCallback = std::function<void(const TrainProgress&)>;

// What Train() reports while it runs, besides its result.
struct TrainCallbacks {
  // After every step and every pass.
  ProgressCallback progress;
  // Evaluation during training (learning curves): when snapshot_every > 0,
  // on_snapshot receives a snapshot of the current posterior after every
  // snapshot_every-th step and after the last step, on the training thread.
  // Its time is not counted in TrainingInfo::seconds; a non-OK status ends
  // training with that status.
  int64_t snapshot_every = 0;
  std::function<absl::Status(const Snapshot&)> on_snapshot;

  // Checkpoints (bnn/train/checkpoint.h), from which Train(..., resume)
  // continues the run: on_checkpoint receives the run's state between two
  // steps, on the training thread,
  //   - after every checkpoint_every_steps-th step (when > 0),
  //   - after the first step that ends checkpoint_interval or more of
  //     training time after the last checkpoint (or the start) (when > 0),
  //   - and, with checkpoint_on_interrupt, when `interrupt` stops training:
  //     then Train returns the interrupt's status after on_checkpoint
  //     returns (a server shutting down keeps where each job stopped).
  // Never after the last step (the snapshot is the result). Its time is not
  // counted in TrainingInfo::seconds; a non-OK status ends training with
  // that status (on an interrupt: with its code, and a message saying
  // where training stopped and why the checkpoint failed).
  int64_t checkpoint_every_steps = 0;
  absl::Duration checkpoint_interval = absl::ZeroDuration();
  bool checkpoint_on_interrupt = false;
  std::function<absl::Status(const Checkpoint&)> on_checkpoint;
};

// Runs `plan` on `data` (raw units; the shape the plan was resolved for) and
// returns the snapshot. A warm start's `parent` is the snapshot the plan's
// parent_snapshot_id names (null otherwise); its architecture must be the
// plan's. Checks `interrupt` between steps and stops with its status
// ("training cancelled after 12 steps"; a deadline's DeadlineExceeded).
// InvalidArgument if data or parent do not fit the plan, ResourceExhausted if
// an allocation fails (the process survives).
//
// With `resume` (a checkpoint of a run of this plan, on this data, with this
// parent), continues where that run was checkpointed: the snapshot is the
// one the run would have returned had it not stopped, bit for bit, except
// for its times (with the same build and compute threads). InvalidArgument
// if the checkpoint is of another plan (CheckCheckpointFitsPlan) or another
// training set, or its method state does not fit; DataLoss if its method
// state does not parse; FailedPrecondition if that state's layout is newer
// than this build reads.
absl::StatusOr<Snapshot> Train(const TrainingPlan& plan, const Dataset& data,
                               const Snapshot* parent,
                               const MethodRegistry& registry,
                               const TrainCallbacks& callbacks = {},
                               const Interrupt& interrupt = Interrupt(),
                               const Checkpoint* resume = nullptr);

// ResolveTrainingPlan(request, ShapeOf(data), request.parent) and Train() of
// the plan, with request.snapshot_every/on_snapshot: for callers that hold
// the data and the parent already (tests, the experiment harness).
absl::StatusOr<Snapshot> Train(const TrainRequest& request, const Dataset& data,
                               const MethodRegistry& registry,
                               const ProgressCallback& progress = nullptr,
                               const Interrupt& interrupt = Interrupt());

// Peak heap bytes of Train(plan, data) followed by encoding its snapshot
// (EncodeSnapshot), estimated before anything is loaded or allocated: the
// training set as its caller holds it and Train's standardised copy, the
// method's own estimate (VariationalMethod::EstimateMemory: posterior and
// optimiser state, per-step workspaces, the exported posterior, a
// checkpoint of its state), the trainer's part of a checkpoint (the
// minibatch order) encoded with EncodeCheckpoint, and the snapshot encoding
// (the posterior, its protobuf, the payload and the framed copy).
// kept_bytes is the snapshot's posterior.
absl::StatusOr<MemoryEstimate> EstimateTrainingMemory(
    const TrainingPlan& plan, const MethodRegistry& registry);

}  // namespace bnn

#endif  // BNN_TRAIN_TRAINER_H_
