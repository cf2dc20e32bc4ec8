// Serving while training (issue 15): 8 concurrent clients sending 1-row
// Predicts of a UCI-size model (13-50-1 SLANG, S = 100) to a real
// bnn-server with its default flags, first alone, then while the server
// trains an MNIST-size SLANG job (784-400-400-10, rank 32, S = 4, M = 200 on
// 10,000 synthetic rows). Also trains that job with no Predict traffic, so
// the training slowdown that serving costs is measured in the same run.
// Clients are closed loops (the next call when the last returns); latency is
// client-measured, call to response.
//
//   build/bench/perf/bnn_serve_while_training --server build/server/bnn-server
//       [--clients 8 --seconds 15 --json_out FILE]
#include <algorithm>
#include <atomic>
#include <cstdio>
#include <fstream>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include <absl/flags/flag.h>
#include <absl/flags/parse.h>
#include <absl/time/clock.h>
#include <absl/time/time.h>
#include <nlohmann/json.hpp>

#include "bnn/check.h"
#include "bnn/random.h"

#include "bench/common/provenance.h"
#include "bench/perf/latency_harness.h"
#include "client/bnn_client.h"

ABSL_FLAG(std::string, server, "", "Path of bnn-server (required).");
ABSL_FLAG(std::vector<std::string>, server_args, {},
          "Extra bnn-server flags, comma-separated (default: none).");
ABSL_FLAG(int, clients, 8, "Concurrent Predict clients.");
ABSL_FLAG(double, seconds, 15, "Length of each phase.");
ABSL_FLAG(int, mnist_rows, 10000, "Rows of the MNIST-size training set.");
ABSL_FLAG(std::string, json_out, "", "Write the results as JSON here.");

