// bnn-server: trains Bayesian neural nets and serves predictive uncertainty
// over gRPC, with an embedded on-disk store and a Prometheus endpoint.
#include <algorithm>
#include <chrono>
#include <climits>
#include <cstdint>
#include <cstring>
#include <iostream>
#include <memory>
#include <pthread.h>
#include <signal.h>
#include <string>
#include <vector>

#include <absl/flags/flag.h>
#include <absl/flags/parse.h>
#include <absl/flags/usage.h>
#include <absl/status/status.h>
#include <absl/strings/str_cat.h>
#include <absl/time/time.h>
#include <grpcpp/ext/proto_server_reflection_plugin.h>
#include <grpcpp/grpcpp.h>
#include <grpcpp/health_check_service_interface.h>
#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>

#include "bnn/methods/options.h"
#include "bnn/methods/registry.h"
#include "bnn/status.h"
#include "bnn/version.h"

#include "server/address.h"
#include "server/bnn_service.h"
#include "server/job_runner.h"
#include "server/metrics/http_exporter.h"
#include "server/metrics/server_metrics.h"
#include "server/store/dataset_store.h"
#include "server/store/job_store.h"
#include "server/store/snapshot_store.h"

ABSL_FLAG(std::string, listen, "127.0.0.1:50051",
          "gRPC address host:port; port 0 picks a free port (printed).");
ABSL_FLAG(std::string, data_dir, "",
          "Directory of the embedded store (required; created if missing).");
ABSL_FLAG(std::string, metrics_listen, "127.0.0.1:9464",
          "Address of the Prometheus /metrics endpoint; empty disables it.");
ABSL_FLAG(int, max_concurrent_jobs, 1, "Training jobs run at once.");
ABSL_FLAG(int, max_predict_samples, 4096,
          "Largest num_samples a Predict request may ask for.");
ABSL_FLAG(int64_t, max_predict_rows, 100000, "Most rows per Predict request.");
ABSL_FLAG(int64_t, max_upload_rows, 10000000, "Most rows per dataset upload.");
ABSL_FLAG(int64_t, max_message_bytes, 64 << 20,
          "Largest gRPC message the server accepts.");
ABSL_FLAG(int, threads, 0,
          "Compute (OpenMP/Eigen) threads per training job and per Predict "
          "or Acquire call; 0 = one per core.");
ABSL_FLAG(int, compute_workers, 2,
          "Predict and Acquire calls computed at once; later ones queue.");
ABSL_FLAG(int64_t, predict_cache_bytes, int64_t{1} << 30,
          "Bytes of posterior weight samples kept for reuse across Predict "
          "and Acquire calls, in all; each of the (up to 8) cached snapshots "
          "gets an equal share. 0 disables the cache.");
ABSL_FLAG(std::string, predict_precision, "float64",
          "Arithmetic of Predict and Acquire forward passes: float64, or "
          "float32 (about twice the throughput, ~1e-6 relative error).");
ABSL_FLAG(int64_t, max_snapshot_bytes, int64_t{2} << 30,
          "Largest snapshot ImportSnapshot accepts (at most 2 GiB).");

