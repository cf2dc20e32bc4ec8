// The method-agnostic training loop: standardisation, epochs, shuffled
// minibatches, progress reporting, cancellation between steps and the final
// snapshot.
#ifndef BNN_TRAIN_TRAINER_H_
#define BNN_TRAIN_TRAINER_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

#include "bnn/data/dataset.h"
#include "bnn/interrupt.h"
// DatasetHash, the snapshot's dataset_hash.
#include "bnn/data/dataset_hash.h"
#include "bnn/io/snapshot.h"
#include "bnn/memory.h"
#include "bnn/methods/options.h"
#include "bnn/methods/registry.h"
#include "bnn/model/model_spec.h"

namespace bnn {

// Parameters owned by the trainer rather than the method; they travel in the
// same ParamMap as the method's.
struct TrainOptions {
  // Passes over the training set.
  int epochs = 100;
  // Minibatch steps of the run; 0: epochs x steps per epoch. When set it
  // replaces `epochs` (the last pass may be partial), for protocols stated in
  // iterations (BALI, reference/bali.md Tables 4-6); a method's schedule
  // (SetSchedule) sees this total.
  int64_t steps = 0;
  // Seed of the job's random stream (initial weights, minibatches, MC noise).
  uint64_t seed = 0;
  // Standardise features and regression targets on the training set. False
  // keeps raw units, e.g. for LIBSVM features already scaled to [-1, 1] as
  // in SLANG's logistic-regression experiments, where the prior is stated
  // for the raw features.
  bool standardize = true;

  absl::Status Validate() const;
};
// Parameter names consumed by the trainer ("epochs", "steps", "seed",
// "standardize").
const std::vector<std::string>& TrainerParamNames();

struct TrainRequest {
  std::string method;
  ParamMap params;  // method parameters plus "epochs"/"seed" overrides
  TrainOptions options;
  std::vector<int> hidden_sizes;
  // One per hidden layer, or a single one applied to all.
  std::vector<Activation> activations = {Activation::kRelu};
  // Identification recorded in the snapshot.
  std::string dataset_id;
  int64_t dataset_version = 0;
  // Continual learning: warm-start from this snapshot (its architecture and
  // standardisation are reused; hidden_sizes must be empty or equal to its
  // own) and, with prior_from_parent, use its posterior as the prior.
  std::shared_ptr<const Snapshot> parent;
  std::string parent_snapshot_id;  // recorded in the new snapshot
  bool prior_from_parent = false;
  // Evaluation during training (learning curves): when snapshot_every > 0,
  // on_snapshot receives a snapshot of the current posterior after every
  // snapshot_every-th step and after the last step, on the training thread.
  // Its time is not counted in TrainingInfo::seconds; a non-OK status ends
  // training with that status.
  int64_t snapshot_every = 0;
  std::function<absl::Status(const Snapshot&)> on_snapshot;
};

// request.options with the trainer's entries of request.params applied,
// validated: what Train() will use. Lets a server reject a bad request before
// queueing it.
absl::StatusOr<TrainOptions> ResolveTrainOptions(const TrainRequest& request);

struct TrainProgress {
  int epoch = 0;     // completed epochs
  int64_t step = 0;  // completed steps
  int64_t total_steps = 0;
  double loss = 0.0;  // mean minibatch loss of the current epoch
};

// Called after every step from the training thread; must be cheap.
using ProgressCallback = std::function<void(const TrainProgress&)>;

// Trains on `data` (raw units) and returns the snapshot. Checks `interrupt`
// between steps and stops with its status ("training cancelled after 12
// steps"; a deadline's DeadlineExceeded). Fails with InvalidArgument on a
// bad request (unknown method or parameter, invalid options, empty data),
// and with ResourceExhausted if an allocation fails (the process survives).
absl::StatusOr<Snapshot> Train(const TrainRequest& request, const Dataset& data,
                               const MethodRegistry& registry,
                               const ProgressCallback& progress = nullptr,
                               const Interrupt& interrupt = Interrupt());

// A training set's size, for estimates made before it is loaded.
struct DatasetShape {
  Task task = Task::kRegression;
  int64_t num_rows = 0;
  int64_t num_features = 0;
  int num_classes = 0;  // classification only
};
DatasetShape ShapeOf(const Dataset& data);

// Peak heap bytes of Train(request, data) followed by encoding its snapshot
// (EncodeSnapshot), estimated before anything is loaded or allocated: the
// training set as its caller holds it and Train's standardised copy, the
// method's own estimate (VariationalMethod::EstimateMemory: posterior and
// optimiser state, per-step workspaces, the exported posterior), and the
// snapshot encoding (the posterior, its protobuf, the payload and the framed
// copy). kept_bytes is the snapshot's posterior. Fails as Train would on a
// bad method, parameter or model.
absl::StatusOr<MemoryEstimate> EstimateTrainingMemory(
    const TrainRequest& request, const DatasetShape& data,
    const MethodRegistry& registry);

}  // namespace bnn

#endif  // BNN_TRAIN_TRAINER_H_
