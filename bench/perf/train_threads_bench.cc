// A whole small training job (issue 10, finding 11: SLANG on a 2-50-50-1
// net, 2,000 rows, batch 32, 20 epochs = 1,260 steps) through bnn::Train,
// with the calling thread's OpenMP limit at 1 and at one per core (what
// bnn-server --threads 1 and --threads 0 set): the default must never be
// slower than one thread. SlangStepWidth: single steps of wider nets, below
// the trainer's policy, where threads start to pay (kMinParallelGemmFlops in
// bnn/compute_threads.h).
//
//   build/bench/perf/bnn_perf_bench
//   --benchmark_filter='SmallJob|SlangStepWidth'
#include <cmath>
#include <numeric>
#include <omp.h>
#include <string>
#include <vector>

#include <benchmark/benchmark.h>

#include "bnn/check.h"
#include "bnn/methods/method.h"
#include "bnn/methods/registry.h"
#include "bnn/model/network.h"
#include "bnn/random.h"
#include "bnn/train/trainer.h"

namespace bnn {
namespace {

Dataset TwoFeatureRegression(int n) {
  Rng rng(7);
  Dataset d;
  d.num_features = 2;
  for (int i = 0; i < n; ++i) {
    const double a = rng.Uniform(-2, 2), b = rng.Uniform(-2, 2);
    d.features.push_back(a);
    d.features.push_back(b);
    d.targets.push_back(std::sin(a) * b + 0.1 * rng.Normal());
  }
  return d;
}

// Trains `method` on a 2-w-w-1 net (20 epochs, or `steps` steps when > 0)
// with the calling thread's OpenMP limit at `threads` (0: one per core).
void BM_Job(benchmark::State& state, const std::string& method, int width,
            int steps, int threads, const ParamMap& extra = {}) {
  const Dataset data = TwoFeatureRegression(2000);
  TrainRequest request;
  request.method = method;
  request.hidden_sizes = {width, width};
  request.params = {{"epochs", "20"}, {"seed", "1"}, {"batch_size", "32"}};
  request.params.insert(extra.begin(), extra.end());
  if (steps > 0) request.params["steps"] = std::to_string(steps);
  const int saved = omp_get_max_threads();
  omp_set_num_threads(threads > 0 ? threads : omp_get_num_procs());
  int64_t trained_steps = 0;
  for (auto _ : state) {
    auto snapshot = Train(request, data, MethodRegistry::Builtin());
    BNN_CHECK_OK(snapshot.status());
    trained_steps = snapshot->training.steps;
  }
  omp_set_num_threads(saved);
  state.counters["steps"] = static_cast<double>(trained_steps);
  state.counters["threads"] = threads > 0 ? threads : omp_get_num_procs();
}

void BM_Steps(benchmark::State& state, int width, int threads) {
  Rng rng(3);
  const Dataset data = TwoFeatureRegression(2000);
  const ModelSpec spec = ModelSpec::ForTask(Task::kRegression, 2, 0,
                                            {width, width}, Activation::kRelu);
  auto method = MethodRegistry::Builtin().Create("slang", {});
  BNN_CHECK_OK(method.status());
  BNN_CHECK_OK((*method)->Initialize(spec, data, rng));
  std::vector<int64_t> batch(32);
  std::iota(batch.begin(), batch.end(), 0);
  const int saved = omp_get_max_threads();
  omp_set_num_threads(threads > 0 ? threads : omp_get_num_procs());
  BNN_CHECK_OK((*method)->Step(batch, rng).status());  // workspaces
  for (auto _ : state) BNN_CHECK_OK((*method)->Step(batch, rng).status());
  omp_set_num_threads(saved);
  state.counters["gemm_mflop"] = LargestGemmFlops(spec, 128) / 1e6;
}

std::string ThreadsName(int threads) {
  return threads > 0 ? std::to_string(threads) : std::string("all");
}

void Register() {
  // The job of the issue, whole.
  for (const char* method : {"slang", "noisy_kfac"}) {
    for (const int threads : {1, 0}) {
      benchmark::RegisterBenchmark(
          (std::string("SmallJob/") + method +
           "/2-50-50-1/threads:" + ThreadsName(threads))
              .c_str(),
          [method, threads](benchmark::State& s) {
            BM_Job(s, method, 50, 0, threads);
          })
          ->Unit(benchmark::kMillisecond)
          ->UseRealTime()
          ->Iterations(3);
    }
  }
  // The same SLANG job with each eigensolver pinned (eig_solver=auto picks
  // one by EstimateEigFlops): whether the cost model picks the faster.
  for (const char* solver : {"exact", "randomized"}) {
    benchmark::RegisterBenchmark(
        (std::string("SmallJob/slang_eig_") + solver + "/2-50-50-1/threads:1")
            .c_str(),
        [solver](benchmark::State& s) {
          BM_Job(s, "slang", 50, 0, 1, {{"eig_solver", solver}});
        })
        ->Unit(benchmark::kMillisecond)
        ->UseRealTime()
        ->Iterations(3);
  }
  // SLANG steps (batch 32, S = 4: 128 rows per pass) driven directly, below
  // the trainer's thread policy, on 2-w-w-1 nets: where two threads start to
  // beat one (the largest GEMM of a step is 2 x 128 x (w + 1) x w flops).
  for (const int width : {50, 100, 200, 400, 800, 1600}) {
    for (const int threads : {1, 0}) {
      benchmark::RegisterBenchmark(
          ("SlangStepWidth/2-" + std::to_string(width) + "-" +
           std::to_string(width) + "-1/threads:" + ThreadsName(threads))
              .c_str(),
          [width, threads](benchmark::State& s) {
            BM_Steps(s, width, threads);
          })
          ->Unit(benchmark::kMillisecond)
          ->UseRealTime();
    }
  }
}

const int kRegistered = (Register(), 0);

}  // namespace
}  // namespace bnn
