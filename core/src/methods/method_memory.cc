#include "methods/method_memory.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"

#include "bnn/model/network.h"

namespace bnn::internal {

MemoryEstimate MinibatchMemory(const ModelSpec& spec, int64_t num_rows,
                               const MinibatchShape& shape, int vectors,
                               std::string vectors_what, int sample_blocks) {
  const int64_t dim = spec.NumParameters();
  const int64_t m = std::min(shape.batch_size, num_rows);
  const int64_t rows = MulBytes({m, shape.samples});
  const int b = shape.scalar_bytes;
  MemoryEstimate e;
  e.Add(absl::StrCat(vectors_what, " (", vectors, " x D)"),
        VectorBytes(vectors, dim, b));
  e.Add(absl::StrCat("weight samples and their companions (", sample_blocks,
                     " x D x S)"),
        VectorBytes(sample_blocks, MulBytes({dim, shape.samples}), b));
  e.Add("minibatch inputs and targets", MulBytes({m, spec.input_dim + 1, b}));
  e.Add(absl::StrCat("forward pass (", rows, " rows = M x S)"),
        ForwardPassBytes(spec, rows, b));
  e.Add(shape.backward_passes == 1
            ? std::string("per-example gradient factors")
            : absl::StrCat(shape.backward_passes,
                           " x per-example gradient factors"),
        MulBytes({shape.backward_passes, PerExampleGradsBytes(spec, rows, b)}));
  return e;
}

void AddExported(std::string what, int64_t bytes, MemoryEstimate* estimate) {
  estimate->Add(std::move(what), bytes);
  estimate->kept_bytes = bytes;
}

void AddCheckpoint(absl::string_view what, int64_t state_bytes,
                   MemoryEstimate* estimate) {
  estimate->Add(absl::StrCat("checkpoint of the ", what, " (4 x state)"),
                MulBytes({4, state_bytes}));
}

}  // namespace bnn::internal
