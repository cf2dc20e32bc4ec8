#include "bnn/train/trainer.h"

#include <algorithm>
#include <chrono>
#include <numeric>

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

constexpr int kMaxEpochs = 1000000;
// Keeps the pass count within an int even with one step per pass.
constexpr int64_t kMaxSteps = int64_t{1} << 30;

// Moves "epochs"/"steps"/"seed"/"standardize" from `params` into `options`.
absl::Status ApplyTrainerParams(const ParamMap& params, TrainOptions* options) {
  if (auto it = params.find("epochs"); it != params.end()) {
    if (!absl::SimpleAtoi(it->second, &options->epochs)) {
      return absl::InvalidArgumentError(absl::StrCat(
          "parameter 'epochs': '", it->second, "' is not a valid int"));
    }
  }
  if (auto it = params.find("steps"); it != params.end()) {
    if (!absl::SimpleAtoi(it->second, &options->steps)) {
      return absl::InvalidArgumentError(absl::StrCat(
          "parameter 'steps': '", it->second, "' is not a valid int"));
    }
  }
  if (auto it = params.find("standardize"); it != params.end()) {
    if (!absl::SimpleAtob(it->second, &options->standardize)) {
      return absl::InvalidArgumentError(absl::StrCat(
          "parameter 'standardize': '", it->second, "' is not a valid bool"));
    }
  }
  if (auto it = params.find("seed"); it != params.end()) {
    if (!absl::SimpleAtoi(it->second, &options->seed)) {
      return absl::InvalidArgumentError(absl::StrCat(
          "parameter 'seed': '", it->second, "' is not a valid uint64"));
    }
  }
  return absl::OkStatus();
}

// The architecture of a warm-started run: the parent's, after checking that
// the data and the request fit it.
absl::StatusOr<ModelSpec> ParentSpec(const TrainRequest& request,
                                     const Dataset& data) {
  const Snapshot& parent = *request.parent;
  if (parent.posterior == nullptr) {
    return absl::InvalidArgumentError("the parent snapshot has no posterior");
  }
  if (parent.model.input_dim != data.num_features || parent.task != data.task ||
      parent.class_values != data.class_values) {
    return absl::InvalidArgumentError(absl::StrCat(
        "the parent snapshot was trained on ", parent.model.input_dim,
        " features (", TaskToString(parent.task), ", ",
        parent.class_values.size(), " classes); this dataset has ",
        data.num_features, " (", TaskToString(data.task), ", ",
        data.class_values.size(), " classes)"));
  }
  if (!request.hidden_sizes.empty() &&
      request.hidden_sizes != parent.model.hidden_sizes) {
    return absl::InvalidArgumentError(
        "hidden_sizes must be empty or equal to the parent snapshot's: a warm "
        "start keeps the parent's architecture");
  }
  return parent.model;
}

// The architecture of a fresh run: the requested hidden layers on the data's
// inputs and outputs.
absl::StatusOr<ModelSpec> RequestedSpec(const TrainRequest& request,
                                        const DatasetShape& data) {
  std::vector<Activation> activations = request.activations;
  if (activations.size() == 1 && request.hidden_sizes.size() != 1) {
    activations.assign(request.hidden_sizes.size(), activations[0]);
  }
  ModelSpec spec = ModelSpec::ForTask(
      data.task, static_cast<int>(data.num_features), data.num_classes,
      request.hidden_sizes, Activation::kRelu);
  spec.activations = activations;
  BNN_RETURN_IF_ERROR(spec.Validate());
  return spec;
}

// Minibatch steps of a run over `num_rows` rows in batches of `batch` (0:
// the whole set, as full-batch methods report before Initialize()).
int64_t TotalSteps(const TrainOptions& options, int64_t num_rows,
                   int64_t batch) {
  const int64_t m = batch > 0 ? std::min<int64_t>(batch, num_rows) : num_rows;
  const int64_t steps_per_epoch = (num_rows + m - 1) / m;
  return options.steps > 0 ? options.steps : steps_per_epoch * options.epochs;
}

int64_t NowUnixMs() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

}  // namespace

absl::StatusOr<TrainOptions> ResolveTrainOptions(const TrainRequest& request) {
  TrainOptions options = request.options;
  BNN_RETURN_IF_ERROR(ApplyTrainerParams(request.params, &options));
  BNN_RETURN_IF_ERROR(options.Validate());
  return options;
}

absl::Status TrainOptions::Validate() const {
  BNN_RETURN_IF_ERROR(CheckIntRange("epochs", epochs, 1, kMaxEpochs));
  return CheckIntRange("steps", steps, 0, kMaxSteps);
}

const std::vector<std::string>& TrainerParamNames() {
  static const auto* names =
      new std::vector<std::string>{"epochs", "steps", "seed", "standardize"};
  return *names;
}

DatasetShape ShapeOf(const Dataset& data) {
  return {data.task, data.num_rows(), data.num_features, data.num_classes};
}

