// One bnn-server: opens the embedded store under a data directory and wires
// its parts (stores, predictor cache, job runner, the bnn.v1 service, the
// gRPC server and the Prometheus endpoint). main.cc only turns flags into
// Options and waits for a signal; tests start servers in-process the same
// way.
#ifndef BNN_SERVER_SERVER_H_
#define BNN_SERVER_SERVER_H_

#include <memory>
#include <string>

#include <absl/status/status.h>
#include <absl/status/statusor.h>
#include <absl/synchronization/mutex.h>
#include <absl/time/time.h>
#include <grpcpp/grpcpp.h>

#include "server/admission/memory_budget.h"
#include "server/api/bnn_v1/bnn_service.h"
#include "server/api/bnn_v1/request_validation.h"
#include "server/jobs/job_runner.h"
#include "server/metrics/http_exporter.h"
#include "server/metrics/server_metrics.h"
#include "server/store/dataset_store.h"
#include "server/store/job_store.h"
#include "server/store/predictor_cache.h"
#include "server/store/snapshot_store.h"

namespace bnn::server {

class Server {
 public:
  // One field per bnn-server flag (the flag's name is the field's, with
  // dashes), with the flag's default.
  struct Options {
    // --listen: gRPC address "host:port" or "[v6 host]:port"; port 0 picks
    // a free port (see port()).
    std::string listen = "127.0.0.1:50051";
    // --data-dir: directory of the embedded store (datasets/, jobs/,
    // snapshots/), created if missing. Required.
    std::string data_dir;
    // --metrics-listen: address of the Prometheus /metrics endpoint; port 0
    // picks a free port; empty disables the endpoint.
    std::string metrics_listen = "127.0.0.1:9464";
    // --max-concurrent-jobs: training jobs run at once; later ones wait in
    // FIFO order. >= 1.
    int max_concurrent_jobs = 1;
    // --threads: most OpenMP (Eigen GEMM) threads per training job and per
    // Predict or Acquire call; 0 = one per core. >= 0. Small computations
    // run on one thread regardless (bnn/compute_threads.h).
    int threads = 0;
    // --compute-workers: Predict and Acquire calls computed at once; later
    // ones queue. >= 1.
    int compute_workers = 2;
    // --predict-cache-bytes: bytes of posterior weight samples kept for
    // reuse across Predict and Acquire calls, in all; each of the
    // kPredictorCacheCapacity cached snapshots gets an equal share. 0
    // disables the sample cache. >= 0.
    int64_t predict_cache_bytes = int64_t{1} << 30;
    // --predict-precision: arithmetic of Predict and Acquire forward passes,
    // "float64" or "float32" (about twice the throughput, ~1e-6 relative
    // error).
    std::string predict_precision = "float64";
    // --memory-budget-bytes: bytes that admitted work may hold at once, by
    // the core's estimates of its peaks (bnn/memory.h); work that does not
    // fit is refused with RESOURCE_EXHAUSTED. 0 =
    // kDefaultMemoryBudgetFraction of the machine's memory (MemTotal, or a
    // smaller cgroup limit). >= 0.
    int64_t memory_budget_bytes = 0;
    // --max-upload-rows, --max-predict-rows, --max-predict-samples,
    // --max-snapshot-bytes, --max-message-bytes: request limits (each >= 1;
    // max_message_bytes <= INT_MAX and max_snapshot_bytes <= 2 GiB, because
    // gRPC and protobuf sizes are ints).
    ServerLimits limits;

    // InvalidArgument naming the flag, its value and the violated bound.
    absl::Status Validate() const;
  };

  // Predictors (decoded snapshots with their sample caches) kept in memory.
  static constexpr int kPredictorCacheCapacity = 8;
  // In-flight RPCs get this long to finish in Shutdown().
  static constexpr absl::Duration kShutdownGrace = absl::Seconds(5);

  // Validates `options`, sizes the memory budget and opens the store (indexing
  // every dataset, job and snapshot; jobs left running by a previous process
  // are marked failed). Nothing listens until Start().
  static absl::StatusOr<std::unique_ptr<Server>> Create(Options options);
  // Shutdown().
  ~Server();

  // Binds the gRPC address and then the metrics endpoint, and starts
  // serving. Unavailable if an address cannot be bound (nothing is left
  // listening then). Call at most once.
  absl::Status Start();

  // Stops accepting RPCs and gives in-flight ones kShutdownGrace, then stops
  // the job runner (running and queued jobs are marked failed, as a restart
  // would) and the metrics endpoint. Idempotent.
  void Shutdown();

  // After Start(): the bound gRPC port, and "host:port" with it.
  int port() const { return port_; }
  std::string address() const;
  // After Start(): the bound "host:port" of the metrics endpoint, or empty
  // if it is disabled.
  std::string metrics_address() const;

  const Options& options() const { return options_; }
  // The parts, for tests and for callers that embed the server. Owned by
  // the server; valid until it is destroyed.
  ServerMetrics& metrics() { return metrics_; }
  DatasetStore& datasets() { return *datasets_; }
  JobStore& jobs() { return *jobs_; }
  SnapshotStore& snapshots() { return *snapshots_; }
  PredictorCache& predictors() { return *predictors_; }
  MemoryBudget& memory_budget() { return *memory_budget_; }
  JobRunner& runner() { return *runner_; }

 private:
  explicit Server(Options options) : options_(std::move(options)) {}

  const Options options_;
  std::string host_;  // of options_.listen, without brackets
  int port_ = 0;
  // Declared in dependency order: each part borrows those above it, so
  // destruction (in reverse) never leaves a dangling borrow.
  ServerMetrics metrics_;
  std::unique_ptr<MemoryBudget> memory_budget_;
  std::unique_ptr<DatasetStore> datasets_;
  std::unique_ptr<SnapshotStore> snapshots_;
  std::unique_ptr<PredictorCache> predictors_;
  std::unique_ptr<JobStore> jobs_;
  std::unique_ptr<JobRunner> runner_;
  std::unique_ptr<BnnServiceImpl> service_;
  std::unique_ptr<grpc::Server> grpc_server_;
  std::unique_ptr<HttpExporter> exporter_;
  absl::Mutex shutdown_mu_;
  bool shut_down_ ABSL_GUARDED_BY(shutdown_mu_) = false;
};

}  // namespace bnn::server

#endif  // BNN_SERVER_SERVER_H_
