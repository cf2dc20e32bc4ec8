// Internal: the pieces of VariationalMethod::EstimateMemory that every
// method over the MLP shares, so each method adds only what is its own.
#ifndef BNN_METHODS_METHOD_MEMORY_H_
#define BNN_METHODS_METHOD_MEMORY_H_

#include <cstdint>

#include "bnn/memory.h"
#include "bnn/model/model_spec.h"

namespace bnn::internal {

// One minibatch step's network workspaces: the batch (M x p inputs and M
// targets), the forward pass over M * S rows and `backward_passes`
// PerExampleGrads over them (two for methods that also back-propagate
// sampled targets), with `scalar_bytes`-byte scalars.
void AddMinibatchPasses(const ModelSpec& spec, int64_t batch_rows,
                        int64_t samples, int scalar_bytes, int backward_passes,
                        MemoryEstimate* estimate);

// `count` arrays of `dim` scalars of `scalar_bytes` bytes.
inline int64_t VectorBytes(int64_t count, int64_t dim, int scalar_bytes) {
  return MulBytes({count, dim, scalar_bytes});
}

}  // namespace bnn::internal

#endif  // BNN_METHODS_METHOD_MEMORY_H_