absl::StatusOr<MemoryEstimate> EstimateTrainingMemory(
    const TrainRequest& request, const DatasetShape& data,
    const MethodRegistry& registry) {
  BNN_ASSIGN_OR_RETURN(const TrainOptions options,
                       ResolveTrainOptions(request));
  BNN_ASSIGN_OR_RETURN(
      const std::unique_ptr<VariationalMethod> method,
      registry.Create(request.method, request.params, TrainerParamNames()));
  ModelSpec spec;
  if (request.parent != nullptr) {
    spec = request.parent->model;
  } else {
    BNN_ASSIGN_OR_RETURN(spec, RequestedSpec(request, data));
  }
  const int64_t n = std::max<int64_t>(1, data.num_rows);
  const MemoryEstimate own = method->EstimateMemory(
      spec, n, TotalSteps(options, n, method->batch_size()));
  const int64_t dataset = DatasetBytes(n, data.num_features);

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

absl::StatusOr<Snapshot> TrainImpl(const TrainRequest& request,
                                   const Dataset& data,
                                   const MethodRegistry& registry,
                                   const ProgressCallback& progress,
                                   const Interrupt& interrupt) {
  const auto start = std::chrono::steady_clock::now();
  BNN_RETURN_IF_ERROR(data.Validate());
  if (data.num_rows() < 1) {
    return absl::InvalidArgumentError("the training set has no rows");
  }
  BNN_ASSIGN_OR_RETURN(const TrainOptions options,
                       ResolveTrainOptions(request));
  if (request.snapshot_every < 0 ||
      (request.snapshot_every > 0 && !request.on_snapshot)) {
    return absl::InvalidArgumentError(
        "snapshot_every must be >= 0 and needs on_snapshot");
  }
  BNN_ASSIGN_OR_RETURN(
      std::unique_ptr<VariationalMethod> method,
      registry.Create(request.method, request.params, TrainerParamNames()));

  ModelSpec spec;
  Standardization standardization;
  if (request.parent != nullptr) {
    BNN_ASSIGN_OR_RETURN(spec, ParentSpec(request, data));
    // The parent's weights live in its standardised units.
    standardization = request.parent->standardization;
  } else {
    BNN_ASSIGN_OR_RETURN(spec, RequestedSpec(request, ShapeOf(data)));
    // Standardise features (and regression targets) on the training set.
    standardization =
        FitStandardization(data, options.standardize, options.standardize);
  }
  Dataset train = data;
  BNN_RETURN_IF_ERROR(standardization.Apply(&train));

  Rng root(options.seed);
  Rng init_rng = root.Fork(1);
  Rng batch_rng = root.Fork(2);
  Rng step_rng = root.Fork(3);
  BNN_RETURN_IF_ERROR(method->Initialize(spec, train, init_rng));
  if (request.parent != nullptr) {
    BNN_RETURN_IF_ERROR(method->WarmStart(*request.parent->posterior,
                                          request.prior_from_parent));
  }

  const int64_t n = train.num_rows();
  const int64_t m = std::min<int64_t>(method->batch_size(), n);
  const int64_t steps_per_epoch = (n + m - 1) / m;
  // Small steps run on one thread: the fork and join of parallel GEMMs
  // would cost more than the products (bnn/compute_threads.h).
  const ScopedComputeThreads threads(ComputeThreadsFor(
      LargestGemmFlops(spec, m * method->samples_per_step())));
  TrainProgress state;
  state.total_steps = TotalSteps(options, n, m);
  const int epochs = static_cast<int>(
      (state.total_steps + steps_per_epoch - 1) / steps_per_epoch);
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
    snapshot.training.dataset_id = request.dataset_id;
    snapshot.training.dataset_version = request.dataset_version;
    snapshot.training.num_train = n;
    snapshot.training.steps = state.step;
    snapshot.training.epochs = state.epoch;
    snapshot.training.final_loss = final_loss;
    snapshot.training.seconds = seconds_so_far();
    snapshot.training.seed = options.seed;
    snapshot.training.parent_snapshot_id = request.parent_snapshot_id;
    snapshot.training.prior_from_parent =
        request.parent != nullptr && request.prior_from_parent;
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
      if (progress) progress(state);
      if (request.snapshot_every > 0 &&
          (state.step % request.snapshot_every == 0 ||
           state.step == state.total_steps)) {
        const auto observer_start = std::chrono::steady_clock::now();
        const absl::Status observed =
            request.on_snapshot(make_snapshot(state.loss));
        observer_seconds +=
            std::chrono::duration<double>(std::chrono::steady_clock::now() -
                                          observer_start)
                .count();
        BNN_RETURN_IF_ERROR(observed);
      }
    }
    epoch_loss /= static_cast<double>(epoch_rows);
    state.epoch = epoch + 1;
    if (progress) progress(state);
  }

  Snapshot snapshot = make_snapshot(epoch_loss);
  snapshot.training.dataset_hash = DatasetHash(data);
  snapshot.training.epochs = epochs;
  return snapshot;
}

}  // namespace

absl::StatusOr<Snapshot> Train(const TrainRequest& request, const Dataset& data,
                               const MethodRegistry& registry,
                               const ProgressCallback& progress,
                               const Interrupt& interrupt) {
  return FailOnAllocationError("training", [&] {
    return TrainImpl(request, data, registry, progress, interrupt);
  });
}

}  // namespace bnn
