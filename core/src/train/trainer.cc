#include "bnn/train/trainer.h"

#include <algorithm>
#include <chrono>
#include <climits>
#include <numeric>
#include <optional>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"

#include "bnn/compute_threads.h"
#include "bnn/core/checkpoint.pb.h"
#include "bnn/memory.h"
#include "bnn/methods/method.h"
#include "bnn/model/network.h"
#include "bnn/posterior/posterior.h"
#include "bnn/random.h"
#include "bnn/status.h"
#include "bnn/version.h"

#include "train/sha256.h"

namespace bnn {
namespace {

int64_t NowUnixMs() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

}  // namespace

absl::StatusOr<MemoryEstimate> EstimateTrainingMemory(
    const TrainingPlan& plan, const MethodRegistry& registry) {
  BNN_ASSIGN_OR_RETURN(const std::unique_ptr<VariationalMethod> method,
                       registry.Create(plan.method, plan.params));
  const int64_t n = std::max<int64_t>(1, plan.data.num_rows);
  const MemoryEstimate own =
      method->EstimateMemory(plan.model, n, plan.total_steps);
  const int64_t dataset = DatasetBytes(n, plan.data.num_features);

  MemoryEstimate training;
  training.Add("training set as loaded (N x (P + 1) doubles)", dataset);
  training.Add("standardised copy of the training set", dataset);
  training.Add("minibatch order (N indices)", MulBytes({n, sizeof(int64_t)}));
  training.Add(absl::StrCat(method->name(), ": "), own);
  // A checkpoint's minibatch order: the trainer's copy, the message's, the
  // payload's and the framed record's (the method's state is in `own`).
  training.Add("checkpoint of the minibatch order (4 x N indices)",
               MulBytes({4, n, sizeof(int64_t)}));
  training.kept_bytes = own.kept_bytes;
  // Encoding the snapshot (after Train returns: the method and the copy are
  // gone) holds the posterior, its protobuf, the payload and the framed
  // file bytes, each about the posterior's size.
  MemoryEstimate saving;
  saving.Add("training set as loaded (N x (P + 1) doubles)", dataset);
  saving.Add("snapshot encoding (posterior, protobuf, payload, file bytes)",
             MulBytes({4, own.kept_bytes}));
  saving.kept_bytes = own.kept_bytes;
  return saving.bytes > training.bytes ? saving : training;
}

namespace {

// Whether `data` is the training set `plan` was resolved for.
absl::Status CheckDataFitsPlan(const TrainingPlan& plan, const Dataset& data) {
  const DatasetShape shape = ShapeOf(data);
  if (shape.task != plan.data.task || shape.num_rows != plan.data.num_rows ||
      shape.num_features != plan.data.num_features ||
      shape.class_values != plan.data.class_values) {
    return absl::InvalidArgumentError(
        absl::StrCat("the training set (", TaskToString(shape.task), ", ",
                     shape.num_rows, " rows x ", shape.num_features,
                     " features) is not the one the plan was made for (",
                     TaskToString(plan.data.task), ", ", plan.data.num_rows,
                     " rows x ", plan.data.num_features, " features)"));
  }
  return absl::OkStatus();
}

// Whether `parent` is the snapshot a warm-start `plan` names.
absl::Status CheckParentFitsPlan(const TrainingPlan& plan,
                                 const Snapshot* parent) {
  if (!plan.warm_start) {
    if (parent != nullptr) {
      return absl::InvalidArgumentError(
          "a parent snapshot was given for a plan without a warm start");
    }
    return absl::OkStatus();
  }
  if (parent == nullptr || parent->posterior == nullptr) {
    return absl::InvalidArgumentError(
        absl::StrCat("the plan warm-starts from parent_snapshot_id '",
                     plan.parent_snapshot_id, "' but no posterior was given"));
  }
  const ModelSpec& a = parent->model;
  const ModelSpec& b = plan.model;
  if (a.input_dim != b.input_dim || a.hidden_sizes != b.hidden_sizes ||
      a.activations != b.activations || a.output_dim != b.output_dim ||
      a.likelihood != b.likelihood) {
    return absl::InvalidArgumentError(
        absl::StrCat("parent_snapshot_id '", plan.parent_snapshot_id,
                     "' has another architecture than the plan was made for"));
  }
  return absl::OkStatus();
}

absl::StatusOr<Snapshot> TrainImpl(const TrainingPlan& plan,
                                   const Dataset& data, const Snapshot* parent,
                                   const MethodRegistry& registry,
                                   const TrainCallbacks& callbacks,
                                   const Interrupt& interrupt,
                                   const Checkpoint* resume) {
  const auto start = std::chrono::steady_clock::now();
  BNN_RETURN_IF_ERROR(data.Validate());
  BNN_RETURN_IF_ERROR(CheckDataFitsPlan(plan, data));
  BNN_RETURN_IF_ERROR(CheckParentFitsPlan(plan, parent));
  if (callbacks.snapshot_every < 0 ||
      (callbacks.snapshot_every > 0 && !callbacks.on_snapshot)) {
    return absl::InvalidArgumentError(
        "snapshot_every must be >= 0 and needs on_snapshot");
  }
  const bool checkpoints =
      callbacks.checkpoint_every_steps > 0 ||
      callbacks.checkpoint_interval > absl::ZeroDuration() ||
      callbacks.checkpoint_on_interrupt;
  if (callbacks.checkpoint_every_steps < 0 ||
      callbacks.checkpoint_interval < absl::ZeroDuration() ||
      (checkpoints && !callbacks.on_checkpoint)) {
    return absl::InvalidArgumentError(
        "checkpoint_every_steps and checkpoint_interval must be >= 0, and "
        "they and checkpoint_on_interrupt need on_checkpoint");
  }
  // The training set's hash: the snapshot records it and checkpoints name
  // their data by it. Computed once, when first needed.
  std::string dataset_hash;
  if (resume != nullptr) {
    BNN_RETURN_IF_ERROR(CheckCheckpointFitsPlan(*resume, plan));
    dataset_hash = DatasetHash(data);
    if (dataset_hash != resume->dataset_hash) {
      return absl::InvalidArgumentError(absl::StrCat(
          "the checkpoint is of another training set: its rows hash to ",
          resume->dataset_hash, ", the given rows to ", dataset_hash));
    }
  }
  BNN_ASSIGN_OR_RETURN(std::unique_ptr<VariationalMethod> method,
                       registry.Create(plan.method, plan.params));
  const TrainOptions& options = plan.options;
  const ModelSpec& spec = plan.model;
  // A warm start keeps the parent's standardisation: its weights live in
  // those units. A fresh run standardises features (and regression targets)
  // on the training set.
  const Standardization standardization =
      parent != nullptr
          ? parent->standardization
          : FitStandardization(data, options.standardize, options.standardize);
  Dataset train = data;
  BNN_RETURN_IF_ERROR(standardization.Apply(&train));

  Rng root(options.seed);
  Rng init_rng = root.Fork(1);
  Rng batch_rng = root.Fork(2);
  Rng step_rng = root.Fork(3);
  BNN_RETURN_IF_ERROR(method->Initialize(spec, train, init_rng));
  if (parent != nullptr) {
    BNN_RETURN_IF_ERROR(
        method->WarmStart(*parent->posterior, plan.prior_from_parent));
  }

  const int64_t n = train.num_rows();
  const int64_t m = plan.batch_rows;
  if (std::min<int64_t>(method->batch_size(), n) != m) {
    return absl::InternalError(
        absl::StrCat(plan.method, " draws batches of ", method->batch_size(),
                     " rows after Initialize(); the plan counted ", m));
  }
  const int64_t steps_per_epoch = plan.steps_per_epoch;
  // Small steps run on one thread: the fork and join of parallel GEMMs
  // would cost more than the products (bnn/compute_threads.h).
  const ScopedComputeThreads threads(ComputeThreadsFor(
      LargestGemmFlops(spec, m * method->samples_per_step())));
  TrainProgress state;
  state.total_steps = plan.total_steps;
  const int epochs = plan.epochs;
  method->SetSchedule(steps_per_epoch, state.total_steps);

  // The loop's state between two steps (bnn/train/checkpoint.h,
  // TrainerState): the minibatch order, the rows of it the current pass has
  // used, and the pass's loss sums.
  std::vector<int64_t> order(n);
  int64_t position = 0;
  double epoch_loss = 0.0;
  int64_t epoch_rows = 0;
  double seconds_before = 0.0;  // a resumed run's training time
  if (resume != nullptr) {
    // Everything the run had drawn, accumulated and learned, replacing what
    // Initialize() and WarmStart() set up (which also sized the state).
    checkpoint::MethodState method_state;
    if (!method_state.ParseFromString(resume->method_state)) {
      return absl::DataLossError(
          "the checkpoint's method state is not a valid message: the "
          "checkpoint is corrupt");
    }
    BNN_RETURN_IF_ERROR(method->LoadState(method_state));
    const TrainerState& saved = resume->trainer;
    for (auto [rng, text] : {std::pair{&batch_rng, &saved.batch_rng},
                             std::pair{&step_rng, &saved.step_rng}}) {
      if (absl::Status loaded = rng->LoadState(*text); !loaded.ok()) {
        return absl::InvalidArgumentError(
            absl::StrCat("checkpoint trainer state: ", loaded.message()));
      }
    }
    state.step = saved.step;
    state.epoch = saved.epoch;
    order = saved.order;
    position = saved.position;
    epoch_loss = saved.epoch_loss;
    epoch_rows = saved.epoch_rows;
    seconds_before = saved.seconds;
  } else {
    std::iota(order.begin(), order.end(), 0);
  }

  // Seconds spent in on_snapshot and on_checkpoint, left out of the
  // training time.
  double observer_seconds = 0.0;
  auto seconds_so_far = [&] {
    return seconds_before +
           std::chrono::duration<double>(std::chrono::steady_clock::now() -
                                         start)
               .count() -
           observer_seconds;
  };
  // Runs an observer, its time left out of the training time.
  auto observe = [&](auto&& observer) {
    const auto observer_start = std::chrono::steady_clock::now();
    const absl::Status status = observer();
    observer_seconds += std::chrono::duration<double>(
                            std::chrono::steady_clock::now() - observer_start)
                            .count();
    return status;
  };
  auto make_snapshot = [&](double final_loss) {
    Snapshot snapshot;
    snapshot.library_version = kLibraryVersion;
    snapshot.method = std::string(method->name());
    snapshot.params = method->Params();
    snapshot.model = spec;
    snapshot.task = data.task;
    snapshot.class_values = data.class_values;
    snapshot.standardization = standardization;
    snapshot.noise_precision = method->noise_precision();
    snapshot.training.dataset_id = plan.dataset_id;
    snapshot.training.dataset_version = plan.dataset_version;
    snapshot.training.num_train = n;
    snapshot.training.steps = state.step;
    snapshot.training.epochs = state.epoch;
    snapshot.training.final_loss = final_loss;
    snapshot.training.seconds = seconds_so_far();
    snapshot.training.seed = options.seed;
    snapshot.training.parent_snapshot_id = plan.parent_snapshot_id;
    snapshot.training.prior_from_parent = plan.prior_from_parent;
    snapshot.posterior = method->ExportPosterior();
    snapshot.created_unix_ms = NowUnixMs();
    return snapshot;
  };
  // The run's state now, between two steps, to on_checkpoint.
  int64_t last_checkpoint_step = state.step;
  double last_checkpoint_seconds = seconds_so_far();
  auto checkpoint = [&] {
    // The training time up to here; what follows is the observer's.
    const double seconds = seconds_so_far();
    last_checkpoint_step = state.step;
    last_checkpoint_seconds = seconds;
    return observe([&]() -> absl::Status {
      Checkpoint c;
      c.library_version = kLibraryVersion;
      c.plan = plan;
      if (dataset_hash.empty()) dataset_hash = DatasetHash(data);
      c.dataset_hash = dataset_hash;
      c.trainer = {state.step,
                   state.epoch,
                   order,
                   position,
                   epoch_loss,
                   epoch_rows,
                   batch_rng.SaveState(),
                   step_rng.SaveState(),
                   seconds};
      {
        checkpoint::MethodState method_state;
        BNN_RETURN_IF_ERROR(method->SaveState(&method_state));
        if (method_state.ByteSizeLong() >= static_cast<size_t>(INT_MAX)) {
          return absl::ResourceExhaustedError(
              absl::StrCat("the state of ", method->name(), " takes ",
                           method_state.ByteSizeLong(),
                           " bytes, beyond the 2 GiB limit of a checkpoint"));
        }
        method_state.SerializeToString(&c.method_state);
      }
      c.created_unix_ms = NowUnixMs();
      return callbacks.on_checkpoint(c);
    });
  };
  const double checkpoint_interval =
      absl::ToDoubleSeconds(callbacks.checkpoint_interval);

  std::vector<int64_t> batch;
  batch.reserve(m);
  while (state.step < state.total_steps) {
    // Between two steps: a periodic checkpoint, then the interrupt.
    bool checkpointed = false;
    if (state.step > last_checkpoint_step &&
        ((callbacks.checkpoint_every_steps > 0 &&
          state.step % callbacks.checkpoint_every_steps == 0) ||
         (checkpoint_interval > 0 &&
          seconds_so_far() - last_checkpoint_seconds >= checkpoint_interval))) {
      BNN_RETURN_IF_ERROR(checkpoint());
      checkpointed = true;
    }
    if (absl::Status stop = interrupt.Check(); !stop.ok()) {
      const std::string stopped =
          absl::StrCat(stop.message(), " after ", state.step, " steps");
      if (callbacks.checkpoint_on_interrupt && !checkpointed) {
        if (absl::Status saved = checkpoint(); !saved.ok()) {
          return absl::Status(saved.code(),
                              absl::StrCat(stopped, "; its checkpoint failed: ",
                                           saved.message()));
        }
      }
      return absl::Status(stop.code(), stopped);
    }
    // A pass starts by shuffling the previous pass's order.
    if (position == 0) {
      std::shuffle(order.begin(), order.end(), batch_rng.engine());
      epoch_loss = 0.0;
      epoch_rows = 0;
    }
    const int64_t end = std::min(n, position + m);
    batch.assign(order.begin() + position, order.begin() + end);
    BNN_ASSIGN_OR_RETURN(StepStats stats, method->Step(batch, step_rng));
    epoch_loss += stats.loss * (end - position);
    epoch_rows += end - position;
    position = end;
    ++state.step;
    state.loss = epoch_loss / epoch_rows;
    if (callbacks.progress) callbacks.progress(state);
    if (callbacks.snapshot_every > 0 &&
        (state.step % callbacks.snapshot_every == 0 ||
         state.step == state.total_steps)) {
      BNN_RETURN_IF_ERROR(observe(
          [&] { return callbacks.on_snapshot(make_snapshot(state.loss)); }));
    }
    // The pass ends with its rows, or with the run's last (partial) step.
    if (position == n || state.step == state.total_steps) {
      epoch_loss /= static_cast<double>(epoch_rows);
      ++state.epoch;
      position = 0;
      if (callbacks.progress) callbacks.progress(state);
    }
  }

  // The exported copy must not coexist with the step's workspaces at the
  // run's memory peak (VariationalMethod::ReleaseWorkspaces).
  method->ReleaseWorkspaces();
  Snapshot snapshot = make_snapshot(epoch_loss);
  snapshot.training.dataset_hash =
      dataset_hash.empty() ? DatasetHash(data) : dataset_hash;
  snapshot.training.epochs = epochs;
  return snapshot;
}

}  // namespace

absl::StatusOr<Snapshot> Train(const TrainingPlan& plan, const Dataset& data,
                               const Snapshot* parent,
                               const MethodRegistry& registry,
                               const TrainCallbacks& callbacks,
                               const Interrupt& interrupt,
                               const Checkpoint* resume) {
  return FailOnAllocationError("training", [&] {
    return TrainImpl(plan, data, parent, registry, callbacks, interrupt,
                     resume);
  });
}

absl::StatusOr<Snapshot> Train(const TrainRequest& request, const Dataset& data,
                               const MethodRegistry& registry,
                               const ProgressCallback& progress,
                               const Interrupt& interrupt) {
  std::optional<ParentModel> parent;
  if (request.parent != nullptr) {
    parent = ParentModelOf(*request.parent, request.parent_snapshot_id);
  }
  BNN_ASSIGN_OR_RETURN(
      const TrainingPlan plan,
      ResolveTrainingPlan(request, ShapeOf(data),
                          parent.has_value() ? &*parent : nullptr, registry));
  TrainCallbacks callbacks;
  callbacks.progress = progress;
  callbacks.snapshot_every = request.snapshot_every;
  callbacks.on_snapshot = request.on_snapshot;
  return Train(plan, data, request.parent.get(), registry, callbacks,
               interrupt);
}

}  // namespace bnn
