#include "server/common/number_format.h"

#include <cmath>

#include <absl/strings/numbers.h>
#include <absl/strings/str_format.h>

namespace bnn::server {

std::string ShortestDouble(double value) {
  if (!std::isfinite(value)) return absl::StrFormat("%g", value);
  // Integers print in full ("100", not "1e+02").
  if (value == std::trunc(value) && std::fabs(value) < 1e15) {
    return absl::StrFormat("%.0f", value);
  }
  for (int precision = 1; precision < 17; ++precision) {
    std::string text = absl::StrFormat("%.*g", precision, value);
    double back = 0.0;
    if (absl::SimpleAtod(text, &back) && back == value) return text;
  }
  return absl::StrFormat("%.17g", value);
}

}  // namespace bnn::server
