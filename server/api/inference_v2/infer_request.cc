#include "server/api/inference_v2/infer_request.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <set>

#include <absl/strings/numbers.h>
#include <absl/strings/str_cat.h>
#include <absl/strings/str_join.h>

#include "bnn/status.h"

namespace bnn::server::oip {
namespace {

constexpr absl::string_view kFp32 = "FP32";
constexpr absl::string_view kFp64 = "FP64";

bool IsClassification(absl::string_view task) { return task != "regression"; }

std::string ShapeText(absl::Span<const int64_t> shape) {
  return absl::StrCat("[", absl::StrJoin(shape, ", "), "]");
}

// The value of the int64 parameter `name`, which must be an integer >= 0.
absl::StatusOr<int64_t> NonNegativeInt(absl::string_view name,
                                       const inference::InferParameter& p) {
  if (p.parameter_choice_case() != inference::InferParameter::kInt64Param) {
    return absl::InvalidArgumentError(absl::StrCat(
        "parameters['", name, "'] must be an integer (int64_param)"));
  }
  if (p.int64_param() < 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "parameters['", name, "'] = ", p.int64_param(), " must be >= 0"));
  }
  return p.int64_param();
}

absl::Status ApplyParameters(
    const google::protobuf::Map<std::string, inference::InferParameter>& params,
    const ServerLimits& limits, v1::PredictRequest* predict) {
  for (const auto& [name, value] : params) {
    if (name == kNumSamplesParameter) {
      BNN_ASSIGN_OR_RETURN(const int64_t samples, NonNegativeInt(name, value));
      if (samples > limits.max_predict_samples) {
        return absl::ResourceExhaustedError(absl::StrCat(
            "parameters['num_samples'] = ", samples,
            " exceeds the server limit ", limits.max_predict_samples,
            " (--max-predict-samples)"));
      }
      predict->set_num_samples(static_cast<int>(samples));
    } else if (name == kSeedParameter) {
      uint64_t seed = 0;
      if (value.parameter_choice_case() ==
          inference::InferParameter::kStringParam) {
        if (!absl::SimpleAtoi(value.string_param(), &seed)) {
          return absl::InvalidArgumentError(
              absl::StrCat("parameters['seed'] = '", value.string_param(),
                           "' is not a decimal 64-bit unsigned integer"));
        }
      } else {
        BNN_ASSIGN_OR_RETURN(const int64_t signed_seed,
                             NonNegativeInt(name, value));
        seed = static_cast<uint64_t>(signed_seed);
      }
      predict->set_seed(seed);
    } else {
      return absl::InvalidArgumentError(
          absl::StrCat("parameters['", name,
                       "'] is not a parameter of ModelInfer; it takes ",
                       kNumSamplesParameter, " and ", kSeedParameter));
    }
  }
  return absl::OkStatus();
}

// Copies the input's `count` elements, from its contents or its raw bytes,
// into `values` (a packed Tensor's f64, so that they are copied once), FP32
// widened to double exactly.
absl::Status InputValues(const inference::ModelInferRequest& request,
                         int64_t count,
                         google::protobuf::RepeatedField<double>* values) {
  const inference::ModelInferRequest::InferInputTensor& input =
      request.inputs(0);
  const bool fp32 = input.datatype() == kFp32;
  if (request.raw_input_contents_size() > 0) {
    if (input.has_contents()) {
      return absl::InvalidArgumentError(
          "inputs[0].contents and raw_input_contents are both set; send the "
          "elements in one of them");
    }
    if (request.raw_input_contents_size() != 1) {
      return absl::InvalidArgumentError(absl::StrCat(
          "raw_input_contents has ", request.raw_input_contents_size(),
          " entries; it needs one per input (1)"));
    }
    const std::string& raw = request.raw_input_contents(0);
    const size_t width = fp32 ? sizeof(float) : sizeof(double);
    if (raw.size() != static_cast<size_t>(count) * width) {
      return absl::InvalidArgumentError(absl::StrCat(
          "raw_input_contents[0] has ", raw.size(), " bytes; shape ",
          ShapeText(input.shape()), " of ", input.datatype(), " needs ",
          static_cast<size_t>(count) * width));
    }
    // Little-endian, as the protocol's raw form and this machine.
    values->Resize(static_cast<int>(count), 0.0);
    if (fp32) {
      for (int64_t i = 0; i < count; ++i) {
        float v;
        std::memcpy(&v, raw.data() + i * width, sizeof(v));
        values->Set(static_cast<int>(i), v);
      }
    } else {
      std::memcpy(values->mutable_data(), raw.data(), raw.size());
    }
    return absl::OkStatus();
  }
  const inference::InferTensorContents& contents = input.contents();
  const int given =
      fp32 ? contents.fp32_contents_size() : contents.fp64_contents_size();
  const char* field = fp32 ? "fp32_contents" : "fp64_contents";
  const int other =
      fp32 ? contents.fp64_contents_size() : contents.fp32_contents_size();
  if (other > 0 || contents.bool_contents_size() > 0 ||
      contents.int_contents_size() > 0 || contents.int64_contents_size() > 0 ||
      contents.uint_contents_size() > 0 ||
      contents.uint64_contents_size() > 0 ||
      contents.bytes_contents_size() > 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("inputs[0].contents has elements in a field other than ",
                     field, ", the field of datatype ", input.datatype()));
  }
  if (given != count) {
    return absl::InvalidArgumentError(absl::StrCat(
        "inputs[0].contents.", field, " has ", given, " values; shape ",
        ShapeText(input.shape()), " needs ", count));
  }
  if (fp32) {
    values->Reserve(given);
    for (const float v : contents.fp32_contents())
      values->AddAlreadyReserved(v);
  } else {
    *values = contents.fp64_contents();
  }
  return absl::OkStatus();
}

}  // namespace

