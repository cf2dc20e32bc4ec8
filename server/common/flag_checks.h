// Bounds of command-line flag values, each failing with InvalidArgument
// naming the flag (with dashes), its value and the bound: one message per
// kind of bound for every binary (bnn-server, bnn-train).
#ifndef BNN_SERVER_COMMON_FLAG_CHECKS_H_
#define BNN_SERVER_COMMON_FLAG_CHECKS_H_

#include <cstdint>

#include <absl/status/status.h>
#include <absl/strings/string_view.h>

namespace bnn::server {

// --flag = value must be >= minimum. `flag` without the dashes.
absl::Status CheckAtLeast(absl::string_view flag, int64_t value,
                          int64_t minimum);

// --flag = value must be in [minimum, maximum].
absl::Status CheckInRange(absl::string_view flag, int64_t value,
                          int64_t minimum, int64_t maximum);

// A finite number of seconds > 0 (at most a year, so that it converts to an
// absl::Duration and deadlines derived from it do not overflow).
absl::Status CheckPositive(absl::string_view flag, double seconds);

}  // namespace bnn::server

#endif  // BNN_SERVER_COMMON_FLAG_CHECKS_H_
