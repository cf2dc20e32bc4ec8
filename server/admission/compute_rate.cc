#include "server/admission/compute_rate.h"

#include <algorithm>
#include <cmath>
#include <ctime>
#include <limits>

#include <absl/strings/str_cat.h>
#include <absl/strings/str_format.h>

namespace bnn::server {

double PredictWorkUnits(int64_t rows, int64_t samples, int64_t weights) {
  return static_cast<double>(samples) * static_cast<double>(weights) *
         (static_cast<double>(rows) + 1.0);
}

absl::Duration ThreadCpuTime() {
  timespec ts{};
  if (clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts) != 0) {
    return absl::ZeroDuration();
  }
  return absl::DurationFromTimespec(ts);
}

int ComputeRate::GroupOf(double units) {
  if (!(units >= 1)) return 0;
  return std::min(kNumGroups - 1, static_cast<int>(std::log2(units)));
}

void ComputeRate::Observe(double units, absl::Duration duration) {
  if (!(units >= 1) || duration < kMinObserved) return;
  Record(units, absl::ToDoubleSeconds(duration) / units);
}

void ComputeRate::ObservePartial(double call_units, double done_units,
                                 absl::Duration duration) {
  if (!(call_units >= 1) || !(done_units >= 1) || duration < kMinObserved) {
    return;
  }
  Record(call_units, absl::ToDoubleSeconds(duration) / done_units);
}

void ComputeRate::Record(double call_units, double seconds_per_unit) {
  absl::MutexLock lock(&mu_);
  Group& group = groups_[GroupOf(call_units)];
  group.rates[group.next] = seconds_per_unit;
  group.next = (group.next + 1) % kWindow;
}

std::optional<absl::Duration> ComputeRate::LowerBound(double units) const {
  if (!(units >= 1)) return std::nullopt;
  double fastest = std::numeric_limits<double>::infinity();
  {
    absl::MutexLock lock(&mu_);
    for (int g = GroupOf(units); g < kNumGroups; ++g) {
      for (double rate : groups_[g].rates) {
        if (rate > 0) fastest = std::min(fastest, rate);
      }
    }
  }
  if (!std::isfinite(fastest)) return std::nullopt;
  return absl::Seconds(units * fastest);
}

absl::Status ComputeRate::Admit(absl::string_view what, double units,
                                absl::Duration remaining) const {
  const std::optional<absl::Duration> bound = LowerBound(units);
  if (!bound.has_value() || *bound <= remaining) return absl::OkStatus();
  return absl::DeadlineExceededError(absl::StrFormat(
      "%s needs at least %s of computation (%.3g work units at the fastest "
      "rate this server reached recently for calls of its size), more than "
      "the %s left before the client's deadline; refused without computing",
      what, absl::FormatDuration(absl::Trunc(*bound, absl::Microseconds(100))),
      units,
      absl::FormatDuration(
          absl::Trunc(std::max(remaining, absl::ZeroDuration()),
                      absl::Microseconds(100)))));
}

}  // namespace bnn::server
