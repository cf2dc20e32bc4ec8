// Predict latency distributions (p50/p99) and throughput for the snapshots of
// issue #3, in-process and, with --server, through gRPC on loopback. Each
// case runs with the sample cache (one seed for every request) and without
// (a new seed per request, so every request draws its S weight vectors).
//
//   build/bench/perf/bnn_predict_latency --json-out FILE
//   build/bench/perf/bnn_predict_latency --server build/server/bnn-server
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include <Eigen/Core>

#include "bnn/check.h"
#include "bnn/posterior/low_rank_gaussian.h"
#include "bnn/predict/predictor.h"

#include "bench/perf/latency_harness.h"

ABSL_FLAG(std::string, json_out, "", "Write the results as JSON here.");
ABSL_FLAG(std::string, server, "",
          "Path of bnn-server: also measure Predict through gRPC on loopback.");
ABSL_FLAG(std::vector<std::string>, server_args, {},
          "Extra bnn-server flags, comma-separated (e.g. --threads=1).");
ABSL_FLAG(std::string, only, "",
          "Run only the cases whose net name contains this (e.g. uci).");
ABSL_FLAG(double, seconds, 3.0, "Minimum measuring time per case.");

namespace bnn::bench {
namespace {

struct Case {
  std::string name;
  int input;
  std::vector<int> hidden;
  int classes;  // 0: regression
  int rank;
  int rows;
  int samples;
};

const Case kCases[] = {
    {"uci_13_50_1", 13, {50}, 0, 1, 1, 100},
    {"uci_13_50_1", 13, {50}, 0, 1, 1000, 100},
    {"mnist_784_400_400_10", 784, {400, 400}, 10, 32, 1, 64},
    {"mnist_784_400_400_10", 784, {400, 400}, 10, 32, 100, 64},
};

std::shared_ptr<Snapshot> MakeSnapshot(const Case& c) {
  auto s = std::make_shared<Snapshot>();
  s->task = c.classes > 0 ? Task::kMulticlass : Task::kRegression;
  s->model = ModelSpec::ForTask(s->task, c.input, c.classes, c.hidden,
                                Activation::kRelu);
  for (int k = 0; k < c.classes; ++k) s->class_values.push_back(k);
  s->method = "slang";
  s->library_version = "0.1.0";
  const int64_t dim = s->model.NumParameters();
  Rng rng(3);
  Eigen::VectorXd mean(dim), d(dim);
  Eigen::MatrixXd u(dim, c.rank);
  for (int64_t j = 0; j < dim; ++j) {
    mean[j] = 0.05 * rng.Normal();
    d[j] = 100 + rng.Uniform();
    for (int l = 0; l < c.rank; ++l) u(j, l) = rng.Normal();
  }
  auto posterior = LowRankGaussianPosterior::Create(mean, u, d);
  BNN_CHECK_OK(posterior.status());
  s->posterior = std::move(posterior).value();
  s->standardization.feature_mean.assign(c.input, 0.0);
  s->standardization.feature_std.assign(c.input, 1.0);
  return s;
}

std::vector<double> Rows(const Case& c) {
  Rng rng(5);
  std::vector<double> x(static_cast<size_t>(c.rows) * c.input);
  for (double& v : x) v = rng.Normal();
  return x;
}

int Main() {
  const double seconds = absl::GetFlag(FLAGS_seconds);
  Report report;
  report.server_binary = absl::GetFlag(FLAGS_server);
  report.gemm = MeasureGemm();
  std::unique_ptr<GrpcTarget> grpc;
  if (!absl::GetFlag(FLAGS_server).empty()) {
    auto target = GrpcTarget::Start(absl::GetFlag(FLAGS_server),
                                    absl::GetFlag(FLAGS_server_args));
    BNN_CHECK_OK(target.status());
    grpc = std::move(target).value();
  }
  const std::string only = absl::GetFlag(FLAGS_only);
  for (const Case& c : kCases) {
    if (!only.empty() && c.name.find(only) == std::string::npos) continue;
    const auto snapshot = MakeSnapshot(c);
    const std::vector<double> rows = Rows(c);
    const double flops =
        2.0 * snapshot->model.NumParameters() * c.rows * c.samples;
    auto predictor = Predictor::Create(snapshot);
    BNN_CHECK_OK(predictor.status());
    std::string remote_id;
    if (grpc != nullptr) {
      auto id = grpc->Import(*snapshot);
      BNN_CHECK_OK(id.status());
      remote_id = *id;
    }
    for (const bool cached : {true, false}) {
      uint64_t seed = 1;
      PredictOptions options;
      options.num_samples = c.samples;
      auto next_seed = [&] { return cached ? uint64_t{1} : ++seed; };
      Result in_process = Measure(seconds, [&] {
        options.seed = next_seed();
        BNN_CHECK_OK((*predictor)->Predict(rows, c.rows, options).status());
      });
      in_process.Describe(c.name, "in-process", c.rows, c.samples, cached,
                          flops);
      report.results.push_back(in_process);
      if (grpc != nullptr) {
        Result remote = Measure(seconds, [&] {
          BNN_CHECK_OK(
              grpc->Predict(remote_id, rows, c.input, c.samples, next_seed()));
        });
        remote.Describe(c.name, "grpc", c.rows, c.samples, cached, flops);
        report.results.push_back(remote);
      }
    }
  }
  report.Print();
  if (!absl::GetFlag(FLAGS_json_out).empty()) {
    BNN_CHECK_OK(report.WriteJson(absl::GetFlag(FLAGS_json_out)));
  }
  return 0;
}

}  // namespace
}  // namespace bnn::bench

int main(int argc, char** argv) {
  absl::ParseCommandLine(argc, argv);
  return bnn::bench::Main();
}
