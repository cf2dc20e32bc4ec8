// Deadline admission for Predict and Acquire: a call that cannot finish
// before its client's deadline is refused at once with DeadlineExceeded,
// instead of computing until the deadline passes and failing then. Such a
// call's work is wasted whatever happens, and on a busy server it is taken
// from the calls that can finish (docs/results/load.md: a client that keeps
// sending Predicts with a deadline too short for them held a compute worker
// for its whole deadline, every time).
//
// How long a call takes is learnt from the calls this server computed: its
// size in work units (rows x samples x weights, the multiply-adds of its
// forward passes, plus samples x weights for drawing them) times the
// fastest rate recently seen for calls at least about as large. The estimate
// is a lower bound by construction (the fastest recent rate of calls of
// similar or larger size, whose per-unit cost is no higher, since larger
// passes use the cores better), so a call is refused only when even the
// best recent case would not finish: a refusal is never a call that could
// have succeeded at the speed the server has shown. Before any call of
// about its size has been computed, nothing is refused.
#ifndef BNN_SERVER_ADMISSION_COMPUTE_RATE_H_
#define BNN_SERVER_ADMISSION_COMPUTE_RATE_H_

#include <array>
#include <cstdint>
#include <optional>

#include <absl/base/thread_annotations.h>
#include <absl/status/status.h>
#include <absl/strings/string_view.h>
#include <absl/synchronization/mutex.h>
#include <absl/time/time.h>

namespace bnn::server {

// The work units of a prediction over `rows` rows with `samples` weight
// samples of a net of `weights` weights: rows x samples x weights for the
// forward passes plus samples x weights for drawing the samples (counted
// like one more row: a call whose samples are cached is overstated by
// 1/(rows + 1), which matters only for calls of a few rows, far below any
// deadline).
double PredictWorkUnits(int64_t rows, int64_t samples, int64_t weights);

// The CPU time the calling thread has used (CLOCK_THREAD_CPUTIME_ID).
absl::Duration ThreadCpuTime();

// Thread-safe.
class ComputeRate {
 public:
  // Calls are grouped by size: group g holds calls of [2^g, 2^(g+1)) units.
  static constexpr int kNumGroups = 64;
  // Each group keeps its fastest rate among its last kWindow calls, so that
  // a server that slowed down (a larger model cached, other load) stops
  // refusing by rates it no longer reaches.
  static constexpr int kWindow = 16;
  // Calls shorter than this are not observed: their time is mostly fixed
  // costs (lookups, allocation), not a rate.
  static constexpr absl::Duration kMinObserved = absl::Milliseconds(2);

  // Records that a call of `units` computed in `duration` (the computing
  // thread's CPU time, ThreadCpuTime(): time waiting for a turn or for a
  // core is not the call's cost).
  void Observe(double units, absl::Duration duration);
  // Records that a call of `call_units`, stopped before it finished (its
  // deadline passed, or it was cancelled), had computed `done_units` of its
  // forward passes in `duration`. Its rate counts for calls of its size:
  // a call's passes are sized by the whole call. Forward passes are the
  // cheapest units of a call (drawing samples costs more per unit), so
  // this rate is no slower than the whole call's and the bound stays a
  // lower bound. Without it, a call too large for the deadline its client
  // keeps giving it would never be refused, as it never completes.
  void ObservePartial(double call_units, double done_units,
                      absl::Duration duration);

  // A lower bound of the time a call of `units` takes: units x the fastest
  // rate among the calls of its group and every larger one; nullopt when
  // none was observed.
  std::optional<absl::Duration> LowerBound(double units) const;

  // DeadlineExceeded, naming `what` (e.g. "Predict of 10000 rows x 256
  // samples"), the estimate and the time left, if LowerBound(units) exceeds
  // `remaining`; OK otherwise.
  absl::Status Admit(absl::string_view what, double units,
                     absl::Duration remaining) const;

 private:
  struct Group {
    // Seconds per unit of the last kWindow calls (0 = empty slot).
    std::array<double, kWindow> rates{};
    int next = 0;
  };
  static int GroupOf(double units);
  // Records `seconds_per_unit` in the group of `call_units`.
  void Record(double call_units, double seconds_per_unit);

  mutable absl::Mutex mu_;
  std::array<Group, kNumGroups> groups_ ABSL_GUARDED_BY(mu_);
};

}  // namespace bnn::server

#endif  // BNN_SERVER_ADMISSION_COMPUTE_RATE_H_
