#include "server/jobs/compute_threads.h"

#include <omp.h>

namespace bnn::server {

void UseComputeThreads(int num_threads) {
  omp_set_num_threads(num_threads > 0 ? num_threads : omp_get_num_procs());
}

}  // namespace bnn::server