namespace bnn::bench {
namespace {

using client::BnnClient;

std::unique_ptr<BnnClient> Connect(const std::string& address) {
  BnnClient::Options options;
  options.target = address;
  absl::StatusOr<std::unique_ptr<BnnClient>> c = BnnClient::Create(options);
  BNN_CHECK_OK(c.status());
  return *std::move(c);
}

// Uploads `rows` x `features` uniform features with targets from `label`.
std::string Upload(BnnClient& c, const std::string& name, int rows,
                   int features, int classes) {
  std::vector<double> x(static_cast<size_t>(rows) * features), y(rows);
  CounterRng(7).FillUniform(0, 0, x.data(), x.size());
  for (int i = 0; i < rows; ++i) {
    double s = 0;
    for (int j = 0; j < features; ++j)
      s += (j % 2 ? -1 : 1) * x[i * features + j];
    y[i] = classes > 0 ? i % classes : s;
  }
  v1::DatasetHeader header;
  header.set_name(name);
  header.set_task(classes > 0 ? v1::TASK_CLASSIFICATION : v1::TASK_REGRESSION);
  header.set_num_features(features);
  absl::StatusOr<v1::DatasetInfo> info = c.UploadDataset(header, x, y);
  BNN_CHECK_OK(info.status());
  return info->dataset_id();
}

std::string Train(BnnClient& c, const std::string& dataset,
                  std::vector<int> hidden, int epochs,
                  std::vector<std::pair<std::string, std::string>> params) {
  v1::StartTrainingRequest request;
  request.set_dataset_id(dataset);
  request.set_method("slang");
  request.set_epochs(epochs);
  request.set_seed(1);
  for (int h : hidden) request.mutable_model()->add_hidden_sizes(h);
  for (const auto& [k, v] : params) (*request.mutable_params())[k] = v;
  absl::StatusOr<std::string> id = c.StartTraining(request);
  BNN_CHECK_OK(id.status());
  return *id;
}

int64_t StepOf(BnnClient& c, const std::string& job) {
  absl::StatusOr<v1::Job> j = c.GetJob(job);
  BNN_CHECK_OK(j.status());
  return j->step();
}

struct Latencies {
  std::vector<double> ms;
  double Percentile(double p) const {
    if (ms.empty()) return 0;
    std::vector<double> s = ms;
    std::sort(s.begin(), s.end());
    return s[std::min(s.size() - 1, static_cast<size_t>(p * s.size()))];
  }
  nlohmann::json ToJson() const {
    return {{"calls", ms.size()},
            {"p50_ms", Percentile(0.5)},
            {"p99_ms", Percentile(0.99)},
            {"max_ms", Percentile(1.0)}};
  }
};

// `clients` closed loops of 1-row Predicts for `seconds`.
Latencies Serve(const std::string& address, const std::string& snapshot,
                int clients, double seconds) {
  std::vector<Latencies> per(clients);
  std::vector<std::thread> threads;
  const absl::Time end = absl::Now() + absl::Seconds(seconds);
  for (int k = 0; k < clients; ++k) {
    threads.emplace_back([&, k] {
      std::unique_ptr<BnnClient> c = Connect(address);
      std::vector<double> row(13);
      CounterRng(k + 100).FillNormal(0, 0, row.data(), row.size());
      while (absl::Now() < end) {
        const absl::Time t = absl::Now();
        BNN_CHECK_OK(c->Predict(snapshot, row, 13, 100, 1).status());
        per[k].ms.push_back(absl::ToDoubleMilliseconds(absl::Now() - t));
      }
    });
  }
  for (std::thread& t : threads) t.join();
  Latencies all;
  for (const Latencies& l : per)
    all.ms.insert(all.ms.end(), l.ms.begin(), l.ms.end());
  return all;
}

int Main() {
  const std::string server = absl::GetFlag(FLAGS_server);
  BNN_CHECK(!server.empty());  // --server is required
  absl::StatusOr<std::unique_ptr<GrpcTarget>> target =
      GrpcTarget::Start(server, absl::GetFlag(FLAGS_server_args));
  BNN_CHECK_OK(target.status());
  const std::string address = (*target)->address();
  std::unique_ptr<BnnClient> c = Connect(address);
  const int clients = absl::GetFlag(FLAGS_clients);
  const double seconds = absl::GetFlag(FLAGS_seconds);

  // The served model: a 13-50-1 SLANG net trained by the server.
  const std::string uci = Upload(*c, "uci-like", 500, 13, 0);
  absl::StatusOr<v1::Job> served = c->WaitForJob(
      Train(*c, uci, {50}, 20, {{"rank", "1"}, {"batch_size", "32"}}),
      absl::Seconds(120));
  BNN_CHECK_OK(served.status());
  const std::string snapshot = served->snapshot_id();
  const std::string mnist =
      Upload(*c, "mnist-like", absl::GetFlag(FLAGS_mnist_rows), 784, 10);
  const std::vector<std::pair<std::string, std::string>> mnist_params = {
      {"rank", "32"}, {"mc_samples", "4"}, {"batch_size", "200"}};

  nlohmann::json out;
  out["build"] = ProvenanceJson(server);
  out["clients"] = clients;
  out["seconds_per_phase"] = seconds;
  Serve(address, snapshot, clients, 2);  // warm-up: sample cache, channels
  const Latencies alone = Serve(address, snapshot, clients, seconds);
  out["serving_alone"] = alone.ToJson();

  // Training alone: steps over `seconds` once the job runs.
  const std::string job = Train(*c, mnist, {400, 400}, 1000, mnist_params);
  while (StepOf(*c, job) < 2) absl::SleepFor(absl::Milliseconds(50));
  int64_t s0 = StepOf(*c, job);
  absl::SleepFor(absl::Seconds(seconds));
  int64_t s1 = StepOf(*c, job);
  const double alone_rate = (s1 - s0) / seconds;
  out["training_alone_steps_per_second"] = alone_rate;

  // Both.
  s0 = StepOf(*c, job);
  const Latencies both = Serve(address, snapshot, clients, seconds);
  s1 = StepOf(*c, job);
  const double both_rate = (s1 - s0) / seconds;
  out["serving_while_training"] = both.ToJson();
  out["training_while_serving_steps_per_second"] = both_rate;
  out["training_slowdown"] = both_rate > 0 ? alone_rate / both_rate : 0;
  BNN_CHECK_OK(c->CancelJob(job).status());

  std::printf("%d clients, 1-row UCI Predicts (S = 100), %.0f s per phase\n",
              clients, seconds);
  std::printf("  serving alone:          %zu calls, p50 %.3f ms, p99 %.3f ms\n",
              alone.ms.size(), alone.Percentile(0.5), alone.Percentile(0.99));
  std::printf("  while training MNIST:   %zu calls, p50 %.3f ms, p99 %.3f ms\n",
              both.ms.size(), both.Percentile(0.5), both.Percentile(0.99));
  std::printf("  training: %.2f steps/s alone, %.2f while serving (%.2fx)\n",
              alone_rate, both_rate, out["training_slowdown"].get<double>());
  if (!absl::GetFlag(FLAGS_json_out).empty()) {
    std::ofstream(absl::GetFlag(FLAGS_json_out)) << out.dump(2) << "\n";
  }
  return 0;
}

}  // namespace
}  // namespace bnn::bench

int main(int argc, char** argv) {
  absl::ParseCommandLine(argc, argv);
  return bnn::bench::Main();
}
