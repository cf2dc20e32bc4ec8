#include "server/training_request.h"

#include <cstdint>
#include <string>
#include <vector>

#include <absl/random/random.h>
#include <absl/strings/numbers.h>
#include <absl/strings/str_cat.h>

#include "bnn/data/dataset.h"
#include "bnn/model/model_spec.h"
#include "bnn/status.h"
#include "bnn/train/trainer.h"

#include "server/number_format.h"
#include "server/request_validation.h"

namespace bnn::server {
namespace {

using google::protobuf::FieldDescriptor;

// "epochs"/"seed" from typed fields, then `params` overrides, resolved as
// bnn::Train will. Without a seed the job gets a random one, recorded.
absl::StatusOr<TrainOptions> ResolveOptions(
    const v1::StartTrainingRequest& request, const ParamMap& params) {
  TrainRequest core_request;
  core_request.params = params;
  if (request.has_epochs()) core_request.options.epochs = request.epochs();
  if (request.has_seed()) {
    core_request.options.seed = request.seed();
  } else {
    absl::BitGen gen;
    core_request.options.seed = absl::Uniform<uint64_t>(gen);
  }
  return ResolveTrainOptions(core_request);
}

}  // namespace

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

absl::StatusOr<store::JobRecord> BuildTrainingJob(
    const v1::StartTrainingRequest& request, const store::DatasetMeta& dataset,
    const MethodRegistry& registry) {
  if (request.method().empty()) {
    return absl::InvalidArgumentError("method is required; see ListMethods");
  }
  BNN_RETURN_IF_ERROR(registry.Find(request.method()).status());

  // Typed options: whichever field of the oneof is set, by reflection.
  ParamMap params;
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
        params, TypedOptionsToParams(reflection->GetMessage(request, typed)));
  }
  for (const auto& [key, value] : request.params()) params[key] = value;

  BNN_ASSIGN_OR_RETURN(const TrainOptions options,
                       ResolveOptions(request, params));
  params["epochs"] = absl::StrCat(options.epochs);
  params["seed"] = absl::StrCat(options.seed);
  // Building the method rejects unknown parameters and invalid values.
  BNN_RETURN_IF_ERROR(
      registry.Validate(request.method(), params, TrainerParamNames()));

  BNN_RETURN_IF_ERROR(ValidateModelSpec(request.model()));
  BNN_ASSIGN_OR_RETURN(const Task task, StringToTask(dataset.task()));
  std::vector<int> hidden_sizes(request.model().hidden_sizes().begin(),
                                request.model().hidden_sizes().end());
  std::vector<Activation> activations;
  for (const std::string& name : request.model().activations()) {
    BNN_ASSIGN_OR_RETURN(const Activation activation, StringToActivation(name));
    activations.push_back(activation);
  }
  if (activations.empty()) activations.push_back(Activation::kRelu);
  // The architecture as bnn::Train will build it (parameter count bound).
  ModelSpec spec =
      ModelSpec::ForTask(task, dataset.num_features(), dataset.num_classes(),
                         hidden_sizes, activations[0]);
  if (activations.size() == hidden_sizes.size()) spec.activations = activations;
  BNN_RETURN_IF_ERROR(spec.Validate());

  store::JobRecord job;
  job.set_dataset_id(dataset.dataset_id());
  job.set_dataset_version(dataset.version());
  job.set_method(request.method());
  job.mutable_params()->insert(params.begin(), params.end());
  job.mutable_hidden_sizes()->Add(hidden_sizes.begin(), hidden_sizes.end());
  for (const Activation activation : activations) {
    job.add_activations(std::string(ActivationToString(activation)));
  }
  job.set_epochs(options.epochs);
  job.set_seed(options.seed);
  return job;
}

}  // namespace bnn::server
