// Memory of the core's computations, estimated before anything is allocated
// (so a server can refuse a training job or a request that would not fit),
// and allocation failures turned into a status instead of an abort.
//
// Estimates come from the components that own the memory: each
// VariationalMethod::EstimateMemory (its posterior family's state, optimiser
// state and per-step workspaces), Network's ForwardPassBytes / BackwardBytes
// (activations of M*S rows), Posterior::SampleBytes (a D x S draw),
// EstimateTrainingMemory (trainer.h), Predictor::EstimateMemory
// (predictor.h) and EstimateAcquireMemory (acquisition.h). They count heap
// bytes of the large arrays (everything that scales with the model, the
// data or the sample count) and ignore small fixed costs; tests/core hold
// each within a stated factor of the measured peak.
#ifndef BNN_MEMORY_H_
#define BNN_MEMORY_H_

#include <cstdint>
#include <initializer_list>
#include <limits>
#include <new>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"

namespace bnn {

// Saturating byte arithmetic: sizes of absurd requests (a 65536-wide layer
// times 4096 samples times 10^5 rows) clamp at kMaxBytes instead of
// overflowing, so they are still refused.
inline constexpr int64_t kMaxBytes = std::numeric_limits<int64_t>::max() / 4;
int64_t AddBytes(int64_t a, int64_t b);
// a * b * ... for non-negative factors, saturating at kMaxBytes.
int64_t MulBytes(std::initializer_list<int64_t> factors);

// "1.5 GiB", "12.0 MiB", "512 B".
std::string FormatBytes(int64_t bytes);

// Peak heap bytes of one computation, as named parts that add up to it.
struct MemoryEstimate {
  struct Part {
    std::string what;  // e.g. "U (D x L)"
    int64_t bytes = 0;
  };
  int64_t bytes = 0;
  std::vector<Part> parts;
  // Of `bytes`, what the computation returns and its caller keeps (a
  // training job's exported posterior, a Prediction's arrays).
  int64_t kept_bytes = 0;

  // Adds a part (saturating); zero-byte parts are skipped.
  void Add(std::string what, int64_t part_bytes);
  // Adds every part of `other`, each name prefixed with `prefix`.
  void Add(absl::string_view prefix, const MemoryEstimate& other);
  // "1.2 GiB (U (D x L) 800.0 MiB, ...)": the total and the largest parts.
  std::string ToString(int max_parts = 4) const;
  // "U (D x L) 800.0 MiB, ...": the largest parts alone.
  std::string PartsToString(int max_parts = 4) const;
};

// Runs `f` (returning absl::Status or absl::StatusOr<T>) and turns an
// allocation failure inside it (std::bad_alloc, which Eigen also throws, or
// std::length_error from a container asked for more than it can hold) into
// ResourceExhausted naming `what`, so one oversized job or request fails
// alone instead of aborting the process. The core's entry points (Train,
// Predictor::Predict, Acquire) run their bodies through it.
template <typename F>
auto FailOnAllocationError(absl::string_view what, F&& f) -> decltype(f()) {
  try {
    return f();
  } catch (const std::bad_alloc& e) {
    return absl::ResourceExhaustedError(
        absl::StrCat(what, " ran out of memory (", e.what(), ")"));
  } catch (const std::length_error& e) {
    return absl::ResourceExhaustedError(
        absl::StrCat(what, " asked for an array larger than memory allows (",
                     e.what(), ")"));
  }
}

}  // namespace bnn

#endif  // BNN_MEMORY_H_
