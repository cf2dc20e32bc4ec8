#include "methods/method_memory.h"

#include "absl/strings/str_cat.h"

#include "bnn/model/network.h"

namespace bnn::internal {

void AddMinibatchPasses(const ModelSpec& spec, int64_t batch_rows,
                        int64_t samples, int scalar_bytes, int backward_passes,
                        MemoryEstimate* estimate) {
  const int64_t rows = MulBytes({batch_rows, samples});
  estimate->Add("minibatch inputs and targets",
                MulBytes({batch_rows, spec.input_dim + 1, scalar_bytes}));
  estimate->Add(absl::StrCat("forward pass (", rows, " rows = M x S)"),
                ForwardPassBytes(spec, rows, scalar_bytes));
  estimate->Add(
      backward_passes == 1
          ? "per-example gradient factors"
          : absl::StrCat(backward_passes, " x per-example gradient factors"),
      MulBytes(
          {backward_passes, PerExampleGradsBytes(spec, rows, scalar_bytes)}));
}

}  // namespace bnn::internal
