// Memory admission control: every computation that allocates in proportion
// to its request (a training job, Predict, Acquire, an upload or import
// buffering its stream) reserves its estimated peak bytes from one budget
// before it starts, and is refused with ResourceExhausted, naming the
// estimate, the limit and what already holds the rest, when they do not fit.
// The estimates come from the core (bnn/memory.h); the budget only adds
// them up, so a request that would exhaust the machine fails alone instead
// of aborting (bad_alloc) or OOM-killing the server.
#ifndef BNN_SERVER_ADMISSION_MEMORY_BUDGET_H_
#define BNN_SERVER_ADMISSION_MEMORY_BUDGET_H_

#include <cstdint>
#include <map>
#include <string>

#include <absl/base/thread_annotations.h>
#include <absl/functional/function_ref.h>
#include <absl/status/status.h>
#include <absl/status/statusor.h>
#include <absl/strings/string_view.h>
#include <absl/synchronization/mutex.h>
#include <absl/time/time.h>

namespace bnn::server {

// The memory this process may use: physical memory, or less if a cgroup
// (v2 memory.max, v1 memory.limit_in_bytes) caps it.
struct MachineMemory {
  int64_t physical_bytes = 0;  // MemTotal of /proc/meminfo
  // The tightest cgroup limit of this process and its ancestors; 0 = none.
  int64_t cgroup_limit_bytes = 0;

  // min(physical, cgroup limit).
  int64_t usable_bytes() const;
};

// Reads /proc/meminfo and the cgroup limits of this process under `root`
// ("/" on a real machine; tests pass a directory laid out like one).
// Unavailable if MemTotal cannot be read.
absl::StatusOr<MachineMemory> ReadMachineMemory(const std::string& root = "/");

// The default budget is this fraction of MachineMemory::usable_bytes(): the
// rest is left to what the estimates do not count (gRPC buffers, cached
// predictors, allocator slack, the kernel's page cache of the store).
inline constexpr double kDefaultMemoryBudgetFraction = 0.5;
int64_t DefaultMemoryBudgetBytes(const MachineMemory& machine);

// Thread-safe.
class MemoryBudget {
 public:
  // Bytes held for one computation until it is destroyed or Release()d.
  // Move-only; a default-constructed one holds nothing.
  class Reservation {
   public:
    Reservation() = default;
    Reservation(Reservation&& other) noexcept;
    Reservation& operator=(Reservation&& other) noexcept;
    ~Reservation() { Release(); }

    int64_t bytes() const { return bytes_; }
    // Returns the bytes to the budget (waking computations waiting in
    // Reserve). Idempotent.
    void Release();

   private:
    friend class MemoryBudget;
    Reservation(MemoryBudget* budget, uint64_t id, int64_t bytes)
        : budget_(budget), id_(id), bytes_(bytes) {}

    MemoryBudget* budget_ = nullptr;
    uint64_t id_ = 0;
    int64_t bytes_ = 0;
  };

  // `limit_bytes` >= 1. `flag` names where the limit comes from in
  // messages ("--memory-budget-bytes").
  explicit MemoryBudget(int64_t limit_bytes,
                        std::string flag = "--memory-budget-bytes");
  // Every reservation must have been released.
  ~MemoryBudget();

  MemoryBudget(const MemoryBudget&) = delete;
  MemoryBudget& operator=(const MemoryBudget&) = delete;

  // OK if `bytes` could ever be reserved (bytes <= the limit), else
  // ResourceExhausted: "<what> needs an estimated <bytes> (<detail>), more
  // than the whole memory budget of <limit> (<flag>)". For refusing a
  // request (StartTraining) before it is queued.
  absl::Status CheckFits(absl::string_view what, int64_t bytes,
                         absl::string_view detail = "") const;

  // Reserves `bytes` for `what` (e.g. "Predict on snap-…", named in the
  // messages of later refusals while it holds them) if they fit beside the
  // bytes already reserved; otherwise ResourceExhausted naming the estimate
  // (with `detail`, e.g. its largest parts), the limit and what holds the
  // reserved bytes.
  absl::StatusOr<Reservation> TryReserve(absl::string_view what, int64_t bytes,
                                         absl::string_view detail = "");

  // As TryReserve, but waits while `bytes` fit the limit and not yet beside
  // the other reservations, checking `stop` at least every `poll`: its
  // non-OK status ends the wait with that status. ResourceExhausted at once
  // if `bytes` exceed the limit. For queued work (training jobs) that should
  // wait for memory rather than fail.
  absl::StatusOr<Reservation> Reserve(
      absl::string_view what, int64_t bytes, absl::string_view detail,
      absl::FunctionRef<absl::Status()> stop,
      absl::Duration poll = absl::Milliseconds(100));

  int64_t limit_bytes() const { return limit_bytes_; }
  int64_t reserved_bytes() const;
  // Reservations currently held.
  int64_t num_reservations() const;

 private:
  struct Holder {
    std::string what;
    int64_t bytes = 0;
  };

  // ResourceExhausted for `bytes` of `what` not fitting beside the holders.
  absl::Status Refusal(absl::string_view what, int64_t bytes,
                       absl::string_view detail) const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  Reservation Add(absl::string_view what, int64_t bytes)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void Release(uint64_t id);

  const int64_t limit_bytes_;
  const std::string flag_;
  mutable absl::Mutex mu_;
  int64_t reserved_ ABSL_GUARDED_BY(mu_) = 0;
  uint64_t next_id_ ABSL_GUARDED_BY(mu_) = 1;
  std::map<uint64_t, Holder> holders_ ABSL_GUARDED_BY(mu_);
};

}  // namespace bnn::server

#endif  // BNN_SERVER_ADMISSION_MEMORY_BUDGET_H_
