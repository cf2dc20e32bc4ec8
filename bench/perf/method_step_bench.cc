// One training step of noisy K-FAC, noisy Adam (issue #5), BALI (issue #6),
// MC dropout and BBB, through the public method interface, with the per-phase
// breakdown the methods report; and one plain gradient step (forward,
// backward, summed gradient) at the same batch as the reference of BALI's
// §3.4 claim that a step costs the same order as a gradient step.
//
//   build/bench/perf/bnn_perf_bench
//   --benchmark_filter='NngStep|BaliStep|DropoutStep|BbbStep|GradientStep'
#include <numeric>
#include <string>
#include <vector>

#include <benchmark/benchmark.h>

#include "bnn/check.h"
#include "bnn/methods/method.h"
#include "bnn/methods/registry.h"
#include "bnn/model/network.h"

namespace bnn {
namespace {

struct Net {
  const char* name;
  int input;
  std::vector<int> hidden;
  int classes;  // 0: regression
};

const Net kUci = {"uci_13_50_1", 13, {50}, 0};
const Net kMnist = {"mnist_784_256_256_10", 784, {256, 256}, 10};

Dataset MakeData(const Net& net, int n, Rng& rng) {
  Dataset d;
  d.num_features = net.input;
  for (int i = 0; i < n * net.input; ++i) d.features.push_back(rng.Normal());
  if (net.classes > 0) {
    d.task = Task::kMulticlass;
    d.num_classes = net.classes;
    for (int c = 0; c < net.classes; ++c) d.class_values.push_back(c);
    for (int i = 0; i < n; ++i)
      d.targets.push_back(rng.UniformInt(net.classes));
  } else {
    for (int i = 0; i < n; ++i) d.targets.push_back(rng.Normal());
  }
  return d;
}

ModelSpec SpecFor(const Net& net, const Dataset& d, Activation act) {
  return ModelSpec::ForTask(d.task, net.input, d.num_classes, net.hidden, act);
}

void RunSteps(benchmark::State& state, const Net& net,
              const std::string& method, ParamMap params, int batch,
              Activation act) {
  Rng rng(1);
  const Dataset data = MakeData(net, 2 * batch, rng);
  const ModelSpec spec = SpecFor(net, data, act);
  params["batch_size"] = std::to_string(batch);
  auto m = MethodRegistry::Builtin().Create(method, params);
  BNN_CHECK_OK(m.status());
  BNN_CHECK_OK((*m)->Initialize(spec, data, rng));
  (*m)->SetSchedule(2, 1 << 30);
  std::vector<int64_t> rows(batch);
  std::iota(rows.begin(), rows.end(), 0);
  BNN_CHECK_OK((*m)->Step(rows, rng).status());  // warm-up: workspaces, factors
  PhaseSeconds total;
  for (auto _ : state) {
    auto stats = (*m)->Step(rows, rng);
    BNN_CHECK_OK(stats.status());
    total.forward_backward += stats->phases.forward_backward;
    total.statistics += stats->phases.statistics;
    total.factorization += stats->phases.factorization;
    total.sampling += stats->phases.sampling;
  }
  const double n = static_cast<double>(state.iterations());
  state.counters["fwd_bwd_ms"] = 1e3 * total.forward_backward / n;
  state.counters["stats_ms"] = 1e3 * total.statistics / n;
  state.counters["factor_ms"] = 1e3 * total.factorization / n;
  state.counters["sample_ms"] = 1e3 * total.sampling / n;
  state.counters["D"] = static_cast<double>(spec.NumParameters());
}

void BM_GradientStep(benchmark::State& state, const Net& net, int batch) {
  Rng rng(1);
  const Dataset data = MakeData(net, batch, rng);
  const ModelSpec spec = SpecFor(net, data, Activation::kLeakyTanh);
  const Network<double> network(spec);
  const Eigen::VectorXd theta = network.InitialWeights(rng);
  Eigen::MatrixXd x(batch, net.input);
  for (int i = 0; i < batch; ++i)
    for (int f = 0; f < net.input; ++f) x(i, f) = data.row(i)[f];
  const Eigen::VectorXd y =
      Eigen::Map<const Eigen::VectorXd>(data.targets.data(), batch);
  ForwardPass<double> pass;
  PerExampleGrads<double> grads;
  Eigen::VectorXd g;
  for (auto _ : state) {
    network.Forward(x, theta, &pass);
    network.Backward(y, 1.0, theta, pass, &grads, nullptr);
    grads.Sum(&g);
    benchmark::DoNotOptimize(g.data());
  }
}

void Register() {
  for (const Net* net : {&kUci, &kMnist}) {
    const int m = net == &kUci ? 10 : 128;
    const std::string suffix =
        std::string(net->name) + "/M" + std::to_string(m);
    benchmark::RegisterBenchmark(("NngStep/noisy_adam/" + suffix).c_str(),
                                 [net, m](benchmark::State& s) {
                                   RunSteps(s, *net, "noisy_adam", {}, m,
                                            Activation::kRelu);
                                 })
        ->Unit(benchmark::kMillisecond)
        ->UseRealTime();
    // The refresh (eigendecomposition of every factor) in every step, and
    // never after the first: the difference is its cost; at T_inv = 200
    // (the paper's) it is amortised 200-fold.
    for (const char* refresh : {"1", "1000000"}) {
      benchmark::RegisterBenchmark(
          ("NngStep/noisy_kfac/" + suffix + "/inverse_interval:" + refresh)
              .c_str(),
          [net, m, refresh](benchmark::State& s) {
            RunSteps(s, *net, "noisy_kfac", {{"inverse_interval", refresh}}, m,
                     Activation::kRelu);
          })
          ->Unit(benchmark::kMillisecond)
          ->UseRealTime();
    }
    // SLANG on the same nets and minibatches, one weight sample as in the
    // NNG steps (rank 1 on the UCI net, 32 on the MNIST-size one).
    for (const char* solver : {"randomized", "exact"}) {
      benchmark::RegisterBenchmark(
          ("NngStep/slang_" + std::string(solver) + "/" + suffix).c_str(),
          [net, m, solver](benchmark::State& s) {
            RunSteps(s, *net, "slang",
                     {{"mc_samples", "1"},
                      {"rank", net == &kUci ? "1" : "32"},
                      {"eig_solver", solver}},
                     m, Activation::kRelu);
          })
          ->Unit(benchmark::kMillisecond)
          ->UseRealTime();
    }
    const int b = 2048;
    const std::string bsuffix =
        std::string(net->name) + "/B" + std::to_string(b);
    for (const char* reparam : {"weight", "local"}) {
      benchmark::RegisterBenchmark(
          ("BaliStep/" + std::string(reparam) + "/" + bsuffix).c_str(),
          [net, b, reparam](benchmark::State& s) {
            RunSteps(s, *net, "bali", {{"reparameterization", reparam}}, b,
                     Activation::kLeakyTanh);
          })
          ->Unit(benchmark::kMillisecond)
          ->UseRealTime();
    }
    // MC dropout (BALI's baseline) and BBB (every paper's) at the NNG
    // minibatch: an Adam step through the masked (resp. sampled) network.
    benchmark::RegisterBenchmark(("DropoutStep/mc_dropout/" + suffix).c_str(),
                                 [net, m](benchmark::State& s) {
                                   RunSteps(s, *net, "mc_dropout",
                                            {{"dropout", "0.1"}}, m,
                                            Activation::kLeakyTanh);
                                 })
        ->Unit(benchmark::kMillisecond)
        ->UseRealTime();
    benchmark::RegisterBenchmark(("BbbStep/" + suffix).c_str(),
                                 [net, m](benchmark::State& s) {
                                   RunSteps(s, *net, "bbb", {}, m,
                                            Activation::kRelu);
                                 })
        ->Unit(benchmark::kMillisecond)
        ->UseRealTime();
    benchmark::RegisterBenchmark(
        ("GradientStep/" + bsuffix).c_str(),
        [net, b](benchmark::State& s) { BM_GradientStep(s, *net, b); })
        ->Unit(benchmark::kMillisecond)
        ->UseRealTime();
  }
}

const int kRegistered = (Register(), 0);

}  // namespace
}  // namespace bnn
