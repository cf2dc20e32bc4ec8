// Predict for 1 and 1000 rows with S = 64 from a rank-L low-rank posterior on
// the UCI and MNIST-size nets, and cold one-row requests as a server serves
// a request without a seed (issue 15: a new draw each time, not cached), in
// float64 and float32 forward passes. bench/peers/torch_predict.py is the
// PyTorch peer of the same cases (bench/peers/run_peers.sh predict).
// BM_GemmRate measures this machine's GEMM rate in the same run, the
// yardstick of the forward passes' "GFLOP/s" counter (the machine the
// project runs on changes between sessions: a rate quoted from another run
// is not a yardstick).
//
//   build/bench/perf/bnn_perf_bench --benchmark_filter=Predict
#include <memory>
#include <vector>

#include <benchmark/benchmark.h>

#include "bnn/check.h"
#include "bnn/io/record.h"
#include "bnn/io/snapshot.h"
#include "bnn/posterior/low_rank_gaussian.h"
#include "bnn/predict/predictor.h"
#include "bnn/random.h"

namespace bnn {
namespace {

std::shared_ptr<Snapshot> MakeSnapshot(int input, std::vector<int> hidden,
                                       int classes, int rank) {
  auto s = std::make_shared<Snapshot>();
  s->task = classes > 1 ? Task::kMulticlass : Task::kRegression;
  s->model = ModelSpec::ForTask(s->task, input, classes, std::move(hidden),
                                Activation::kRelu);
  for (int c = 0; c < classes; ++c) s->class_values.push_back(c);
  const int64_t dim = s->model.NumParameters();
  Rng rng(3);
  Eigen::VectorXd mean(dim), d(dim);
  Eigen::MatrixXd u(dim, rank);
  for (int64_t j = 0; j < dim; ++j) {
    mean[j] = 0.05 * rng.Normal();
    d[j] = 100 + rng.Uniform();
    for (int l = 0; l < rank; ++l) u(j, l) = rng.Normal();
  }
  auto posterior = LowRankGaussianPosterior::Create(mean, u, d);
  BNN_CHECK_OK(posterior.status());
  s->posterior = std::move(posterior).value();
  s->standardization.feature_mean.assign(input, 0.0);
  s->standardization.feature_std.assign(input, 1.0);
  return s;
}

// Flops of one forward pass of `rows` rows for S samples: 2 x rows x S x
// sum over layers of (in + 1) x out (the layer GEMMs; activations and the
// predictive statistics are not counted).
double ForwardFlops(const ModelSpec& spec, int64_t rows, int64_t samples) {
  double per_row = 0;
  for (const LayerShape& l : spec.Layers()) {
    per_row += 2.0 * (l.in + 1) * l.out;
  }
  return per_row * static_cast<double>(rows * samples);
}

// The machine's GEMM rate: C = A B with n x n operands (n = state.range(0)),
// Eigen with the forward passes' compiler flags and the calling thread's
// OpenMP limit. Reported as the "GFLOP/s" counter.
template <typename T>
void BM_GemmRate(benchmark::State& state) {
  const int64_t n = state.range(0);
  using Matrix = Eigen::Matrix<T, Eigen::Dynamic, Eigen::Dynamic>;
  const Matrix a = Matrix::Random(n, n), b = Matrix::Random(n, n);
  Matrix c(n, n);
  c.noalias() = a * b;  // page-faults c and warms the packing buffers
  for (auto _ : state) {
    c.noalias() = a * b;
    benchmark::DoNotOptimize(c.data());
  }
  state.counters["GFLOP/s"] = benchmark::Counter(
      2.0 * n * n * n * 1e-9 * state.iterations(), benchmark::Counter::kIsRate);
}
BENCHMARK_TEMPLATE(BM_GemmRate, float)
    ->Arg(2048)
    ->ArgName("n")
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();
BENCHMARK_TEMPLATE(BM_GemmRate, double)
    ->Arg(2048)
    ->ArgName("n")
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();

// CounterRng::FillNormal's cost per normal (perf.md, "CounterRng was not
// vectorised on AVX2"): 2^20 normals per iteration, one stream each.
void BM_CounterRngFillNormal(benchmark::State& state) {
  const CounterRng rng(3);
  std::vector<double> v(size_t{1} << 20);
  uint64_t stream = 0;
  for (auto _ : state) {
    rng.FillNormal(stream++, 0, v.data(), v.size());
    benchmark::DoNotOptimize(v.data());
  }
  state.SetItemsProcessed(state.iterations() * static_cast<int64_t>(v.size()));
}
BENCHMARK(BM_CounterRngFillNormal)->Unit(benchmark::kMillisecond);

// Decoding the MNIST-size snapshot (784-400-400-10, rank 32: 478k weights,
// U 122 MB): what a server pays to load a model after a restart (perf.md,
// "First Predict after a job and after a restart").
void BM_SnapshotDecode(benchmark::State& state) {
  std::shared_ptr<Snapshot> snapshot = MakeSnapshot(784, {400, 400}, 10, 32);
  snapshot->method = "slang";
  absl::StatusOr<std::string> bytes = EncodeSnapshot(*snapshot);
  BNN_CHECK_OK(bytes.status());
  for (auto _ : state) {
    absl::StatusOr<Snapshot> decoded = DecodeSnapshot(*bytes);
    BNN_CHECK_OK(decoded.status());
    benchmark::DoNotOptimize(decoded->posterior.get());
  }
  state.SetBytesProcessed(state.iterations() *
                          static_cast<int64_t>(bytes->size()));
}
BENCHMARK(BM_SnapshotDecode)->Unit(benchmark::kMillisecond)->UseRealTime();

// The records' checksum over 64 MiB: Crc32cExtend (the SSE4.2 instruction
// where the CPU has it) against the byte-at-a-time table it replaced.
void BM_Crc32c(benchmark::State& state) {
  const bool table = state.range(0) == 1;
  const std::string bytes(size_t{64} << 20, '\x5a');
  for (auto _ : state) {
    benchmark::DoNotOptimize(table ? internal::Crc32cExtendPortable(0, bytes)
                                   : Crc32cExtend(0, bytes));
  }
  state.SetLabel(table ? "table" : "Crc32cExtend");
  state.SetBytesProcessed(state.iterations() *
                          static_cast<int64_t>(bytes.size()));
}
BENCHMARK(BM_Crc32c)->Arg(0)->Arg(1)->Unit(benchmark::kMillisecond);

// state.range(1) == 1: warm (the (S, seed) samples are cached by a first
// request); 0: cold (a new seed per request, so every request draws S
// weight vectors).
// `precision`: PredictorOptions::precision of the forward passes.
void BM_Predict(benchmark::State& state, int input, std::vector<int> hidden,
                int classes, int rank, const char* precision) {
  PredictorOptions predictor_options;
  predictor_options.precision = precision;
  auto predictor = Predictor::Create(
      MakeSnapshot(input, std::move(hidden), classes, rank), predictor_options);
  BNN_CHECK_OK(predictor.status());
  const int64_t rows = state.range(0);
  Rng rng(5);
  std::vector<double> x(rows * input);
  for (double& v : x) v = rng.Normal();
  PredictOptions options;
  options.num_samples = 64;
  const bool warm = state.range(1) == 1;
  if (warm) BNN_CHECK_OK((*predictor)->Predict(x, rows, options).status());
  for (auto _ : state) {
    if (!warm) ++options.seed;
    auto p = (*predictor)->Predict(x, rows, options);
    BNN_CHECK_OK(p.status());
    benchmark::DoNotOptimize(p->num_rows);
  }
  state.SetItemsProcessed(state.iterations() * rows);
  state.counters["GFLOP/s"] = benchmark::Counter(
      ForwardFlops((*predictor)->snapshot().model, rows, options.num_samples) *
          1e-9 * state.iterations(),
      benchmark::Counter::kIsRate);
}

// One row, S = state.range(0) samples, a new seed per request and
// cache_samples = false: what a server does for a Predict without a seed,
// so every request draws S weight vectors. The calling thread's OpenMP
// limit (OMP_NUM_THREADS, default one per core) is the draw's.
void BM_PredictCold(benchmark::State& state, int input, std::vector<int> hidden,
                    int classes, int rank, const char* precision) {
  PredictorOptions predictor_options;
  predictor_options.precision = precision;
  auto predictor = Predictor::Create(
      MakeSnapshot(input, std::move(hidden), classes, rank), predictor_options);
  BNN_CHECK_OK(predictor.status());
  Rng rng(5);
  std::vector<double> x(input);
  for (double& v : x) v = rng.Normal();
  PredictOptions options;
  options.num_samples = static_cast<int>(state.range(0));
  options.cache_samples = false;
  for (auto _ : state) {
    ++options.seed;
    auto p = (*predictor)->Predict(x, 1, options);
    BNN_CHECK_OK(p.status());
    benchmark::DoNotOptimize(p->num_rows);
  }
}

// Every case in both precisions: <net>_L<rank> (float64, the names of the
// earlier reports) and <net>_L<rank>_float32.
#define BNN_PREDICT_BENCHMARKS(suffix, precision)                          \
  BENCHMARK_CAPTURE(BM_PredictCold, uci_13_50_1_L1##suffix, 13,            \
                    std::vector<int>{50}, 1, 1, precision)                 \
      ->Arg(100)                                                           \
      ->ArgName("samples")                                                 \
      ->Unit(benchmark::kMillisecond)                                      \
      ->UseRealTime();                                                     \
  BENCHMARK_CAPTURE(BM_PredictCold, mnist_784_400_400_10_L32##suffix, 784, \
                    std::vector<int>{400, 400}, 10, 32, precision)         \
      ->Arg(64)                                                            \
      ->ArgName("samples")                                                 \
      ->Unit(benchmark::kMillisecond)                                      \
      ->UseRealTime()                                                      \
      ->MinTime(2.0);                                                      \
  BENCHMARK_CAPTURE(BM_Predict, uci_13_50_1_L1##suffix, 13,                \
                    std::vector<int>{50}, 1, 1, precision)                 \
      ->ArgsProduct({{1, 1000}, {0, 1}})                                   \
      ->ArgNames({"rows", "warm"})                                         \
      ->Unit(benchmark::kMillisecond)                                      \
      ->UseRealTime();                                                     \
  BENCHMARK_CAPTURE(BM_Predict, mnist_784_400_400_10_L32##suffix, 784,     \
                    std::vector<int>{400, 400}, 10, 32, precision)         \
      ->ArgsProduct({{1, 1000}, {0, 1}})                                   \
      ->ArgNames({"rows", "warm"})                                         \
      ->Unit(benchmark::kMillisecond)                                      \
      ->UseRealTime()                                                      \
      ->MinTime(3.0)

BNN_PREDICT_BENCHMARKS(, "float64");
BNN_PREDICT_BENCHMARKS(_float32, "float32");

}  // namespace
}  // namespace bnn
