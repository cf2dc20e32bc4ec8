// One SLANG step at the three sizes of issue #2 (and a wide-minibatch UCI
// step), in the default configuration, in float64 and float32 with either
// eigensolver, and a plain reference step (per-example backward passes,
// materialised J, dense products) at the sizes where J fits in memory.
//
//   build/bench/perf/bnn_perf_bench --benchmark_filter=SlangStep
#include <algorithm>
#include <cmath>
#include <limits>
#include <memory>
#include <numeric>
#include <vector>

#include <Eigen/Eigenvalues>
#include <Eigen/QR>
#include <benchmark/benchmark.h>

#include "bnn/check.h"
#include "bnn/compute_threads.h"
#include "bnn/linalg/low_rank.h"
#include "bnn/model/network.h"

#include "methods/slang/slang_impl.h"

namespace bnn {
namespace {

struct Size {
  const char* name;
  int input;
  std::vector<int> hidden;
  int output;   // 1: Bernoulli/Gaussian, > 1: categorical
  int batch;    // M
  int samples;  // S
  int rank;     // L
};

const Size kSizes[] = {
    {"logreg_D15", 14, {}, 1, 32, 12, 5},
    {"uci_13_50_1", 13, {50}, 1, 10, 4, 1},
    {"mnist_784_400_400_10", 784, {400, 400}, 10, 200, 4, 32},
    // A wide minibatch on the UCI net, where eig_solver=auto takes the
    // randomized route (the exact one would eigendecompose 751 x 751).
    {"uci_wide_M1000", 13, {50}, 1, 1000, 4, 1},
};

// Random data with the size's shapes; N = 10 M so that c = N/(M S) is
// realistic. Regression for 1 output unless logistic (no hidden layers).
Dataset MakeData(const Size& size, Rng& rng) {
  Dataset d;
  d.num_features = size.input;
  const int n = 10 * size.batch;
  for (int i = 0; i < n * size.input; ++i) d.features.push_back(rng.Normal());
  if (size.output > 1) {
    d.task = Task::kMulticlass;
    d.num_classes = size.output;
    for (int c = 0; c < size.output; ++c) d.class_values.push_back(c);
    for (int i = 0; i < n; ++i)
      d.targets.push_back(rng.UniformInt(size.output));
  } else if (size.hidden.empty()) {
    d.task = Task::kBinary;
    d.num_classes = 2;
    d.class_values = {0, 1};
    for (int i = 0; i < n; ++i) d.targets.push_back(rng.UniformInt(2));
  } else {
    for (int i = 0; i < n; ++i) d.targets.push_back(rng.Normal());
  }
  return d;
}

ModelSpec SpecFor(const Size& size, const Dataset& d) {
  return ModelSpec::ForTask(d.task, size.input, d.num_classes, size.hidden,
                            Activation::kRelu);
}

SlangOptions OptionsFor(const Size& size, const char* precision,
                        const char* eig_solver = "randomized") {
  SlangOptions o;
  BNN_CHECK_OK(SlangOptionsSchema().Apply(
      {{"eig_solver", eig_solver}, {"precision", precision}}, &o));
  o.rank = size.rank;
  o.mc_samples = size.samples;
  o.batch_size = size.batch;
  return o;
}

template <typename T>
void BM_SlangStep(benchmark::State& state, const Size& size,
                  const char* eig_solver) {
  Rng rng(1);
  const Dataset data = MakeData(size, rng);
  const ModelSpec spec = SpecFor(size, data);
  internal::Slang<T> slang(OptionsFor(
      size, std::is_same_v<T, float> ? "float32" : "float64", eig_solver));
  BNN_CHECK_OK(slang.Initialize(spec, data, rng));
  std::vector<int64_t> batch(size.batch);
  std::iota(batch.begin(), batch.end(), 0);
  // Warm up past U = 0 so that every timed step has a rank-L U.
  BNN_CHECK_OK(slang.Step(batch, rng).status());
  for (auto _ : state) {
    auto stats = slang.Step(batch, rng);
    BNN_CHECK_OK(stats.status());
    benchmark::DoNotOptimize(stats->loss);
  }
  state.counters["D"] = static_cast<double>(spec.NumParameters());
  const double k = size.rank + 2;
  // Floor of the randomized eigensolver: 5 operator applications, each a
  // J^T X and a J Y product of 2 D (M S) K flops.
  state.counters["eig_GFLOP"] =
      5 * 4.0 * spec.NumParameters() * size.batch * size.samples * k / 1e9;
}

// The default configuration (eig_solver=auto, precision=auto) through the
// registry's factory, as a training job makes it; the trainer's thread
// policy is the step's own (Slang::Step).
void BM_SlangDefaultStep(benchmark::State& state, const Size& size) {
  Rng rng(1);
  const Dataset data = MakeData(size, rng);
  const ModelSpec spec = SpecFor(size, data);
  SlangOptions o;
  o.rank = size.rank;
  o.mc_samples = size.samples;
  o.batch_size = size.batch;
  const std::unique_ptr<VariationalMethod> slang =
      internal::CreateSlang(o, /*online_eig=*/false);
  BNN_CHECK_OK(slang->Initialize(spec, data, rng));
  std::vector<int64_t> batch(size.batch);
  std::iota(batch.begin(), batch.end(), 0);
  BNN_CHECK_OK(slang->Step(batch, rng).status());
  for (auto _ : state) {
    auto stats = slang->Step(batch, rng);
    BNN_CHECK_OK(stats.status());
    benchmark::DoNotOptimize(stats->loss);
  }
  const int64_t dim = spec.NumParameters();
  int64_t width = 0;
  for (const LayerShape& l : spec.Layers()) width += l.in + 1 + l.out;
  const EigFlops flops = EstimateEigFlops(
      dim, std::min<int64_t>(size.rank, dim),
      int64_t{size.batch} * size.samples, size.rank, o.power_iterations, width);
  state.counters["D"] = static_cast<double>(dim);
  state.counters["exact_route"] =
      ResolveEigSolver(flops) == EigSolver::kExact ? 1 : 0;
  state.counters["float32"] =
      internal::ResolvePrecision(o, spec) == Arithmetic::kFloat32 ? 1 : 0;
  state.counters["threads"] = ComputeThreadsFor(
      LargestGemmFlops(spec, int64_t{size.batch} * size.samples));
}

// The plain, readable reference of the same step: one backward pass per
// (example, sample) to fill the dense D x (M S) gradient matrix J, then the
// textbook randomized eigendecomposition (Halko et al. 2011, Alg. 4.4 + 5.3):
// Gaussian probes, power iterations with Householder QR, Rayleigh-Ritz on
// Q^T A Q; dense products with J throughout. Same update formulas.
void BM_PlainSlangStep(benchmark::State& state, const Size& size) {
  Rng rng(1);
  const Dataset data = MakeData(size, rng);
  const ModelSpec spec = SpecFor(size, data);
  const Network<double> net(spec);
  const SlangOptions o = OptionsFor(size, "float64");
  const int64_t dim = net.num_parameters();
  Eigen::VectorXd mu = net.InitialWeights(rng), d = Eigen::VectorXd::Ones(dim);
  Eigen::MatrixXd u = Eigen::MatrixXd::Zero(dim, 0);
  const Eigen::VectorXd prior =
      Eigen::VectorXd::Constant(dim, o.prior.prior_precision);
  Eigen::VectorXd momentum = Eigen::VectorXd::Zero(dim);
  const int ms = size.batch * size.samples;
  const double c = static_cast<double>(data.num_rows()) / ms;
  const int k = o.rank + 2;
  Eigen::MatrixXd j(dim, ms);  // the dense per-example gradients
  int t = 0;
  for (auto _ : state) {
    ++t;
    // theta_s = mu + (U U^T + D)^-1/2-factor eps (the library's sampler).
    LowRankPrecision<double> factor;
    BNN_CHECK_OK(factor.Factor(u, d));
    Eigen::MatrixXd eps(dim, size.samples), theta;
    for (int s = 0; s < size.samples; ++s)
      for (int64_t r = 0; r < dim; ++r) eps(r, s) = rng.Normal();
    factor.Sample(mu, eps, &theta);
    // J, one example at a time.
    ForwardPass<double> pass;
    PerExampleGrads<double> grads;
    Eigen::MatrixXd x(1, size.input);
    Eigen::VectorXd y(1), g;
    for (int s = 0; s < size.samples; ++s) {
      for (int i = 0; i < size.batch; ++i) {
        for (int f = 0; f < size.input; ++f) x(0, f) = data.row(i)[f];
        y[0] = data.targets[i];
        net.Forward(x, theta.col(s), &pass);
        net.Backward(y, 1.0, theta.col(s), pass, &grads, nullptr);
        grads.Sum(&g);
        j.col(s * size.batch + i) = g;
      }
    }
    const Eigen::VectorXd ghat = c * j.rowwise().sum();
    auto apply = [&](const Eigen::MatrixXd& v) -> Eigen::MatrixXd {
      Eigen::MatrixXd out = o.beta * c * (j * (j.transpose() * v));
      if (u.cols() > 0) out += (1 - o.beta) * (u * (u.transpose() * v));
      return out;
    };
    auto orthonormal = [](const Eigen::MatrixXd& y) -> Eigen::MatrixXd {
      Eigen::HouseholderQR<Eigen::MatrixXd> qr(y);
      return qr.householderQ() * Eigen::MatrixXd::Identity(y.rows(), y.cols());
    };
    Eigen::MatrixXd omega(dim, k);
    for (int col = 0; col < k; ++col)
      for (int64_t r = 0; r < dim; ++r) omega(r, col) = rng.Normal();
    Eigen::MatrixXd q = orthonormal(apply(omega));
    for (int it = 0; it < o.power_iterations; ++it) q = orthonormal(apply(q));
    const Eigen::MatrixXd b = q.transpose() * apply(q);
    Eigen::SelfAdjointEigenSolver<Eigen::MatrixXd> es(0.5 *
                                                      (b + b.transpose()));
    const Eigen::VectorXd values =
        es.eigenvalues().reverse().head(o.rank).cwiseMax(0.0);
    const Eigen::MatrixXd u_new =
        q * es.eigenvectors().rowwise().reverse().leftCols(o.rank) *
        values.cwiseSqrt().asDiagonal();
    Eigen::VectorXd delta = o.beta * c * j.cwiseAbs2().rowwise().sum() -
                            u_new.cwiseAbs2().rowwise().sum();
    if (u.cols() > 0) delta += (1 - o.beta) * u.cwiseAbs2().rowwise().sum();
    d = (1 - o.beta) * d + o.beta * prior + delta.cwiseMax(0.0);
    u = u_new;
    momentum = o.momentum * momentum + (1 - o.momentum) * ghat;
    BNN_CHECK_OK(factor.Factor(u, d));
    Eigen::MatrixXd step;
    factor.Solve(
        momentum / (1 - std::pow(o.momentum, t)) + prior.cwiseProduct(mu),
        &step);
    mu -= o.learning_rate * step.col(0);
    benchmark::DoNotOptimize(mu.data());
  }
  state.counters["D"] = static_cast<double>(dim);
}

void RegisterAll() {
  for (const Size& size : kSizes) {
    const bool big = size.input > 100;
    auto* def = benchmark::RegisterBenchmark(
        (std::string("SlangStep/default/") + size.name).c_str(),
        [&size](benchmark::State& s) { BM_SlangDefaultStep(s, size); });
    def->Unit(benchmark::kMillisecond)->UseRealTime();
    if (big) def->Iterations(5);
    for (const char* solver : {"randomized", "exact"}) {
      const std::string suffix = std::string(solver) + "/" + size.name;
      auto* b64 =
          benchmark::RegisterBenchmark(("SlangStep/float64/" + suffix).c_str(),
                                       [&size, solver](benchmark::State& s) {
                                         BM_SlangStep<double>(s, size, solver);
                                       });
      auto* b32 =
          benchmark::RegisterBenchmark(("SlangStep/float32/" + suffix).c_str(),
                                       [&size, solver](benchmark::State& s) {
                                         BM_SlangStep<float>(s, size, solver);
                                       });
      for (auto* b : {b64, b32}) {
        b->Unit(benchmark::kMillisecond)->UseRealTime();
        if (big) b->Iterations(5);
      }
    }
    if (size.batch > 200) continue;  // J would be D x 4000
    auto* plain = benchmark::RegisterBenchmark(
        (std::string("PlainSlangStep/float64/") + size.name).c_str(),
        [&size](benchmark::State& s) { BM_PlainSlangStep(s, size); });
    plain->Unit(benchmark::kMillisecond)->UseRealTime();
    // At the MNIST size J alone is 478,410 x 800 doubles (3.1 GB).
    if (big) plain->Iterations(2);
  }
}

// The Gram matrix J^T J of the exact route from Goodfellow's factors
// (PerExampleGrads::Gram: per layer the lower triangles of A A^T and
// Delta Delta^T as rank updates) against the plain reference of full
// products, on the small job's 2-50-50-1 net (M S = 128) and the
// MNIST-size net (M S = 800). range(0): 0 the library, 1 the reference.
void BM_Gram(benchmark::State& state, std::vector<int> units) {
  const bool reference = state.range(0) == 1;
  const int rows = static_cast<int>(state.range(1));
  Rng rng(2);
  const ModelSpec spec = ModelSpec::ForTask(
      Task::kRegression, units.front(), 0,
      std::vector<int>(units.begin() + 1, units.end() - 1), Activation::kRelu);
  const Network<double> net(spec);
  Eigen::MatrixXd x(rows, units.front());
  rng.FillNormal(x);
  const Eigen::VectorXd theta = 0.1 * net.InitialWeights(rng);
  Eigen::VectorXd y(rows);
  rng.FillNormal(y);
  ForwardPass<double> pass;
  PerExampleGrads<double> grads;
  net.Forward(x, theta, &pass);
  net.Backward(y, 1.0, theta, pass, &grads, nullptr);
  Eigen::MatrixXd a, b, gram;
  for (auto _ : state) {
    if (reference) {
      gram.setZero(rows, rows);
      for (size_t l = 0; l < grads.layers().size(); ++l) {
        a.noalias() = grads.inputs(l) * grads.inputs(l).transpose();
        b.noalias() = grads.deltas(l) * grads.deltas(l).transpose();
        gram.array() += a.array() * b.array();
      }
    } else {
      gram = grads.Gram();
    }
    benchmark::DoNotOptimize(gram.data());
  }
  state.SetLabel(reference ? "full products" : "PerExampleGrads::Gram");
}
BENCHMARK_CAPTURE(BM_Gram, small_job_2_50_50_1, std::vector<int>{2, 50, 50, 1})
    ->Args({0, 128})
    ->Args({1, 128})
    ->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_Gram, mnist_784_400_400_10,
                  std::vector<int>{784, 400, 400, 10})
    ->Args({0, 800})
    ->Args({1, 800})
    ->Unit(benchmark::kMillisecond);

// The exact route's eigenproblem: the top L eigenpairs of an m x m Gram
// matrix (m = L + M S) by TopEigenSolver, the term 8/3 m^3 of
// EstimateEigFlops, by each route (third argument: the smallest size
// Lanczos is tried at, 0 or INT_MAX, which pins Householder). "tridiag_gflops"
// is the Householder tridiagonalisation's 4/3 m^3 flops over the measured time:
// against BM_GemmRate<double> it is the weight the cost model gives those
// flops. Two kinds of matrix (fourth argument): 0, a Wishart matrix F F^T with
// F m x (m + 8) Gaussian, whose top eigenvalues crowd at the spectrum's
// edge (Lanczos' hard case); 1, the same with every column of F shifted by
// one shared Gaussian vector, as per-example gradients share the
// minibatch's mean direction (on issue 10's small job Lanczos converged in
// 8 iterations in 3,777 of 3,780 steps). Sizes: the UCI step (L = 1,
// M S = 40), the small job of issue 10 (1, 128), the MNIST-size step
// (32, 800), 1,000 x 1,000.
void BM_TopEigenSolver(benchmark::State& state) {
  const int m = static_cast<int>(state.range(0));
  const int wanted = static_cast<int>(state.range(1));
  const int lanczos_min_size = static_cast<int>(state.range(2));
  const bool spiked = state.range(3) != 0;
  Rng rng(5);
  Eigen::MatrixXd f(m, m + 8);
  rng.FillNormal(f);
  if (spiked) {
    Eigen::VectorXd shared(m);
    rng.FillNormal(shared);
    f.colwise() += 3 * shared;
  }
  const Eigen::MatrixXd gram = f * f.transpose();
  TopEigenSolver solver;
  solver.set_lanczos_min_size(lanczos_min_size);
  Eigen::VectorXd values;
  Eigen::MatrixXd vectors;
  for (auto _ : state) {
    solver.Compute(gram, wanted, &values, &vectors);
    benchmark::DoNotOptimize(values.data());
  }
  const double md = m;
  state.counters["lanczos"] =
      solver.last_route() == TopEigenSolver::Route::kLanczos;
  state.counters["lanczos_iterations"] = solver.last_lanczos_iterations();
  state.counters["tridiag_gflops"] =
      benchmark::Counter(4.0 / 3.0 * md * md * md * 1e-9,
                         benchmark::Counter::kIsIterationInvariantRate);
}
constexpr int64_t kNever = std::numeric_limits<int>::max();
BENCHMARK(BM_TopEigenSolver)
    ->ArgsProduct({{41, 64, 129}, {1}, {0, kNever}, {0, 1}})
    ->ArgsProduct({{832}, {32}, {0, kNever}, {0, 1}})
    ->ArgsProduct({{1000}, {1}, {0, kNever}, {0, 1}})
    ->Unit(benchmark::kMillisecond);

const int kRegistered = (RegisterAll(), 0);

}  // namespace
}  // namespace bnn
