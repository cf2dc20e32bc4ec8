#include "bnn/methods/options.h"

#include <cmath>

#include "absl/strings/ascii.h"
#include "absl/strings/string_view.h"

#include "bnn/methods/prior.h"
#include "bnn/status.h"

namespace bnn {

absl::Status ParseParamAssignment(absl::string_view assignment,
                                  ParamMap* params) {
  const size_t eq = assignment.find('=');
  if (eq == absl::string_view::npos) {
    return absl::InvalidArgumentError(absl::StrCat(
        "parameter '", assignment, "' must have the form key=value"));
  }
  std::string key(absl::StripAsciiWhitespace(assignment.substr(0, eq)));
  if (key.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat("parameter '", assignment, "' has an empty key"));
  }
  (*params)[key] =
      std::string(absl::StripAsciiWhitespace(assignment.substr(eq + 1)));
  return absl::OkStatus();
}

absl::Status CheckIntRange(absl::string_view field, int64_t value, int64_t lo,
                           int64_t hi) {
  if (value < lo || value > hi) {
    return absl::InvalidArgumentError(
        absl::StrCat(field, " = ", value, " must be in [", lo, ", ", hi, "]"));
  }
  return absl::OkStatus();
}

absl::Status CheckRange(absl::string_view field, double value, double lo,
                        double hi, bool lo_inclusive) {
  const bool above = lo_inclusive ? value >= lo : value > lo;
  if (!std::isfinite(value) || !above || value > hi) {
    return absl::InvalidArgumentError(
        absl::StrCat(field, " = ", value, " must be in ",
                     lo_inclusive ? "[" : "(", lo, ", ", hi, "]"));
  }
  return absl::OkStatus();
}

absl::Status CheckPositive(absl::string_view field, double value) {
  if (!std::isfinite(value) || !(value > 0)) {
    return absl::InvalidArgumentError(
        absl::StrCat(field, " = ", value, " must be positive and finite"));
  }
  return absl::OkStatus();
}

absl::Status CheckOneOf(absl::string_view field, absl::string_view value,
                        const std::vector<std::string>& allowed) {
  for (const auto& a : allowed) {
    if (a == value) return absl::OkStatus();
  }
  return absl::InvalidArgumentError(
      absl::StrCat(field, " = '", value,
                   "' must be one of: ", absl::StrJoin(allowed, ", ")));
}

absl::Status PriorOptions::Validate() const {
  BNN_RETURN_IF_ERROR(CheckPositive("prior_precision", prior_precision));
  BNN_RETURN_IF_ERROR(
      CheckPositive("bias_prior_precision", bias_prior_precision));
  BNN_RETURN_IF_ERROR(CheckPositive("noise_precision", noise_precision));
  BNN_RETURN_IF_ERROR(CheckPositive("noise_shape", noise_shape));
  BNN_RETURN_IF_ERROR(CheckPositive("noise_rate", noise_rate));
  return CheckRange("noise_learning_rate", noise_learning_rate, 0, 1);
}

const OptionsSchema<PriorOptions>& PriorOptionsSchema() {
  static const auto* schema = [] {
    auto* s = new OptionsSchema<PriorOptions>();
    s->Field("prior_precision", &PriorOptions::prior_precision,
             "lambda for weights")
        .Field("bias_prior_precision", &PriorOptions::bias_prior_precision,
               "lambda for biases")
        .Enum("noise_model", &PriorOptions::noise_model,
              {{"fixed", NoiseModel::kFixed}, {"gamma", NoiseModel::kGamma}},
              "fixed or gamma (Gamma prior on tau, C.1)")
        .Field("noise_precision", &PriorOptions::noise_precision,
               "tau, Gaussian noise precision (standardised units)")
        .Field("noise_shape", &PriorOptions::noise_shape,
               "Gamma prior shape a0")
        .Field("noise_rate", &PriorOptions::noise_rate, "Gamma prior rate b0")
        .Field("noise_learning_rate", &PriorOptions::noise_learning_rate,
               "SVI step size of q(tau)");
    return s;
  }();
  return *schema;
}

}  // namespace bnn
