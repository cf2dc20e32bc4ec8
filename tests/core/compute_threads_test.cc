// The thread policy: small computations run on one thread, large ones on the
// calling thread's OpenMP limit, and the limit is restored afterwards.
#include "bnn/compute_threads.h"

#include <omp.h>

#include <gtest/gtest.h>

#include "bnn/methods/registry.h"
#include "bnn/model/network.h"
#include "bnn/random.h"
#include "bnn/train/trainer.h"

namespace bnn {
namespace {

TEST(ComputeThreadsTest, OneThreadBelowTheThreshold) {
  const ScopedComputeThreads limit(3);
  EXPECT_EQ(ComputeThreadsFor(kMinParallelGemmFlops / 2), 1);
  EXPECT_EQ(ComputeThreadsFor(kMinParallelGemmFlops), 3);
}

TEST(ComputeThreadsTest, ScopeRestoresTheLimit) {
  omp_set_num_threads(2);
  {
    const ScopedComputeThreads one(1);
    EXPECT_EQ(omp_get_max_threads(), 1);
  }
  EXPECT_EQ(omp_get_max_threads(), 2);
}

Dataset Regression(int n) {
  Rng rng(1);
  Dataset d;
  d.num_features = 2;
  for (int i = 0; i < 2 * n; ++i) d.features.push_back(rng.Normal());
  for (int i = 0; i < n; ++i) d.targets.push_back(rng.Normal());
  return d;
}

// The threads Train's steps see, under a limit of 2: issue 10's small job
// (2-50-50-1, batch 32, S = 4: largest GEMM 0.65 MFLOP) runs on one thread,
// a 2-1024-1024-1 net (269 MFLOP) on both, and the caller's limit is back
// afterwards.
TEST(ComputeThreadsTest, TrainRunsSmallStepsOnOneThread) {
  for (const auto& [width, expected] : {std::pair{50, 1}, std::pair{1024, 2}}) {
    SCOPED_TRACE(width);
    TrainRequest request;
    request.method = "slang";
    request.hidden_sizes = {width, width};
    request.params = {{"steps", "2"}, {"batch_size", "32"}};
    int seen = 0;
    omp_set_num_threads(2);
    const auto snapshot =
        Train(request, Regression(64), MethodRegistry::Builtin(),
              [&seen](const TrainProgress&) { seen = omp_get_max_threads(); });
    ASSERT_TRUE(snapshot.ok()) << snapshot.status();
    EXPECT_EQ(seen, expected);
    EXPECT_EQ(omp_get_max_threads(), 2);
    EXPECT_EQ(
        LargestGemmFlops(snapshot->model, 32 * 4) >= kMinParallelGemmFlops,
        expected == 2);
  }
}

}  // namespace
}  // namespace bnn