const std::vector<std::string>& OutputNames(absl::string_view task) {
  static const auto* const kRegression = new std::vector<std::string>{
      "mean", "variance", "epistemic_variance", "aleatoric_variance"};
  static const auto* const kClassification = new std::vector<std::string>{
      "probabilities", "entropy", "mutual_information"};
  return IsClassification(task) ? *kClassification : *kRegression;
}

void AddTensorMetadata(const store::SnapshotMeta& meta,
                       inference::ModelMetadataResponse* response) {
  auto* input = response->add_inputs();
  input->set_name(std::string(kInputName));
  input->set_datatype(std::string(kFp64));
  input->add_shape(-1);
  input->add_shape(meta.num_features());
  for (const std::string& name : OutputNames(meta.task())) {
    auto* output = response->add_outputs();
    output->set_name(name);
    output->set_datatype(std::string(kFp64));
    output->add_shape(-1);
    if (name == "probabilities") output->add_shape(meta.class_values_size());
  }
}

absl::StatusOr<InferPlan> PlanInfer(const inference::ModelInferRequest& request,
                                    const store::SnapshotMeta& meta,
                                    const ServerLimits& limits) {
  InferPlan plan;
  BNN_RETURN_IF_ERROR(
      ApplyParameters(request.parameters(), limits, &plan.predict));
  if (request.inputs_size() != 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("inputs has ", request.inputs_size(),
                     " tensors; the model takes one, ", kInputName));
  }
  const inference::ModelInferRequest::InferInputTensor& input =
      request.inputs(0);
  if (input.name() != kInputName) {
    return absl::InvalidArgumentError(absl::StrCat(
        "inputs[0].name '", input.name(),
        "' is not an input of the model; its one input is ", kInputName));
  }
  if (input.datatype() != kFp32 && input.datatype() != kFp64) {
    return absl::InvalidArgumentError(absl::StrCat(
        "inputs[0].datatype '", input.datatype(), "' is not supported; ",
        kInputName, " is ", kFp32, " or ", kFp64));
  }
  if (!input.parameters().empty()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "inputs[0].parameters['", input.parameters().begin()->first,
        "'] is not supported; ", kInputName, " takes no parameters"));
  }
  const int64_t features = meta.num_features();
  if (input.shape_size() != 2 || input.shape(1) != features) {
    return absl::InvalidArgumentError(
        absl::StrCat("inputs[0].shape ", ShapeText(input.shape()),
                     " must be [batch, features] = [N, ", features,
                     "]: the model has ", features, " features"));
  }
  const int64_t batch = input.shape(0);
  if (batch < 1) {
    return absl::InvalidArgumentError(absl::StrCat(
        "inputs[0].shape[0] = ", batch, " must be >= 1 (rows to predict)"));
  }
  if (batch > limits.max_predict_rows) {
    return absl::ResourceExhaustedError(absl::StrCat(
        "inputs[0].shape[0] = ", batch, " rows exceed the server limit ",
        limits.max_predict_rows, " (--max-predict-rows)"));
  }
  // The rows go to Predict packed ([batch, features], row-major as the
  // input), so they are copied once, from the request into the tensor.
  v1::Tensor* rows = plan.predict.mutable_features();
  rows->add_shape(batch);
  rows->add_shape(features);
  BNN_RETURN_IF_ERROR(
      InputValues(request, batch * features, rows->mutable_f64()));
  const double* values = rows->f64().data();
  for (int64_t i = 0; i < batch; ++i) {
    for (int64_t j = 0; j < features; ++j) {
      const double v = values[i * features + j];
      if (!std::isfinite(v)) {
        return absl::InvalidArgumentError(
            absl::StrCat("inputs[0] element [", i, ", ", j, "] is ", v,
                         "; inputs must be finite"));
      }
    }
  }
  plan.raw = request.raw_input_contents_size() > 0;

  const std::vector<std::string>& known = OutputNames(meta.task());
  std::set<std::string> seen;
  for (int i = 0; i < request.outputs_size(); ++i) {
    const auto& output = request.outputs(i);
    if (std::find(known.begin(), known.end(), output.name()) == known.end()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "outputs[", i, "].name '", output.name(), "' is not an output of a ",
          meta.task(), " model; its outputs are ", absl::StrJoin(known, ", ")));
    }
    if (!seen.insert(output.name()).second) {
      return absl::InvalidArgumentError(absl::StrCat(
          "outputs[", i, "].name '", output.name(), "' is asked for twice"));
    }
    for (const auto& [name, value] : output.parameters()) {
      // The REST binary-data extension is not served: its clients may say
      // so explicitly.
      if (name == "binary_data" &&
          value.parameter_choice_case() ==
              inference::InferParameter::kBoolParam &&
          !value.bool_param()) {
        continue;
      }
      return absl::InvalidArgumentError(absl::StrCat(
          "outputs[", i, "].parameters['", name,
          "'] is not supported (outputs take no parameters; the binary data "
          "extension is not served: binary_data must be false)"));
    }
    plan.outputs.push_back(output.name());
  }
  if (plan.outputs.empty()) plan.outputs = known;
  return plan;
}

