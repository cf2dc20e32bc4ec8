#include "bnn/methods/options.h"

#include <cmath>

#include "absl/strings/ascii.h"
#include "absl/strings/string_view.h"

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

}  // namespace bnn