namespace bnn::server {
namespace {

// In-flight RPCs get this long to finish after SIGINT/SIGTERM.
constexpr absl::Duration kShutdownGrace = absl::Seconds(5);

// absl flags are spelled with underscores; accept the documented dashes
// ("--data-dir") by rewriting flag names before parsing.
std::vector<std::string> NormalizeFlagNames(int argc, char** argv) {
  std::vector<std::string> args(argv, argv + argc);
  for (size_t i = 1; i < args.size(); ++i) {
    std::string& arg = args[i];
    if (arg == "--") break;
    if (arg.rfind("--", 0) != 0) continue;
    const size_t end = std::min(arg.find('='), arg.size());
    for (size_t j = 2; j < end; ++j) {
      if (arg[j] == '-') arg[j] = '_';
    }
  }
  return args;
}

absl::Status CheckAtLeast(absl::string_view flag, int64_t value,
                          int64_t minimum) {
  if (value < minimum) {
    return absl::InvalidArgumentError(
        absl::StrCat("--", flag, " = ", value, " must be >= ", minimum));
  }
  return absl::OkStatus();
}

absl::Status CheckInRange(absl::string_view flag, int64_t value,
                          int64_t minimum, int64_t maximum) {
  if (value < minimum || value > maximum) {
    return absl::InvalidArgumentError(absl::StrCat("--", flag, " = ", value,
                                                   " must be in [", minimum,
                                                   ", ", maximum, "]"));
  }
  return absl::OkStatus();
}

// Serves until SIGINT or SIGTERM, which must be blocked in every thread
// (the caller blocks them before any thread exists).
absl::Status Serve(const sigset_t& stop_signals) {
  const std::string data_dir = absl::GetFlag(FLAGS_data_dir);
  if (data_dir.empty()) {
    return absl::InvalidArgumentError("--data-dir is required");
  }
  ServerLimits limits;
  limits.max_upload_rows = absl::GetFlag(FLAGS_max_upload_rows);
  limits.max_predict_rows = absl::GetFlag(FLAGS_max_predict_rows);
  limits.max_predict_samples = absl::GetFlag(FLAGS_max_predict_samples);
  limits.max_snapshot_bytes = absl::GetFlag(FLAGS_max_snapshot_bytes);
  const int64_t max_message_bytes = absl::GetFlag(FLAGS_max_message_bytes);
  limits.max_message_bytes = max_message_bytes;
  const int threads = absl::GetFlag(FLAGS_threads);
  const int compute_workers = absl::GetFlag(FLAGS_compute_workers);
  const int64_t predict_cache_bytes = absl::GetFlag(FLAGS_predict_cache_bytes);
  const std::string predict_precision = absl::GetFlag(FLAGS_predict_precision);
  BNN_RETURN_IF_ERROR(
      CheckAtLeast("max-upload-rows", limits.max_upload_rows, 1));
  BNN_RETURN_IF_ERROR(
      CheckAtLeast("max-predict-rows", limits.max_predict_rows, 1));
  BNN_RETURN_IF_ERROR(
      CheckAtLeast("max-predict-samples", limits.max_predict_samples, 1));
  BNN_RETURN_IF_ERROR(CheckAtLeast(
      "max-concurrent-jobs", absl::GetFlag(FLAGS_max_concurrent_jobs), 1));
  BNN_RETURN_IF_ERROR(CheckAtLeast("threads", threads, 0));
  BNN_RETURN_IF_ERROR(CheckAtLeast("compute-workers", compute_workers, 1));
  BNN_RETURN_IF_ERROR(
      CheckAtLeast("predict-cache-bytes", predict_cache_bytes, 0));
  BNN_RETURN_IF_ERROR(CheckOneOf("--predict-precision", predict_precision,
                                 {"float64", "float32"}));
  BNN_RETURN_IF_ERROR(
      CheckInRange("max-message-bytes", max_message_bytes, 1, INT_MAX));
  // Snapshot payloads are parsed by protobuf, whose sizes are ints.
  BNN_RETURN_IF_ERROR(CheckInRange(
      "max-snapshot-bytes", limits.max_snapshot_bytes, 1, int64_t{2} << 30));

  BNN_ASSIGN_OR_RETURN(std::unique_ptr<DatasetStore> datasets,
                       DatasetStore::Open(data_dir + "/datasets"));
  SnapshotStore::Options snapshot_options;
  snapshot_options.predictor.max_samples = limits.max_predict_samples;
  // The flag bounds the memory of all sample caches together; every cached
  // predictor keeps its own, so each gets an equal share.
  snapshot_options.predictor.cache_bytes =
      predict_cache_bytes / snapshot_options.cache_capacity;
  snapshot_options.predictor.precision = predict_precision;
  BNN_ASSIGN_OR_RETURN(
      std::unique_ptr<SnapshotStore> snapshots,
      SnapshotStore::Open(data_dir + "/snapshots", snapshot_options));
  BNN_ASSIGN_OR_RETURN(std::unique_ptr<JobStore> jobs,
                       JobStore::Open(data_dir + "/jobs"));
  ServerMetrics metrics;
  const MethodRegistry& registry = MethodRegistry::Builtin();

  JobRunner::Options runner_options;
  runner_options.max_concurrent_jobs = absl::GetFlag(FLAGS_max_concurrent_jobs);
  runner_options.compute_threads = threads;
  BNN_ASSIGN_OR_RETURN(
      std::unique_ptr<JobRunner> runner,
      JobRunner::Create(runner_options, jobs.get(), datasets.get(),
                        snapshots.get(), &registry, &metrics));

  BnnServiceImpl::Options service_options;
  service_options.limits = limits;
  service_options.compute_threads = threads;
  service_options.compute_workers = compute_workers;
  BnnServiceImpl service(service_options, datasets.get(), snapshots.get(),
                         runner.get(), &registry, &metrics);

  const std::string listen = absl::GetFlag(FLAGS_listen);
  std::string host;
  int requested_port = 0;
  BNN_RETURN_IF_ERROR(SplitHostPort(listen, &host, &requested_port));
  grpc::EnableDefaultHealthCheckService(true);
  grpc::reflection::InitProtoReflectionServerBuilderPlugin();
  grpc::ServerBuilder builder;
  int port = 0;
  builder.AddListeningPort(listen, grpc::InsecureServerCredentials(), &port);
  builder.SetMaxReceiveMessageSize(static_cast<int>(max_message_bytes));
  builder.RegisterService(&service);
  std::unique_ptr<grpc::Server> server = builder.BuildAndStart();
  if (server == nullptr || port == 0) {
    return absl::UnavailableError(absl::StrCat("cannot listen on ", listen));
  }

  std::unique_ptr<HttpExporter> exporter;
  if (const std::string metrics_listen = absl::GetFlag(FLAGS_metrics_listen);
      !metrics_listen.empty()) {
    absl::StatusOr<std::unique_ptr<HttpExporter>> started =
        HttpExporter::Start(metrics_listen, &metrics.registry());
    if (!started.ok()) {
      server->Shutdown();
      return started.status();
    }
    exporter = *std::move(started);
    std::cout << "bnn-server metrics on http://" << exporter->address()
              << "/metrics" << std::endl;
  }
  // Tests and scripts parse this line for the bound port.
  std::cout << "bnn-server listening on " << JoinHostPort(host, port)
            << std::endl;
  spdlog::info("bnn-server {} serving; data in {}", kLibraryVersion, data_dir);

  int signal_number = 0;
  if (sigwait(&stop_signals, &signal_number) != 0) {
    return absl::InternalError("sigwait failed");
  }
  spdlog::info("{}: shutting down", strsignal(signal_number));
  // Stop RPCs first (no new jobs), then training, then the scrape endpoint.
  server->Shutdown(std::chrono::system_clock::now() +
                   absl::ToChronoSeconds(kShutdownGrace));
  runner->Shutdown();
  exporter.reset();
  spdlog::info("bnn-server stopped");
  return absl::OkStatus();
}

}  // namespace
}  // namespace bnn::server

int main(int argc, char** argv) {
  // Before any thread starts, so that every thread inherits the mask and the
  // signals reach only sigwait().
  sigset_t stop_signals;
  sigemptyset(&stop_signals);
  sigaddset(&stop_signals, SIGINT);
  sigaddset(&stop_signals, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &stop_signals, nullptr);
  // A client vanishing mid-response must not kill the server.
  signal(SIGPIPE, SIG_IGN);

  std::vector<std::string> args = bnn::server::NormalizeFlagNames(argc, argv);
  std::vector<char*> arg_pointers;
  for (std::string& arg : args) arg_pointers.push_back(arg.data());
  absl::SetProgramUsageMessage(
      "bnn-server --data-dir DIR [--listen HOST:PORT] [flags]; flag names "
      "take dashes or underscores");
  absl::ParseCommandLine(static_cast<int>(arg_pointers.size()),
                         arg_pointers.data());

  spdlog::set_default_logger(spdlog::stderr_color_mt("bnn-server"));
  const absl::Status status = bnn::server::Serve(stop_signals);
  if (!status.ok()) {
    spdlog::critical("{}", status.ToString());
    return 1;
  }
  return 0;
}
