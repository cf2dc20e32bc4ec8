#include "server/common/flag_checks.h"

#include <absl/strings/str_cat.h>

namespace bnn::server {

absl::Status CheckAtLeast(absl::string_view flag, int64_t value,
                          int64_t minimum) {
  if (value < minimum) {
    return absl::InvalidArgumentError(
        absl::StrCat("--", flag, " = ", value, " must be >= ", minimum));
  }
  return absl::OkStatus();
}

absl::Status CheckInRange(absl::string_view flag, int64_t value,
                          int64_t minimum, int64_t maximum) {
  if (value < minimum || value > maximum) {
    return absl::InvalidArgumentError(absl::StrCat("--", flag, " = ", value,
                                                   " must be in [", minimum,
                                                   ", ", maximum, "]"));
  }
  return absl::OkStatus();
}

absl::Status CheckPositive(absl::string_view flag, double seconds) {
  constexpr int64_t kYear = int64_t{365} * 24 * 3600;
  if (!(seconds > 0 && seconds <= kYear)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--", flag, " = ", seconds, " must be in (0, ", kYear, "] seconds"));
  }
  return absl::OkStatus();
}

}  // namespace bnn::server
