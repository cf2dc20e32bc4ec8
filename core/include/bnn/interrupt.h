// Cooperative interruption of long computations. Training checks an
// Interrupt between steps, prediction between row chunks and acquisition
// between pool chunks; a non-OK status stops the computation, which returns
// that status (with where it stopped). A server builds one per request from
// its client's cancellation and deadline, and one per training job from its
// cancel flag.
#ifndef BNN_INTERRUPT_H_
#define BNN_INTERRUPT_H_

#include <atomic>
#include <cstdint>
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
  // Also knows how long the computation may still run before `check` stops
  // it with DeadlineExceeded (a client's deadline, a server's time limit):
  // `time_left` returns that time, so that a computation that can tell
  // beforehand that it will not finish refuses at once instead of working
  // until it is stopped.
  Interrupt(std::function<absl::Status()> check,
            std::function<absl::Duration()> time_left)
      : check_(std::move(check)), time_left_(std::move(time_left)) {}

  // Cancelled("<what> cancelled") once *flag is true. Borrows `flag`, which
  // must outlive the Interrupt.
  static Interrupt OnFlag(const std::atomic<bool>* flag,
                          std::string what = "computation");
  // DeadlineExceeded once absl::Now() passes `deadline` (TimeLeft: until
  // then).
  static Interrupt AtDeadline(absl::Time deadline);
  // Checks `first`, then `second`; TimeLeft is the smaller of theirs.
  static Interrupt Either(Interrupt first, Interrupt second);

  // A copy that also passes each Progress() report to `progress`, e.g. for a
  // server to learn how fast a call computed even when it was stopped before
  // finishing (server/admission/compute_rate.h). `progress` runs on the
  // computing thread and must be cheap.
  Interrupt WithProgress(
      std::function<void(int64_t done, int64_t total)> progress) const {
    Interrupt copy = *this;
    copy.progress_ = std::move(progress);
    return copy;
  }

  absl::Status Check() const { return check_ ? check_() : absl::OkStatus(); }
  // Called by a computation before each Check(): `done` of its `total`
  // units of work (rows for prediction) are finished.
  void Progress(int64_t done, int64_t total) const {
    if (progress_) progress_(done, total);
  }
  // InfiniteDuration if unknown (no deadline).
  absl::Duration TimeLeft() const {
    return time_left_ ? time_left_() : absl::InfiniteDuration();
  }
  explicit operator bool() const { return static_cast<bool>(check_); }

 private:
  std::function<absl::Status()> check_;
  std::function<absl::Duration()> time_left_;
  std::function<void(int64_t, int64_t)> progress_;
};

}  // namespace bnn

#endif  // BNN_INTERRUPT_H_
