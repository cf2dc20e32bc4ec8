#include "bnn/train/plan.h"

#include <algorithm>
#include <memory>
#include <utility>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

#include "bnn/io/snapshot.h"
#include "bnn/methods/method.h"
#include "bnn/status.h"

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

// `params` without the trainer's keys.
ParamMap MethodParams(const ParamMap& params) {
  const std::vector<std::string>& trainer = TrainerParamNames();
  ParamMap own;
  for (const auto& [key, value] : params) {
    if (std::find(trainer.begin(), trainer.end(), key) == trainer.end()) {
      own.emplace(key, value);
    }
  }
  return own;
}

std::string ClassesOf(const std::vector<double>& values) {
  if (values.empty()) return "";
  return absl::StrCat(" with classes ", absl::StrJoin(values, ", "));
}

std::string WidthsOf(const std::vector<int>& widths) {
  return absl::StrCat("[", absl::StrJoin(widths, ", "), "]");
}

std::string ActivationsOf(const std::vector<Activation>& activations) {
  return absl::StrCat("[",
                      absl::StrJoin(activations, ", ",
                                    [](std::string* out, Activation a) {
                                      absl::StrAppend(out,
                                                      ActivationToString(a));
                                    }),
                      "]");
}

// `activations` as one per hidden layer: a single one applies to all.
std::vector<Activation> PerLayer(std::vector<Activation> activations,
                                 size_t num_hidden) {
  if (activations.size() == 1 && num_hidden != 1) {
    activations.assign(num_hidden, activations[0]);
  }
  return activations;
}

// A warm start keeps the parent's architecture and standardisation, so the
// data must have the parent's inputs and outputs, and the requested hidden
// layers must be empty or the parent's. Returns the parent's architecture.
absl::StatusOr<ModelSpec> ParentSpec(const TrainRequest& request,
                                     const DatasetShape& data,
                                     const ParentModel& parent) {
  const std::string parent_name =
      absl::StrCat("parent_snapshot_id '", parent.snapshot_id, "'");
  const std::string dataset_name =
      request.dataset_id.empty()
          ? std::string("the training set")
          : absl::StrCat("dataset_id '", request.dataset_id, "'");
  if (parent.model.input_dim != data.num_features) {
    return absl::InvalidArgumentError(
        absl::StrCat(parent_name, " takes ", parent.model.input_dim,
                     " features; ", dataset_name, " has ", data.num_features));
  }
  if (parent.task != data.task || parent.class_values != data.class_values) {
    return absl::InvalidArgumentError(
        absl::StrCat(parent_name, " is a ", TaskToString(parent.task), " model",
                     ClassesOf(parent.class_values), "; ", dataset_name, " is ",
                     TaskToString(data.task), ClassesOf(data.class_values)));
  }
  constexpr absl::string_view kKeep =
      "; leave it empty to keep the parent's architecture";
  if (!request.hidden_sizes.empty() &&
      request.hidden_sizes != parent.model.hidden_sizes) {
    return absl::InvalidArgumentError(
        absl::StrCat("hidden_sizes ", WidthsOf(request.hidden_sizes),
                     " differ from the parent snapshot's ",
                     WidthsOf(parent.model.hidden_sizes), kKeep));
  }
  if (!request.activations.empty()) {
    const std::vector<Activation> activations =
        PerLayer(request.activations, parent.model.hidden_sizes.size());
    if (activations != parent.model.activations) {
      return absl::InvalidArgumentError(
          absl::StrCat("activations ", ActivationsOf(activations),
                       " differ from the parent snapshot's ",
                       ActivationsOf(parent.model.activations), kKeep));
    }
  }
  return parent.model;
}

