#include "bnn/interrupt.h"

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
  return Interrupt([deadline] {
    return absl::Now() > deadline
               ? absl::DeadlineExceededError(absl::StrCat(
                     "deadline passed (", absl::FormatTime(deadline), ")"))
               : absl::OkStatus();
  });
}

Interrupt Interrupt::Either(Interrupt first, Interrupt second) {
  return Interrupt([first = std::move(first), second = std::move(second)] {
    absl::Status status = first.Check();
    return status.ok() ? second.Check() : status;
  });
}

}  // namespace bnn
