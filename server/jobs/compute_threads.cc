#include "server/jobs/compute_threads.h"

#include <omp.h>

namespace bnn::server {

void UseComputeThreads(int num_threads) {
  if (num_threads > 0) omp_set_num_threads(num_threads);
}

}  // namespace bnn::server