// The architecture of a fresh run: the requested hidden layers on the data's
// inputs and outputs.
absl::StatusOr<ModelSpec> RequestedSpec(const TrainRequest& request,
                                        const DatasetShape& data) {
  if (data.num_features < 1 || data.num_features > kMaxLayerWidth) {
    return absl::InvalidArgumentError(
        absl::StrCat("the training set has ", data.num_features,
                     " features; a model takes 1 to ", kMaxLayerWidth));
  }
  std::vector<Activation> activations = request.activations;
  if (activations.empty()) activations.push_back(Activation::kRelu);
  ModelSpec spec = ModelSpec::ForTask(
      data.task, static_cast<int>(data.num_features), data.num_classes,
      request.hidden_sizes, Activation::kRelu);
  spec.activations = PerLayer(std::move(activations), spec.hidden_sizes.size());
  BNN_RETURN_IF_ERROR(spec.Validate());
  return spec;
}

}  // namespace

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
  return {data.task, data.num_rows(), data.num_features, data.num_classes,
          data.class_values};
}

ParentModel ParentModelOf(const Snapshot& snapshot, std::string snapshot_id) {
  return {std::move(snapshot_id), snapshot.model, snapshot.task,
          snapshot.class_values};
}

absl::StatusOr<TrainingPlan> ResolveTrainingPlan(
    const TrainRequest& request, const DatasetShape& data,
    const ParentModel* parent, const MethodRegistry& registry) {
  if (request.method.empty()) {
    return absl::InvalidArgumentError("method is required; see ListMethods");
  }
  if (data.num_rows < 1) {
    return absl::InvalidArgumentError("the training set has no rows");
  }
  TrainingPlan plan;
  plan.method = request.method;
  plan.options = request.options;
  BNN_RETURN_IF_ERROR(ApplyTrainerParams(request.params, &plan.options));
  BNN_RETURN_IF_ERROR(plan.options.Validate());
  plan.params = MethodParams(request.params);
  // Building the method rejects unknown parameters and invalid values.
  BNN_ASSIGN_OR_RETURN(
      const std::unique_ptr<VariationalMethod> method,
      registry.Create(plan.method, plan.params, TrainerParamNames()));

  if (parent != nullptr) {
    BNN_ASSIGN_OR_RETURN(plan.model, ParentSpec(request, data, *parent));
    plan.warm_start = true;
    plan.parent_snapshot_id = parent->snapshot_id;
    plan.prior_from_parent = request.prior_from_parent;
  } else if (!request.parent_snapshot_id.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat("parent_snapshot_id '", request.parent_snapshot_id,
                     "' is set but its snapshot was not given"));
  } else if (request.prior_from_parent) {
    return absl::InvalidArgumentError(
        "prior_from_parent is set without parent_snapshot_id; the prior "
        "comes from the parent snapshot");
  } else {
    BNN_ASSIGN_OR_RETURN(plan.model, RequestedSpec(request, data));
  }
  plan.data = data;
  plan.dataset_id = request.dataset_id;
  plan.dataset_version = request.dataset_version;

  // Full-batch methods report batch size 0 before Initialize().
  const int64_t batch = method->batch_size();
  plan.batch_rows =
      batch > 0 ? std::min<int64_t>(batch, data.num_rows) : data.num_rows;
  plan.steps_per_epoch =
      (data.num_rows + plan.batch_rows - 1) / plan.batch_rows;
  plan.total_steps = plan.options.steps > 0
                         ? plan.options.steps
                         : plan.steps_per_epoch * plan.options.epochs;
  plan.epochs = static_cast<int>((plan.total_steps + plan.steps_per_epoch - 1) /
                                 plan.steps_per_epoch);
  return plan;
}

absl::Status CheckTrainParams(absl::string_view method, const ParamMap& params,
                              const MethodRegistry& registry) {
  TrainOptions options;
  BNN_RETURN_IF_ERROR(ApplyTrainerParams(params, &options));
  BNN_RETURN_IF_ERROR(options.Validate());
  return registry.Validate(method, MethodParams(params), TrainerParamNames());
}

}  // namespace bnn
