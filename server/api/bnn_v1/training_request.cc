#include "server/api/bnn_v1/training_request.h"

#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include <absl/random/random.h>
#include <absl/strings/numbers.h>
#include <absl/strings/str_cat.h>
#include <absl/strings/str_join.h>

#include "bnn/data/dataset.h"
#include "bnn/format.h"
#include "bnn/model/model_spec.h"
#include "bnn/status.h"
#include "bnn/train/trainer.h"

#include "server/api/bnn_v1/request_validation.h"

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

// The hidden layers of a network.
struct Architecture {
  std::vector<int> hidden_sizes;
  // One per hidden layer, or one for all; empty for the default (relu).
  std::vector<Activation> activations;
};

// Hidden widths and activation names (validated by ValidateModelSpec or
// stored in a snapshot) as the core types.
absl::StatusOr<Architecture> ParseArchitecture(
    const google::protobuf::RepeatedField<int32_t>& widths,
    const google::protobuf::RepeatedPtrField<std::string>& names) {
  Architecture architecture;
  architecture.hidden_sizes.assign(widths.begin(), widths.end());
  for (const std::string& name : names) {
    BNN_ASSIGN_OR_RETURN(const Activation activation, StringToActivation(name));
    architecture.activations.push_back(activation);
  }
  return architecture;
}

std::string ClassesOf(const google::protobuf::RepeatedField<double>& values) {
  if (values.empty()) return "";
  return absl::StrCat(" with classes ", absl::StrJoin(values, ", "));
}

template <typename T, typename Format>
std::string ListOf(const std::vector<T>& values, Format format) {
  return absl::StrCat("[", absl::StrJoin(values, ", ", format), "]");
}

// A warm start keeps the parent's architecture and standardisation, so the
// dataset must have the parent's inputs and outputs, and the `requested`
// model must be empty or the parent's. Returns the parent's architecture.
absl::StatusOr<Architecture> ValidateParent(const store::DatasetMeta& dataset,
                                            const store::SnapshotMeta& parent,
                                            Architecture requested) {
  const std::string parent_name =
      absl::StrCat("parent_snapshot_id '", parent.snapshot_id(), "'");
  if (parent.num_features() != dataset.num_features()) {
    return absl::InvalidArgumentError(
        absl::StrCat(parent_name, " takes ", parent.num_features(),
                     " features; dataset_id '", dataset.dataset_id(), "' has ",
                     dataset.num_features()));
  }
  if (parent.task() != dataset.task() ||
      !std::equal(parent.class_values().begin(), parent.class_values().end(),
                  dataset.class_values().begin(),
                  dataset.class_values().end())) {
    return absl::InvalidArgumentError(
        absl::StrCat(parent_name, " is a ", parent.task(), " model",
                     ClassesOf(parent.class_values()), "; dataset_id '",
                     dataset.dataset_id(), "' is ", dataset.task(),
                     ClassesOf(dataset.class_values())));
  }
  BNN_ASSIGN_OR_RETURN(
      Architecture own,
      ParseArchitecture(parent.hidden_sizes(), parent.activations()));
  constexpr absl::string_view kKeep =
      "; leave it empty to keep the parent's architecture";
  if (!requested.hidden_sizes.empty() &&
      requested.hidden_sizes != own.hidden_sizes) {
    return absl::InvalidArgumentError(absl::StrCat(
        "model.hidden_sizes ",
        ListOf(requested.hidden_sizes, absl::AlphaNumFormatter()),
        " differ from the parent snapshot's ",
        ListOf(own.hidden_sizes, absl::AlphaNumFormatter()), kKeep));
  }
  std::vector<Activation>& activations = requested.activations;
  if (activations.size() == 1) {
    activations.assign(own.activations.size(), activations[0]);
  }
  const auto name = [](std::string* out, Activation a) {
    absl::StrAppend(out, ActivationToString(a));
  };
  if (!activations.empty() && activations != own.activations) {
    return absl::InvalidArgumentError(
        absl::StrCat("model.activations ", ListOf(activations, name),
                     " differ from the parent snapshot's ",
                     ListOf(own.activations, name), kKeep));
  }
  return own;
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
    const MethodRegistry& registry, const store::SnapshotMeta* parent) {
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
  BNN_ASSIGN_OR_RETURN(Architecture architecture,
                       ParseArchitecture(request.model().hidden_sizes(),
                                         request.model().activations()));
  if (parent != nullptr) {
    BNN_ASSIGN_OR_RETURN(architecture,
                         ValidateParent(dataset, *parent, architecture));
  } else if (request.prior_from_parent()) {
    return absl::InvalidArgumentError(
        "prior_from_parent is set without parent_snapshot_id; the prior "
        "comes from the parent snapshot");
  }
  const std::vector<int>& hidden_sizes = architecture.hidden_sizes;
  std::vector<Activation>& activations = architecture.activations;
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
  if (parent != nullptr) {
    job.set_parent_snapshot_id(parent->snapshot_id());
    job.set_prior_from_parent(request.prior_from_parent());
  }
  return job;
}

}  // namespace bnn::server
