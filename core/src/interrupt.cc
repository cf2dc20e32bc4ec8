#include "bnn/interrupt.h"

#include <algorithm>
#include <memory>
#include <utility>

#include "absl/strings/str_cat.h"

namespace bnn {

Interrupt Interrupt::OnFlag(const std::atomic<bool>* flag, std::string what) {
  return Interrupt([flag, what = std::move(what)] {
    return flag->load(std::memory_order_relaxed)
               ? absl::CancelledError(absl::StrCat(what, " cancelled"))
               : absl::OkStatus();
  });
}

Interrupt Interrupt::AtDeadline(absl::Time deadline) {
  return Interrupt(
      [deadline] {
        return absl::Now() > deadline
                   ? absl::DeadlineExceededError(absl::StrCat(
                         "deadline passed (", absl::FormatTime(deadline), ")"))
                   : absl::OkStatus();
      },
      [deadline] { return deadline - absl::Now(); });
}

Interrupt Interrupt::Either(Interrupt first, Interrupt second) {
  auto both = std::make_shared<std::pair<Interrupt, Interrupt>>(
      std::move(first), std::move(second));
  return Interrupt(
      [both] {
        absl::Status status = both->first.Check();
        return status.ok() ? both->second.Check() : status;
      },
      [both] {
        return std::min(both->first.TimeLeft(), both->second.TimeLeft());
      });
}

}  // namespace bnn
