#include "bnn/train/trainer.h"

#include <algorithm>
#include <chrono>
#include <numeric>
#include <optional>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"

#include "bnn/compute_threads.h"
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
                                   const Interrupt& interrupt) {
  const auto start = std::chrono::steady_clock::now();
  BNN_RETURN_IF_ERROR(data.Validate());
  BNN_RETURN_IF_ERROR(CheckDataFitsPlan(plan, data));
  BNN_RETURN_IF_ERROR(CheckParentFitsPlan(plan, parent));
  if (callbacks.snapshot_every < 0 ||
      (callbacks.snapshot_every > 0 && !callbacks.on_snapshot)) {
    return absl::InvalidArgumentError(
        "snapshot_every must be >= 0 and needs on_snapshot");
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

  // Seconds spent in on_snapshot, left out of the training time.
  double observer_seconds = 0.0;
  auto seconds_so_far = [&] {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() -
                                         start)
               .count() -
           observer_seconds;
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

  std::vector<int64_t> order(n);
  std::iota(order.begin(), order.end(), 0);
  std::vector<int64_t> batch;
  batch.reserve(m);
  double epoch_loss = 0.0;
  for (int epoch = 0; epoch < epochs; ++epoch) {
    std::shuffle(order.begin(), order.end(), batch_rng.engine());
    epoch_loss = 0.0;
    int64_t epoch_rows = 0;
    for (int64_t begin = 0; begin < n && state.step < state.total_steps;
         begin += m) {
      if (absl::Status stop = interrupt.Check(); !stop.ok()) {
        return absl::Status(stop.code(), absl::StrCat(stop.message(), " after ",
                                                      state.step, " steps"));
      }
      const int64_t end = std::min(n, begin + m);
      batch.assign(order.begin() + begin, order.begin() + end);
      BNN_ASSIGN_OR_RETURN(StepStats stats, method->Step(batch, step_rng));
      epoch_loss += stats.loss * (end - begin);
      epoch_rows += end - begin;
      ++state.step;
      state.loss = epoch_loss / epoch_rows;
      if (callbacks.progress) callbacks.progress(state);
      if (callbacks.snapshot_every > 0 &&
          (state.step % callbacks.snapshot_every == 0 ||
           state.step == state.total_steps)) {
        const auto observer_start = std::chrono::steady_clock::now();
        const absl::Status observed =
            callbacks.on_snapshot(make_snapshot(state.loss));
        observer_seconds +=
            std::chrono::duration<double>(std::chrono::steady_clock::now() -
                                          observer_start)
                .count();
        BNN_RETURN_IF_ERROR(observed);
      }
    }
    epoch_loss /= static_cast<double>(epoch_rows);
    state.epoch = epoch + 1;
    if (callbacks.progress) callbacks.progress(state);
  }

  Snapshot snapshot = make_snapshot(epoch_loss);
  snapshot.training.dataset_hash = DatasetHash(data);
  snapshot.training.epochs = epochs;
  return snapshot;
}

}  // namespace

absl::StatusOr<Snapshot> Train(const TrainingPlan& plan, const Dataset& data,
                               const Snapshot* parent,
                               const MethodRegistry& registry,
                               const TrainCallbacks& callbacks,
                               const Interrupt& interrupt) {
  return FailOnAllocationError("training", [&] {
    return TrainImpl(plan, data, parent, registry, callbacks, interrupt);
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
