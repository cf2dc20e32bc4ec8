#include "server/api/inference_v2/json_codec.h"

#include <cstring>
#include <limits>
#include <utility>
#include <vector>

#include <absl/strings/str_cat.h>
#include <absl/strings/str_join.h>
#include <nlohmann/json.hpp>

#include "bnn/status.h"

namespace bnn::server::oip {
namespace {

using nlohmann::json;

// Tensor data nests at most this deep (a model input is [batch, features]).
constexpr int kMaxDataDepth = 8;

// Client text (ids, names) need not be UTF-8: invalid bytes are replaced
// rather than thrown at.
std::string Dump(const json& value) {
  return value.dump(-1, ' ', false, json::error_handler_t::replace);
}

absl::Status FieldError(absl::string_view field, absl::string_view what) {
  return absl::InvalidArgumentError(absl::StrCat(field, " ", what));
}

// Refuses keys of `object` (at `field`) that are not in `known`.
absl::Status CheckKeys(const json& object, absl::string_view field,
                       const std::vector<absl::string_view>& known) {
  for (const auto& [key, value] : object.items()) {
    bool found = false;
    for (const absl::string_view k : known) found = found || key == k;
    if (!found) {
      return absl::InvalidArgumentError(absl::StrCat(
          field.empty() ? "" : absl::StrCat(field, "."), key, " is not a field",
          field.empty() ? " of an inference request" : "", "; the fields are ",
          absl::StrJoin(known, ", ")));
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<std::string> StringField(const json& object,
                                        absl::string_view field,
                                        const char* key, bool required) {
  const auto it = object.find(key);
  if (it == object.end()) {
    if (required) return FieldError(absl::StrCat(field, key), "is required");
    return std::string();
  }
  if (!it->is_string()) {
    return FieldError(absl::StrCat(field, key), "must be a string");
  }
  return it->get<std::string>();
}

// $parameters: string, integer or boolean values.
absl::Status ParseParameters(
    const json& value, absl::string_view field,
    google::protobuf::Map<std::string, inference::InferParameter>* out) {
  if (!value.is_object()) return FieldError(field, "must be an object");
  for (const auto& [key, v] : value.items()) {
    inference::InferParameter& p = (*out)[key];
    if (v.is_boolean()) {
      p.set_bool_param(v.get<bool>());
    } else if (v.is_number_integer()) {
      if (v.is_number_unsigned() &&
          v.get<uint64_t>() >
              static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
        p.set_string_param(absl::StrCat(v.get<uint64_t>()));
      } else {
        p.set_int64_param(v.get<int64_t>());
      }
    } else if (v.is_string()) {
      p.set_string_param(v.get<std::string>());
    } else {
      return FieldError(absl::StrCat(field, "['", key, "']"),
                        "must be a string, an integer or a boolean");
    }
  }
  return absl::OkStatus();
}

// Appends the numbers of `data` (nested arrays or a number) in row-major
// order; `field` names the first offending element.
absl::Status Flatten(const json& data, const std::string& field, int depth,
                     std::vector<double>* out) {
  if (data.is_number()) {
    out->push_back(data.get<double>());
    return absl::OkStatus();
  }
  if (!data.is_array()) return FieldError(field, "is not a number");
  if (depth >= kMaxDataDepth) {
    return FieldError(field, absl::StrCat("nests arrays deeper than ",
                                          kMaxDataDepth, " levels"));
  }
  for (size_t i = 0; i < data.size(); ++i) {
    BNN_RETURN_IF_ERROR(
        Flatten(data[i], absl::StrCat(field, "[", i, "]"), depth + 1, out));
  }
  return absl::OkStatus();
}

absl::Status ParseInput(const json& input, const std::string& field,
                        inference::ModelInferRequest::InferInputTensor* out) {
  if (!input.is_object()) return FieldError(field, "must be an object");
  BNN_RETURN_IF_ERROR(CheckKeys(
      input, field, {"name", "shape", "datatype", "parameters", "data"}));
  const std::string prefix = absl::StrCat(field, ".");
  BNN_ASSIGN_OR_RETURN(*out->mutable_name(),
                       StringField(input, prefix, "name", true));
  BNN_ASSIGN_OR_RETURN(*out->mutable_datatype(),
                       StringField(input, prefix, "datatype", true));
  const auto shape = input.find("shape");
  if (shape == input.end()) return FieldError(prefix + "shape", "is required");
  if (!shape->is_array()) {
    return FieldError(prefix + "shape", "must be an array of integers");
  }
  for (size_t i = 0; i < shape->size(); ++i) {
    const json& d = (*shape)[i];
    if (!d.is_number_integer() || d.get<int64_t>() < 0) {
      return FieldError(absl::StrCat(prefix, "shape[", i, "]"),
                        "must be an integer >= 0");
    }
    out->add_shape(d.get<int64_t>());
  }
  if (const auto p = input.find("parameters"); p != input.end()) {
    BNN_RETURN_IF_ERROR(
        ParseParameters(*p, prefix + "parameters", out->mutable_parameters()));
  }
  const auto data = input.find("data");
  if (data == input.end()) return FieldError(prefix + "data", "is required");
  if (out->datatype() != "FP32" && out->datatype() != "FP64") {
    return absl::OkStatus();  // PlanInfer names the datatype
  }
  std::vector<double> values;
  BNN_RETURN_IF_ERROR(Flatten(*data, prefix + "data", 0, &values));
  if (out->datatype() == "FP32") {
    auto* contents = out->mutable_contents()->mutable_fp32_contents();
    contents->Reserve(static_cast<int>(values.size()));
    for (const double v : values) contents->Add(static_cast<float>(v));
  } else {
    out->mutable_contents()->mutable_fp64_contents()->Add(values.begin(),
                                                          values.end());
  }
  return absl::OkStatus();
}

json ParametersJson(
    const google::protobuf::Map<std::string, inference::InferParameter>& in) {
  json out = json::object();
  for (const auto& [key, p] : in) {
    switch (p.parameter_choice_case()) {
      case inference::InferParameter::kBoolParam:
        out[key] = p.bool_param();
        break;
      case inference::InferParameter::kInt64Param:
        out[key] = p.int64_param();
        break;
      case inference::InferParameter::kStringParam:
        out[key] = p.string_param();
        break;
      case inference::InferParameter::PARAMETER_CHOICE_NOT_SET:
        break;
    }
  }
  return out;
}

json TensorMetadataJson(
    const inference::ModelMetadataResponse::TensorMetadata& tensor) {
  return json{{"name", tensor.name()},
              {"datatype", tensor.datatype()},
              {"shape", std::vector<int64_t>(tensor.shape().begin(),
                                             tensor.shape().end())}};
}

}  // namespace

absl::StatusOr<inference::ModelInferRequest> ParseInferRequest(
    absl::string_view body) {
  json root;
  try {
    root = json::parse(body.begin(), body.end());
  } catch (const json::exception& e) {
    return absl::InvalidArgumentError(
        absl::StrCat("the request body is not JSON: ", e.what()));
  }
  if (!root.is_object()) {
    return absl::InvalidArgumentError(
        "the request body must be a JSON object (an inference request)");
  }
  BNN_RETURN_IF_ERROR(
      CheckKeys(root, "", {"id", "parameters", "inputs", "outputs"}));
  inference::ModelInferRequest request;
  BNN_ASSIGN_OR_RETURN(*request.mutable_id(),
                       StringField(root, "", "id", false));
  if (const auto p = root.find("parameters"); p != root.end()) {
    BNN_RETURN_IF_ERROR(
        ParseParameters(*p, "parameters", request.mutable_parameters()));
  }
  const auto inputs = root.find("inputs");
  if (inputs == root.end()) return FieldError("inputs", "is required");
  if (!inputs->is_array()) return FieldError("inputs", "must be an array");
  for (size_t i = 0; i < inputs->size(); ++i) {
    BNN_RETURN_IF_ERROR(ParseInput(
        (*inputs)[i], absl::StrCat("inputs[", i, "]"), request.add_inputs()));
  }
  if (const auto outputs = root.find("outputs"); outputs != root.end()) {
    if (!outputs->is_array()) return FieldError("outputs", "must be an array");
    for (size_t i = 0; i < outputs->size(); ++i) {
      const json& output = (*outputs)[i];
      const std::string field = absl::StrCat("outputs[", i, "]");
      if (!output.is_object()) return FieldError(field, "must be an object");
      BNN_RETURN_IF_ERROR(CheckKeys(output, field, {"name", "parameters"}));
      auto* out = request.add_outputs();
      BNN_ASSIGN_OR_RETURN(*out->mutable_name(),
                           StringField(output, field + ".", "name", true));
      if (const auto p = output.find("parameters"); p != output.end()) {
        BNN_RETURN_IF_ERROR(ParseParameters(*p, field + ".parameters",
                                            out->mutable_parameters()));
      }
    }
  }
  return request;
}

std::string InferResponseJson(const inference::ModelInferResponse& response) {
  json root;
  root["model_name"] = response.model_name();
  root["model_version"] = response.model_version();
  root["id"] = response.id();
  root["parameters"] = ParametersJson(response.parameters());
  json outputs = json::array();
  for (int i = 0; i < response.outputs_size(); ++i) {
    const auto& output = response.outputs(i);
    std::vector<double> data(output.contents().fp64_contents().begin(),
                             output.contents().fp64_contents().end());
    if (i < response.raw_output_contents_size()) {
      const std::string& raw = response.raw_output_contents(i);
      data.resize(raw.size() / sizeof(double));
      std::memcpy(data.data(), raw.data(), data.size() * sizeof(double));
    }
    outputs.push_back(json{
        {"name", output.name()},
        {"datatype", output.datatype()},
        {"shape",
         std::vector<int64_t>(output.shape().begin(), output.shape().end())},
        {"data", std::move(data)}});
  }
  root["outputs"] = std::move(outputs);
  return Dump(root);
}

std::string ServerMetadataJson(
    const inference::ServerMetadataResponse& response) {
  return Dump(json{
      {"name", response.name()},
      {"version", response.version()},
      {"extensions", std::vector<std::string>(response.extensions().begin(),
                                              response.extensions().end())}});
}

std::string ModelMetadataJson(
    const inference::ModelMetadataResponse& response) {
  json inputs = json::array();
  for (const auto& t : response.inputs())
    inputs.push_back(TensorMetadataJson(t));
  json outputs = json::array();
  for (const auto& t : response.outputs()) {
    outputs.push_back(TensorMetadataJson(t));
  }
  return Dump(
      json{{"name", response.name()},
           {"versions", std::vector<std::string>(response.versions().begin(),
                                                 response.versions().end())},
           {"platform", response.platform()},
           {"inputs", std::move(inputs)},
           {"outputs", std::move(outputs)}});
}

std::string ErrorJson(absl::string_view message) {
  // Messages quote what clients sent, which need not be UTF-8: replace
  // invalid bytes rather than throw.
  return Dump(json{{"error", std::string(message)}});
}

}  // namespace bnn::server::oip
