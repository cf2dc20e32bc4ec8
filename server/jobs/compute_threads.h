// Parallelism of the numerical core. OpenMP (which Eigen's GEMM uses) keeps
// its thread count per calling thread, so every server thread that runs
// training or prediction applies the configured count first.
#ifndef BNN_SERVER_JOBS_COMPUTE_THREADS_H_
#define BNN_SERVER_JOBS_COMPUTE_THREADS_H_

namespace bnn::server {

// Limits core computations started from the calling thread to
// `num_threads`; 0 means one per core (whatever OMP_NUM_THREADS says). The
// core still runs computations too small to gain from threads on one
// (bnn/compute_threads.h), so the default wastes nothing on small nets.
void UseComputeThreads(int num_threads);

// Lowers the calling thread's CPU priority to nice value `nice` (0..19;
// Linux keeps it per thread, and threads the calling thread starts, such as
// its OpenMP workers, inherit it). Training calls it, so that serving
// threads (gRPC, the compute pool) get the cores first when both want them
// and training runs at full speed when serving is idle. Never raises
// priority: a thread already nicer keeps its value. Returns the nice value
// in effect.
int LowerThreadPriority(int nice);

}  // namespace bnn::server

#endif  // BNN_SERVER_JOBS_COMPUTE_THREADS_H_
