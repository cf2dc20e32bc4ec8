// Internal: the pieces of VariationalMethod::EstimateMemory that every
// method over the MLP shares, so each method adds only what is its own.
#ifndef BNN_METHODS_METHOD_MEMORY_H_
#define BNN_METHODS_METHOD_MEMORY_H_

#include <cstdint>
#include <string>

#include "absl/strings/string_view.h"

#include "bnn/memory.h"
#include "bnn/model/model_spec.h"

namespace bnn::internal {

// The part of a method's estimate every method over the MLP shares, for
// steps over min(batch_size, num_rows) rows (M) and `samples` weight samples
// (S), with `scalar_bytes`-byte scalars: `vectors` D-vectors of parameters
// and optimiser state (named `vectors_what`), `sample_blocks` D x S blocks
// (weight samples, their noise, per-sample gradients), the batch (M x p
// inputs and M targets), the forward pass over M * S rows and
// `backward_passes` PerExampleGrads over them (two for methods that also
// back-propagate sampled targets). The method adds what is its own.
struct MinibatchShape {
  int64_t batch_size = 1;
  int64_t samples = 1;
  int scalar_bytes = 8;
  int backward_passes = 1;
};
MemoryEstimate MinibatchMemory(const ModelSpec& spec, int64_t num_rows,
                               const MinibatchShape& shape, int vectors,
                               std::string vectors_what, int sample_blocks);

// Adds the posterior ExportPosterior() returns, also as kept_bytes.
void AddExported(std::string what, int64_t bytes, MemoryEstimate* estimate);

// Adds a checkpoint between two steps (VariationalMethod::SaveState, then
// the caller's EncodeCheckpoint) of a method whose saved state is
// `state_bytes`, while the method's state and workspaces stay allocated:
// the MethodState message and its serialised copy, then the checkpoint's
// message, payload and framed record beside that copy, 4 x state_bytes at
// the peak. `what` names the state.
void AddCheckpoint(absl::string_view what, int64_t state_bytes,
                   MemoryEstimate* estimate);

// `count` arrays of `dim` scalars of `scalar_bytes` bytes.
inline int64_t VectorBytes(int64_t count, int64_t dim, int scalar_bytes) {
  return MulBytes({count, dim, scalar_bytes});
}

}  // namespace bnn::internal

#endif  // BNN_METHODS_METHOD_MEMORY_H_
