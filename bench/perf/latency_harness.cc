#include "bench/perf/latency_harness.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fcntl.h>
#include <filesystem>
#include <fstream>
#include <regex>
#include <signal.h>
#include <spawn.h>
#include <sstream>
#include <sys/wait.h>
#include <thread>
#include <unistd.h>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include <Eigen/Core>
#include <grpcpp/grpcpp.h>

#include "bnn/v1/bnn_service.grpc.pb.h"

#include "bench/common/provenance.h"

extern char** environ;

namespace bnn::bench {

using Clock = std::chrono::steady_clock;

double Result::Percentile(double p) const {
  std::vector<double> sorted = seconds;
  std::sort(sorted.begin(), sorted.end());
  const size_t i = std::min(sorted.size() - 1,
                            static_cast<size_t>(p * (sorted.size() - 1) + 0.5));
  return sorted[i];
}

double Result::RowSamplesPerSecond() const {
  double total = 0;
  for (double s : seconds) total += s;
  return static_cast<double>(rows) * samples * seconds.size() / total;
}

double Result::GflopsPerSecond() const {
  double total = 0;
  for (double s : seconds) total += s;
  return flops * seconds.size() / total / 1e9;
}

void Result::Describe(std::string name_, std::string mode_, int rows_,
                      int samples_, bool cached_, double flops_) {
  name = std::move(name_);
  mode = std::move(mode_);
  rows = rows_;
  samples = samples_;
  cached = cached_;
  flops = flops_;
}

Result Measure(double min_seconds, const std::function<void()>& request) {
  Result r;
  request();  // warm-up: connections, workspaces, first sample draw
  const auto start = Clock::now();
  while (r.seconds.size() < 10 ||
         std::chrono::duration<double>(Clock::now() - start).count() <
             min_seconds) {
    const auto t0 = Clock::now();
    request();
    r.seconds.push_back(
        std::chrono::duration<double>(Clock::now() - t0).count());
  }
  return r;
}

GemmThroughput MeasureGemm() {
  auto run = [](auto zero) {
    using T = decltype(zero);
    using M = Eigen::Matrix<T, Eigen::Dynamic, Eigen::Dynamic>;
    const int n = 2048;
    const M a = M::Random(n, n), b = M::Random(n, n);
    M c(n, n);
    c.noalias() = a * b;
    const auto t0 = Clock::now();
    const int reps = 5;
    for (int i = 0; i < reps; ++i) c.noalias() = a * b;
    const double s = std::chrono::duration<double>(Clock::now() - t0).count();
    return 2.0 * n * n * n * reps / s / 1e9;
  };
  return {run(0.0f), run(0.0)};
}

void Report::Print() const {
  std::printf(
      "GEMM throughput (2048^3): float %.1f GFLOP/s, double %.1f GFLOP/s\n\n",
      gemm.float_gflops, gemm.double_gflops);
  std::printf(
      "| net | mode | rows | S | cache | p50 ms | p99 ms | rows*S/s | GFLOP/s "
      "| %% of double GEMM |\n");
  std::printf("|---|---|---|---|---|---|---|---|---|---|\n");
  for (const Result& r : results) {
    std::printf(
        "| %s | %s | %d | %d | %s | %.3f | %.3f | %.0f | %.1f | %.0f%% |\n",
        r.name.c_str(), r.mode.c_str(), r.rows, r.samples,
        r.cached ? "warm" : "cold", 1e3 * r.Percentile(0.5),
        1e3 * r.Percentile(0.99), r.RowSamplesPerSecond(), r.GflopsPerSecond(),
        100 * r.GflopsPerSecond() / gemm.double_gflops);
  }
}

absl::Status Report::WriteJson(const std::string& path) const {
  std::ofstream out(path);
  out << "{\n  \"build\": " << ProvenanceJson(server_binary).dump()
      << ",\n  \"gemm_gflops\": {\"float\": " << gemm.float_gflops
      << ", \"double\": " << gemm.double_gflops << "},\n  \"results\": [\n";
  for (size_t i = 0; i < results.size(); ++i) {
    const Result& r = results[i];
    out << absl::StrFormat(
        "    {\"net\": \"%s\", \"mode\": \"%s\", \"rows\": %d, \"samples\": "
        "%d, "
        "\"cache\": %s, \"requests\": %d, \"p50_ms\": %.4f, \"p99_ms\": %.4f, "
        "\"rows_samples_per_s\": %.1f, \"gflops\": %.2f}%s\n",
        r.name, r.mode, r.rows, r.samples, r.cached ? "true" : "false",
        static_cast<int>(r.seconds.size()), 1e3 * r.Percentile(0.5),
        1e3 * r.Percentile(0.99), r.RowSamplesPerSecond(), r.GflopsPerSecond(),
        i + 1 < results.size() ? "," : "");
  }
  out << "  ]\n}\n";
  return out.good() ? absl::OkStatus()
                    : absl::InternalError(absl::StrCat("cannot write ", path));
}

struct GrpcTarget::Stub {
  std::unique_ptr<v1::BnnService::Stub> stub;
};

absl::StatusOr<std::unique_ptr<GrpcTarget>> GrpcTarget::Start(
    const std::string& server_binary,
    const std::vector<std::string>& extra_args) {
  std::unique_ptr<GrpcTarget> t(new GrpcTarget());
  std::string tmpl =
      (std::filesystem::temp_directory_path() / "bnn_latency_XXXXXX").string();
  if (mkdtemp(tmpl.data()) == nullptr) {
    return absl::InternalError("cannot create a temporary directory");
  }
  t->dir_ = tmpl;
  const std::string log = t->dir_ + "/server.log";
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, STDOUT_FILENO, log.c_str(),
                                   O_WRONLY | O_CREAT | O_TRUNC, 0644);
  posix_spawn_file_actions_adddup2(&actions, STDOUT_FILENO, STDERR_FILENO);
  const std::string data = t->dir_ + "/data";
  // 4 GiB of sample cache (512 MiB per cached snapshot): 64 samples of the
  // MNIST-size net are 245 MB, over the default 128 MiB share.
  std::vector<std::string> args = {server_binary,
                                   "--listen",
                                   "127.0.0.1:0",
                                   "--data-dir",
                                   data,
                                   "--metrics-listen",
                                   "",
                                   "--predict-cache-bytes",
                                   "4294967296"};
  args.insert(args.end(), extra_args.begin(), extra_args.end());
  std::vector<char*> argv;
  for (std::string& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  const int rc = posix_spawn(&t->pid_, server_binary.c_str(), &actions, nullptr,
                             argv.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  if (rc != 0) {
    return absl::InternalError(absl::StrCat("cannot start ", server_binary));
  }
  const std::regex listening("listening on (127\\.0\\.0\\.1:[0-9]+)");
  for (int i = 0; i < 300; ++i) {
    std::ifstream in(log);
    std::stringstream text;
    text << in.rdbuf();
    const std::string s = text.str();
    std::smatch m;
    if (std::regex_search(s, m, listening)) {
      t->stub_ = std::make_unique<Stub>();
      t->address_ = m[1].str();
      auto channel =
          grpc::CreateChannel(m[1].str(), grpc::InsecureChannelCredentials());
      t->stub_->stub = v1::BnnService::NewStub(channel);
      return t;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  return absl::DeadlineExceededError("bnn-server did not report its port");
}

GrpcTarget::~GrpcTarget() {
  if (pid_ > 0) {
    kill(pid_, SIGTERM);
    waitpid(pid_, nullptr, 0);
  }
  std::error_code ec;
  if (!dir_.empty()) std::filesystem::remove_all(dir_, ec);
}

absl::StatusOr<std::string> GrpcTarget::Import(const Snapshot& snapshot) {
  auto bytes = EncodeSnapshot(snapshot);
  if (!bytes.ok()) return bytes.status();
  grpc::ClientContext context;
  v1::SnapshotInfo info;
  auto writer = stub_->stub->ImportSnapshot(&context, &info);
  constexpr size_t kChunk = 1 << 20;
  for (size_t offset = 0; offset < bytes->size(); offset += kChunk) {
    v1::SnapshotChunk chunk;
    chunk.set_data(bytes->substr(offset, kChunk));
    if (!writer->Write(chunk)) break;
  }
  writer->WritesDone();
  const grpc::Status status = writer->Finish();
  if (!status.ok()) {
    return absl::Status(static_cast<absl::StatusCode>(status.error_code()),
                        status.error_message());
  }
  return info.snapshot_id();
}

absl::Status GrpcTarget::Predict(const std::string& snapshot_id,
                                 const std::vector<double>& rows,
                                 int num_features, int num_samples,
                                 uint64_t seed) {
  v1::PredictRequest request;
  request.set_snapshot_id(snapshot_id);
  request.set_num_samples(num_samples);
  request.set_seed(seed);
  for (size_t begin = 0; begin < rows.size(); begin += num_features) {
    request.add_rows()->mutable_x()->Add(rows.begin() + begin,
                                         rows.begin() + begin + num_features);
  }
  grpc::ClientContext context;
  v1::PredictResponse response;
  const grpc::Status status =
      stub_->stub->Predict(&context, request, &response);
  if (!status.ok()) {
    return absl::Status(static_cast<absl::StatusCode>(status.error_code()),
                        status.error_message());
  }
  return absl::OkStatus();
}

}  // namespace bnn::bench
