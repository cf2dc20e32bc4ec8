#include "server/api/bnn_v1/training_request.h"

#include <cstdint>
#include <optional>
#include <string>

#include <absl/random/random.h>
#include <absl/strings/str_cat.h>

#include "bnn/data/dataset.h"
#include "bnn/format.h"
#include "bnn/model/model_spec.h"
#include "bnn/status.h"

#include "server/api/bnn_v1/request_validation.h"
#include "server/jobs/job_plan.h"

namespace bnn::server {

using google::protobuf::FieldDescriptor;

absl::StatusOr<ParamMap> TypedOptionsToParams(
    const google::protobuf::Message& options) {
  const google::protobuf::Reflection* reflection = options.GetReflection();
  std::vector<const FieldDescriptor*> fields;
  reflection->ListFields(options, &fields);
  ParamMap params;
  for (const FieldDescriptor* field : fields) {
    const auto no_parameter_form = [&] {
      return absl::InvalidArgumentError(
          absl::StrCat(options.GetDescriptor()->name(), ".", field->name(),
                       " has no parameter form (repeated or message)"));
    };
    if (field->is_repeated()) return no_parameter_form();
    std::string value;
    switch (field->cpp_type()) {
      case FieldDescriptor::CPPTYPE_INT32:
        value = absl::StrCat(reflection->GetInt32(options, field));
        break;
      case FieldDescriptor::CPPTYPE_INT64:
        value = absl::StrCat(reflection->GetInt64(options, field));
        break;
      case FieldDescriptor::CPPTYPE_UINT32:
        value = absl::StrCat(reflection->GetUInt32(options, field));
        break;
      case FieldDescriptor::CPPTYPE_UINT64:
        value = absl::StrCat(reflection->GetUInt64(options, field));
        break;
      case FieldDescriptor::CPPTYPE_DOUBLE:
        value = ShortestDouble(reflection->GetDouble(options, field));
        break;
      case FieldDescriptor::CPPTYPE_FLOAT:
        value = ShortestDouble(reflection->GetFloat(options, field));
        break;
      case FieldDescriptor::CPPTYPE_BOOL:
        value = reflection->GetBool(options, field) ? "true" : "false";
        break;
      case FieldDescriptor::CPPTYPE_STRING:
        value = reflection->GetString(options, field);
        break;
      case FieldDescriptor::CPPTYPE_ENUM:
        value = reflection->GetEnum(options, field)->name();
        break;
      case FieldDescriptor::CPPTYPE_MESSAGE:
        return no_parameter_form();
    }
    params[field->name()] = std::move(value);
  }
  return params;
}

absl::StatusOr<TrainingJob> BuildTrainingJob(
    const v1::StartTrainingRequest& request, const store::DatasetMeta& dataset,
    const MethodRegistry& registry, const store::SnapshotMeta* parent) {
  if (request.method().empty()) {
    return absl::InvalidArgumentError("method is required; see ListMethods");
  }
  BNN_RETURN_IF_ERROR(registry.Find(request.method()).status());
  BNN_RETURN_IF_ERROR(ValidateTrainingModel(request));
  TrainRequest core;
  core.method = request.method();
  // Typed options: whichever field of the oneof is set, by reflection.
  const google::protobuf::Reflection* reflection = request.GetReflection();
  const google::protobuf::OneofDescriptor* oneof =
      request.GetDescriptor()->FindOneofByName("options");
  if (const FieldDescriptor* typed =
          reflection->GetOneofFieldDescriptor(request, oneof);
      typed != nullptr) {
    if (typed->name() != request.method()) {
      return absl::InvalidArgumentError(absl::StrCat("options.", typed->name(),
                                                     " is set but method is '",
                                                     request.method(), "'"));
    }
    BNN_ASSIGN_OR_RETURN(
        core.params,
        TypedOptionsToParams(reflection->GetMessage(request, typed)));
  }
  for (const auto& [key, value] : request.params()) core.params[key] = value;
  if (request.has_epochs()) core.options.epochs = request.epochs();
  if (request.has_seed()) {
    core.options.seed = request.seed();
  } else {
    absl::BitGen gen;
    core.options.seed = absl::Uniform<uint64_t>(gen);
  }

  BNN_RETURN_IF_ERROR(ValidateModelSpec(request.model()));
  core.hidden_sizes.assign(request.model().hidden_sizes().begin(),
                           request.model().hidden_sizes().end());
  for (const std::string& name : request.model().activations()) {
    BNN_ASSIGN_OR_RETURN(const Activation activation, StringToActivation(name));
    core.activations.push_back(activation);
  }
  core.dataset_id = dataset.dataset_id();
  core.dataset_version = dataset.version();
  core.parent_snapshot_id = request.parent_snapshot_id();
  core.prior_from_parent = request.prior_from_parent();

  BNN_ASSIGN_OR_RETURN(const DatasetShape shape, ShapeOfDataset(dataset));
  std::optional<ParentModel> parent_model;
  if (parent != nullptr) {
    BNN_ASSIGN_OR_RETURN(parent_model, ParentModelOfSnapshot(*parent));
  }
  TrainingJob job;
  BNN_ASSIGN_OR_RETURN(
      job.plan,
      ResolveTrainingPlan(core, shape,
                          parent_model.has_value() ? &*parent_model : nullptr,
                          registry));
  job.record = JobRecordOf(job.plan);
  job.record.set_model_name(request.model_name());
  job.record.set_publish(request.publish());
  return job;
}

}  // namespace bnn::server
