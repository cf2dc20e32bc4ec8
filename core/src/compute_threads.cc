#include "bnn/compute_threads.h"

#include <omp.h>

namespace bnn {

int ComputeThreadsFor(double gemm_flops) {
  return gemm_flops < kMinParallelGemmFlops ? 1 : omp_get_max_threads();
}

ScopedComputeThreads::ScopedComputeThreads(int threads)
    : previous_(omp_get_max_threads()) {
  omp_set_num_threads(threads);
}

ScopedComputeThreads::~ScopedComputeThreads() {
  omp_set_num_threads(previous_);
}

}  // namespace bnn
