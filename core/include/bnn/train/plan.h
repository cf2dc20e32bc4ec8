// A training request resolved once: ResolveTrainingPlan turns what a caller
// asks for (method name and parameters, trainer options, hidden layers, the
// dataset's schema, an optional parent snapshot) into a validated
// TrainingPlan, and everything downstream (a server's admission check, its
// job record, the memory estimate, bnn::Train) reads the plan instead of
// resolving the request again.
#ifndef BNN_TRAIN_PLAN_H_
#define BNN_TRAIN_PLAN_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

#include "bnn/data/dataset.h"
#include "bnn/methods/options.h"
#include "bnn/methods/registry.h"
#include "bnn/model/model_spec.h"

namespace bnn {

struct Snapshot;  // bnn/io/snapshot.h

// Parameters owned by the trainer rather than the method; they travel in the
// same ParamMap as the method's ("epochs", "steps", "seed", "standardize").
struct TrainOptions {
  // Passes over the training set.
  int epochs = 100;
  // Minibatch steps of the run; 0: epochs x steps per epoch. When set it
  // replaces `epochs` (the last pass may be partial), for protocols stated in
  // iterations (BALI, Kurle et al., Tables 4-6); a method's schedule
  // (SetSchedule) sees this total.
  int64_t steps = 0;
  // Seed of the job's random stream (initial weights, minibatches, MC noise).
  uint64_t seed = 0;
  // Standardise features and regression targets on the training set. False
  // keeps raw units, e.g. for LIBSVM features already scaled to [-1, 1] as
  // in SLANG's logistic-regression experiments (Mishkin et al. 2018, Sec. 4),
  // where the prior is stated for the raw features.
  bool standardize = true;

  absl::Status Validate() const;
};
// Parameter names consumed by the trainer ("epochs", "steps", "seed",
// "standardize").
const std::vector<std::string>& TrainerParamNames();

// What a plan needs of a training set before it is loaded: its schema and
// size (a server knows them from the dataset's metadata).
struct DatasetShape {
  Task task = Task::kRegression;
  int64_t num_rows = 0;
  int64_t num_features = 0;
  int num_classes = 0;  // classification only
  // The label of each class index (classification only).
  std::vector<double> class_values;
};
DatasetShape ShapeOf(const Dataset& data);

// What a warm start needs of its parent snapshot before its posterior is
// loaded: the architecture it keeps and the data it was trained for.
struct ParentModel {
  std::string snapshot_id;
  ModelSpec model;
  Task task = Task::kRegression;
  std::vector<double> class_values;
};
ParentModel ParentModelOf(const Snapshot& snapshot, std::string snapshot_id);

// A training run as a caller asks for it, unresolved.
struct TrainRequest {
  std::string method;
  // The method's parameters, plus overrides of the trainer's ("epochs",
  // "steps", "seed", "standardize") that take precedence over `options`.
  ParamMap params;
  TrainOptions options;
  std::vector<int> hidden_sizes;
  // One per hidden layer, or a single one applied to all; empty: relu, or
  // the parent's for a warm start.
  std::vector<Activation> activations;
  // Identification recorded in the snapshot.
  std::string dataset_id;
  int64_t dataset_version = 0;
  // Continual learning: warm-start from this snapshot (its architecture and
  // standardisation are reused; hidden_sizes must be empty or equal to its
  // own) and, with prior_from_parent, use its posterior as the prior.
  std::shared_ptr<const Snapshot> parent;
  std::string parent_snapshot_id;  // recorded in the new snapshot
  bool prior_from_parent = false;
  // Evaluation during training, for Train(request, ...): see TrainCallbacks
  // (bnn/train/trainer.h). Not part of the plan.
  int64_t snapshot_every = 0;
  std::function<absl::Status(const Snapshot&)> on_snapshot;
};

// A validated training run: everything bnn::Train does is fixed here.
struct TrainingPlan {
  std::string method;
  // The method's own parameters as requested (the trainer's are resolved
  // into `options`); accepted by the registry's factory.
  ParamMap params;
  TrainOptions options;
  // The network: the requested hidden layers on the data's inputs and
  // outputs, or the parent's architecture for a warm start.
  ModelSpec model;
  DatasetShape data;
  std::string dataset_id;
  int64_t dataset_version = 0;
  // A warm start from a parent snapshot (named by parent_snapshot_id where
  // the caller gave an id), optionally with its posterior as the prior.
  bool warm_start = false;
  std::string parent_snapshot_id;
  bool prior_from_parent = false;
  // Rows per minibatch (the method's batch size, at most the data's rows),
  // steps per pass, steps of the run and passes (the last may be partial).
  int64_t batch_rows = 0;
  int64_t steps_per_epoch = 0;
  int64_t total_steps = 0;
  int epochs = 0;
};

// Resolves `request` for a training set of shape `data` and, for a warm
// start, the `parent` (null otherwise; required when
// request.parent_snapshot_id is set): the method name and its parameters
// (unknown names and keys fail listing the known ones, option bounds are
// checked by the method's Validate()), the trainer's options with their
// parameter overrides, the architecture (the parent's, which the requested
// hidden_sizes/activations must be empty or equal to, on data with the
// parent's inputs and outputs), and the run's length. InvalidArgument naming
// the field on any violation. Deterministic: resolving a plan's own request
// again gives the same plan.
absl::StatusOr<TrainingPlan> ResolveTrainingPlan(
    const TrainRequest& request, const DatasetShape& data,
    const ParentModel* parent, const MethodRegistry& registry);

// The checks of ResolveTrainingPlan that need no data: the method name, its
// parameters and the trainer's among `params`. For callers that parse a
// request long before they hold the data (the experiment harness's flags).
absl::Status CheckTrainParams(absl::string_view method, const ParamMap& params,
                              const MethodRegistry& registry);

}  // namespace bnn

#endif  // BNN_TRAIN_PLAN_H_
