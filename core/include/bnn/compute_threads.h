// How many threads the numerical core uses for one computation. OpenMP
// (which Eigen's GEMM also uses) keeps its thread count per calling thread,
// and Eigen splits every GEMM above ~50,000 flops per thread across all of
// them: for the small GEMMs of a small net each product then pays a fork and
// a join that cost more than the product, and on a busy machine (RPC
// threads, other jobs) the team waits for a core at every join. A training
// job or a prediction therefore runs on one thread unless its largest GEMM
// is big enough to gain from more (docs/results/perf.md: the measurements
// behind kMinParallelGemmFlops).
#ifndef BNN_COMPUTE_THREADS_H_
#define BNN_COMPUTE_THREADS_H_

namespace bnn {

// Flops of the largest GEMM of a unit of work (a training step's layer
// product over M x S rows, a prediction chunk's) below which one thread is
// faster than two on the reference machine, with margin.
inline constexpr double kMinParallelGemmFlops = 2e7;

// The threads for a computation whose largest GEMM costs `gemm_flops`: 1
// below kMinParallelGemmFlops, otherwise the calling thread's OpenMP limit
// (omp_get_max_threads(): a server's --threads, or one per core).
int ComputeThreadsFor(double gemm_flops);

// Sets the calling thread's OpenMP thread count for its lifetime and
// restores the previous one after. Not for use inside a parallel region.
class ScopedComputeThreads {
 public:
  explicit ScopedComputeThreads(int threads);
  ~ScopedComputeThreads();
  ScopedComputeThreads(const ScopedComputeThreads&) = delete;
  ScopedComputeThreads& operator=(const ScopedComputeThreads&) = delete;

 private:
  int previous_;
};

}  // namespace bnn

#endif  // BNN_COMPUTE_THREADS_H_
