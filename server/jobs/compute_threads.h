// Parallelism of the numerical core. OpenMP (which Eigen's GEMM uses) keeps
// its thread count per calling thread, so every server thread that runs
// training or prediction applies the configured count first.
#ifndef BNN_SERVER_JOBS_COMPUTE_THREADS_H_
#define BNN_SERVER_JOBS_COMPUTE_THREADS_H_

#include "server/common/thread_priority.h"  // LowerThreadPriority

namespace bnn::server {

// Limits core computations started from the calling thread to
// `num_threads`; 0 means one per core (whatever OMP_NUM_THREADS says). The
// core still runs computations too small to gain from threads on one
// (bnn/compute_threads.h), so the default wastes nothing on small nets.
void UseComputeThreads(int num_threads);

}  // namespace bnn::server

#endif  // BNN_SERVER_JOBS_COMPUTE_THREADS_H_
