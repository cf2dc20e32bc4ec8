// A whole small training job (issue 10, finding 11: SLANG on a 2-50-50-1
// net, 2,000 rows, batch 32, 20 epochs = 1,260 steps) through bnn::Train,
// with the calling thread's OpenMP thread count set to 1 and to one per
// core: the default must never be slower than one thread.
//
//   build/bench/perf/bnn_perf_bench --benchmark_filter='SmallJob'
#include <cmath>
#include <omp.h>
#include <string>

#include <benchmark/benchmark.h>

#include "bnn/check.h"
#include "bnn/methods/registry.h"
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

void BM_SmallJob(benchmark::State& state, const std::string& method,
                 int threads) {
  const Dataset data = TwoFeatureRegression(2000);
  TrainRequest request;
  request.method = method;
  request.hidden_sizes = {50, 50};
  request.params = {{"epochs", "20"}, {"seed", "1"}, {"batch_size", "32"}};
  const int saved = omp_get_max_threads();
  omp_set_num_threads(threads > 0 ? threads : omp_get_num_procs());
  int64_t steps = 0;
  for (auto _ : state) {
    auto snapshot = Train(request, data, MethodRegistry::Builtin());
    BNN_CHECK_OK(snapshot.status());
    steps = snapshot->training.steps;
  }
  omp_set_num_threads(saved);
  state.counters["steps"] = static_cast<double>(steps);
  state.counters["threads"] = threads > 0 ? threads : omp_get_num_procs();
}

void Register() {
  for (const char* method : {"slang", "noisy_kfac"}) {
    for (const int threads : {1, 0}) {
      benchmark::RegisterBenchmark(
          (std::string("SmallJob/") + method + "/2-50-50-1/threads:" +
           (threads > 0 ? std::to_string(threads) : std::string("all")))
              .c_str(),
          [method, threads](benchmark::State& s) {
            BM_SmallJob(s, method, threads);
          })
          ->Unit(benchmark::kMillisecond)
          ->UseRealTime()
          ->Iterations(3);
    }
  }
}

const int kRegistered = (Register(), 0);

}  // namespace
}  // namespace bnn
