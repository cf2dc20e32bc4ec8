// Cooperative interruption of long computations. Training checks an
// Interrupt between steps, prediction between row chunks and acquisition
// between pool chunks; a non-OK status stops the computation, which returns
// that status (with where it stopped). A server builds one per request from
// its client's cancellation and deadline, and one per training job from its
// cancel flag.
#ifndef BNN_INTERRUPT_H_
#define BNN_INTERRUPT_H_

#include <atomic>
#include <functional>
#include <string>
#include <utility>

#include "absl/status/status.h"
#include "absl/time/time.h"

namespace bnn {

class Interrupt {
 public:
  // Never interrupts.
  Interrupt() = default;
  // `check` returns OK to continue, or the status to stop with (Cancelled,
  // DeadlineExceeded, ...). It runs on the computing thread, between units
  // of work (milliseconds apart), so it must be cheap.
  explicit Interrupt(std::function<absl::Status()> check)
      : check_(std::move(check)) {}

  // Cancelled("<what> cancelled") once *flag is true. Borrows `flag`, which
  // must outlive the Interrupt.
  static Interrupt OnFlag(const std::atomic<bool>* flag,
                          std::string what = "computation");
  // DeadlineExceeded once absl::Now() passes `deadline`.
  static Interrupt AtDeadline(absl::Time deadline);
  // Checks `first`, then `second`.
  static Interrupt Either(Interrupt first, Interrupt second);

  absl::Status Check() const { return check_ ? check_() : absl::OkStatus(); }
  explicit operator bool() const { return static_cast<bool>(check_); }

 private:
  std::function<absl::Status()> check_;
};

}  // namespace bnn

#endif  // BNN_INTERRUPT_H_
