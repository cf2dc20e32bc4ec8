#include "server/jobs/job_plan.h"

#include <optional>
#include <string>
#include <vector>

#include <absl/strings/str_cat.h>

#include "bnn/data/dataset.h"
#include "bnn/model/model_spec.h"
#include "bnn/status.h"

namespace bnn::server {
namespace {

absl::StatusOr<std::vector<Activation>> ActivationsOf(
    const google::protobuf::RepeatedPtrField<std::string>& names) {
  std::vector<Activation> activations;
  for (const std::string& name : names) {
    BNN_ASSIGN_OR_RETURN(const Activation activation, StringToActivation(name));
    activations.push_back(activation);
  }
  return activations;
}

}  // namespace

absl::StatusOr<DatasetShape> ShapeOfDataset(const store::DatasetMeta& dataset) {
  DatasetShape shape;
  BNN_ASSIGN_OR_RETURN(shape.task, StringToTask(dataset.task()));
  shape.num_rows = dataset.num_rows();
  shape.num_features = dataset.num_features();
  shape.num_classes = dataset.num_classes();
  shape.class_values.assign(dataset.class_values().begin(),
                            dataset.class_values().end());
  return shape;
}

absl::StatusOr<ParentModel> ParentModelOfSnapshot(
    const store::SnapshotMeta& snapshot) {
  ParentModel parent;
  parent.snapshot_id = snapshot.snapshot_id();
  BNN_ASSIGN_OR_RETURN(parent.task, StringToTask(snapshot.task()));
  parent.class_values.assign(snapshot.class_values().begin(),
                             snapshot.class_values().end());
  parent.model =
      ModelSpec::ForTask(parent.task, snapshot.num_features(),
                         static_cast<int>(parent.class_values.size()),
                         std::vector<int>(snapshot.hidden_sizes().begin(),
                                          snapshot.hidden_sizes().end()),
                         Activation::kRelu);
  BNN_ASSIGN_OR_RETURN(parent.model.activations,
                       ActivationsOf(snapshot.activations()));
  BNN_RETURN_IF_ERROR(parent.model.Validate());
  return parent;
}

store::JobRecord JobRecordOf(const TrainingPlan& plan) {
  store::JobRecord job;
  job.set_dataset_id(plan.dataset_id);
  job.set_dataset_version(plan.dataset_version);
  job.set_method(plan.method);
  job.mutable_params()->insert(plan.params.begin(), plan.params.end());
  job.mutable_hidden_sizes()->Add(plan.model.hidden_sizes.begin(),
                                  plan.model.hidden_sizes.end());
  for (const Activation activation : plan.model.activations) {
    job.add_activations(std::string(ActivationToString(activation)));
  }
  job.set_epochs(plan.options.epochs);
  job.set_steps(plan.options.steps);
  job.set_seed(plan.options.seed);
  job.set_standardize(plan.options.standardize);
  job.set_parent_snapshot_id(plan.parent_snapshot_id);
  job.set_prior_from_parent(plan.prior_from_parent);
  job.set_total_steps(plan.total_steps);
  return job;
}

absl::StatusOr<TrainingPlan> PlanOfJob(const store::JobRecord& job,
                                       const store::DatasetMeta& dataset,
                                       const store::SnapshotMeta* parent,
                                       const MethodRegistry& registry) {
  TrainRequest request;
  request.method = job.method();
  request.params = ParamMap(job.params().begin(), job.params().end());
  request.options.epochs = job.epochs();
  request.options.steps = job.steps();
  request.options.seed = job.seed();
  if (job.has_standardize()) request.options.standardize = job.standardize();
  request.hidden_sizes.assign(job.hidden_sizes().begin(),
                              job.hidden_sizes().end());
  BNN_ASSIGN_OR_RETURN(request.activations, ActivationsOf(job.activations()));
  request.dataset_id = job.dataset_id();
  request.dataset_version = job.dataset_version();
  request.parent_snapshot_id = job.parent_snapshot_id();
  request.prior_from_parent = job.prior_from_parent();
  BNN_ASSIGN_OR_RETURN(const DatasetShape shape, ShapeOfDataset(dataset));
  std::optional<ParentModel> parent_model;
  if (parent != nullptr) {
    BNN_ASSIGN_OR_RETURN(parent_model, ParentModelOfSnapshot(*parent));
  }
  return ResolveTrainingPlan(
      request, shape, parent_model.has_value() ? &*parent_model : nullptr,
      registry);
}

}  // namespace bnn::server