void ToInferResponse(const InferPlan& plan,
                     const v1::PredictResponse& predicted,
                     const std::string& model_name, int64_t model_version,
                     const std::string& id,
                     inference::ModelInferResponse* response) {
  response->set_model_name(model_name);
  response->set_model_version(absl::StrCat(model_version));
  response->set_id(id);
  auto& params = *response->mutable_parameters();
  params["snapshot_id"].set_string_param(predicted.snapshot_id());
  params["num_samples"].set_int64_param(predicted.num_samples());
  if (predicted.seed() <=
      static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
    params["seed"].set_int64_param(static_cast<int64_t>(predicted.seed()));
  } else {
    params["seed"].set_string_param(absl::StrCat(predicted.seed()));
  }
  if (predicted.class_values_size() > 0) {
    params["class_values"].set_string_param(
        absl::StrJoin(predicted.class_values(), ","));
  }
  const int64_t batch = predicted.predictions_size();
  for (const std::string& name : plan.outputs) {
    auto* out = response->add_outputs();
    out->set_name(name);
    out->set_datatype(std::string(kFp64));
    out->add_shape(batch);
    std::vector<double> values;
    if (name == "probabilities") {
      const int64_t classes = predicted.class_values_size();
      out->add_shape(classes);
      values.reserve(static_cast<size_t>(batch * classes));
      for (const v1::RowPrediction& row : predicted.predictions()) {
        values.insert(values.end(), row.probabilities().begin(),
                      row.probabilities().end());
      }
    } else {
      values.reserve(static_cast<size_t>(batch));
      for (const v1::RowPrediction& row : predicted.predictions()) {
        if (name == "mean") {
          values.push_back(row.mean());
        } else if (name == "variance") {
          values.push_back(row.variance());
        } else if (name == "epistemic_variance") {
          values.push_back(row.epistemic_variance());
        } else if (name == "aleatoric_variance") {
          values.push_back(row.aleatoric_variance());
        } else if (name == "entropy") {
          values.push_back(row.entropy());
        } else {
          values.push_back(row.mutual_information());
        }
      }
    }
    if (plan.raw) {
      response->add_raw_output_contents(
          std::string(reinterpret_cast<const char*>(values.data()),
                      values.size() * sizeof(double)));
    } else {
      out->mutable_contents()->mutable_fp64_contents()->Add(values.begin(),
                                                            values.end());
    }
  }
}

}  // namespace bnn::server::oip
