// One bnn-server: opens the embedded store under a data directory and wires
// its parts (stores, predictor cache, job runner, the bnn.v1 service, the
// gRPC server and the Prometheus endpoint). main.cc only turns flags into
// Options and waits for a signal; tests start servers in-process the same
// way.
#ifndef BNN_SERVER_SERVER_H_
#define BNN_SERVER_SERVER_H_

#include <memory>
#include <string>
#include <thread>

#include <absl/status/status.h>
#include <absl/status/statusor.h>
#include <absl/synchronization/mutex.h>
#include <absl/synchronization/notification.h>
#include <absl/time/time.h>
#include <grpcpp/grpcpp.h>

#include "server/admission/memory_budget.h"
#include "server/api/bnn_v1/bnn_service.h"
#include "server/api/bnn_v1/request_validation.h"
#include "server/api/inference_v2/inference_api.h"
#include "server/api/inference_v2/inference_service.h"
#include "server/auth/authenticator.h"
#include "server/auth/tls.h"
#include "server/common/call_counter.h"
#include "server/common/http_server.h"
#include "server/jobs/job_process_options.h"
#include "server/jobs/job_runner.h"
#include "server/jobs/kubernetes/launcher_options.h"
#include "server/metrics/http_endpoint.h"
#include "server/metrics/server_metrics.h"
#include "server/store/data_dir_lock.h"
#include "server/store/dataset_store.h"
#include "server/store/job_store.h"
#include "server/store/metadata_dir.h"
#include "server/store/model_store.h"
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
    // --data-dir: directory of the embedded store (metadata.db, blobs/,
    // checkpoints/; see MetadataDir), created if missing; a directory of the
    // older record-file layout is migrated on first start. Required. With a
    // PostgreSQL --metadata it holds what stays this server's own: its lock
    // and its server id (job checkpoints go to <blob-dir>/checkpoints/,
    // where every replica that may take a job over reads them).
    std::string data_dir;
    // --metadata: the metadata store. Empty (the default): SQLite in
    // <data-dir>/metadata.db. A PostgreSQL connection URI
    // (postgres://USER[:PASSWORD]@HOST[:PORT]/DATABASE, libpq's form): the
    // store several servers (replicas) share, each with its own --data-dir
    // and all with the same --blob-dir; its schema is created or migrated
    // on start. libpq's PGPASSWORD and password file keep the password out
    // of the command line; it is never logged.
    std::string metadata;
    // --blob-dir: the directory of the blobs (dataset rows, snapshot
    // files); empty: <data-dir>/blobs. Required with a PostgreSQL
    // --metadata, shared by every server of that store (e.g. a
    // ReadWriteMany volume); otherwise locked by this server.
    std::string blob_dir;
    // --metrics-listen: address of the HTTP endpoint serving /metrics
    // (Prometheus), /healthz and /readyz: an IPv4 address or host name and
    // a port (0 picks a free port); empty disables the endpoint. Plain HTTP
    // (http_endpoint.h): with --tls-cert it must be a loopback address.
    std::string metrics_listen = "127.0.0.1:9464";
    // --http-listen: address of the Open Inference Protocol's REST form
    // (/v2/...; server/api/inference_v2/http_api.h): an IPv4 address or
    // host name and a port (0 picks a free port); empty (the default)
    // disables it. Plain HTTP, like the metrics endpoint: with --tls-cert it
    // must be a loopback address. Request bodies are bounded by
    // --max-message-bytes.
    std::string http_listen;
    // --max-concurrent-jobs: training jobs run at once; later ones wait in
    // FIFO order. >= 1.
    int max_concurrent_jobs = 1;
    // --max-queued-jobs: jobs waiting to run at most; StartTraining beyond
    // it is refused with RESOURCE_EXHAUSTED. >= 1.
    int max_queued_jobs = 64;
    // --role: "all" (the default) serves the API and trains jobs; "serve"
    // serves the API and trains none (StartTraining queues the job in the
    // store for the train or all replicas, or a bnn-train process);
    // "train" trains jobs and still serves the API.
    std::string role = "all";
    // --job-runner: "in-process" (the default) trains jobs on this
    // server's workers (--role, --max-concurrent-jobs); "kubernetes" runs
    // each job as a Kubernetes batch/v1 Job running `bnn-train --job-id=ID`
    // against the shared store (JobRunner::Options::kubernetes), so it
    // requires a PostgreSQL --metadata and a --blob-dir the pods mount too.
    std::string job_runner = "in-process";
    // --kubernetes-config: JSON file of the Kubernetes launcher's options
    // (kubernetes::LoadLauncherOptionsFile; docs/deploy.md); empty: the
    // defaults. Only with --job-runner=kubernetes.
    std::string kubernetes_config;
    // --kubernetes-option (repeatable): "key=value" overrides applied over
    // --kubernetes-config in order (kubernetes::ApplyLauncherOption). Only
    // with --job-runner=kubernetes.
    std::vector<std::string> kubernetes_options;
    // --job-poll-seconds: how often an idle training worker looks in the
    // metadata store for jobs submitted to other servers or whose server
    // stopped heartbeating (a StartTraining here wakes one at once). > 0.
    double job_poll_seconds = 1;
    // --threads (also the OpenMP threads of each Predict or Acquire call),
    // --checkpoint-seconds, --job-heartbeat-seconds and
    // --job-takeover-seconds, as bnn-train takes them.
    JobProcessOptions job_process;
    // --training-nice: nice value (0..19) of the threads that train jobs.
    // Under contention for the cores, Linux gives a thread at nice 10 about
    // a tenth of the share of one at 0, so Predict and the other RPCs keep
    // their latency while a job trains (docs/results/load.md); on idle
    // cores training runs at full speed. 0 = the server's own priority.
    int training_nice = 10;
    // --max-watchers-per-client: WatchJob streams one client (token, or
    // connection without tokens) may have open at once. >= 1.
    int max_watchers_per_client = 8;
    // --compute-workers: Predict and Acquire calls computed at once; later
    // ones queue, the clients taking turns, and a long call gives its turn
    // to another client's waiting call between chunks of rows
    // (BnnServiceImpl::kComputeSlice). >= 1.
    int compute_workers = 2;
    // --long-call-ms: a Predict, Acquire or Evaluate call that has computed
    // for this long (in all its turns) lowers its thread's CPU priority to
    // --long-call-nice at its next chunk (ThreadPool::Options::demote_after),
    // so that when the cores are saturated the short calls of other clients
    // and the gRPC threads get them first (docs/results/load.md). 0: never.
    // >= 0.
    int long_call_ms = 10;
    // --long-call-nice: that nice value, 1..19.
    int long_call_nice = 10;
    // --max-request-seconds: longest computation of one Predict or Acquire
    // call (not counting turns it gave to other calls), checked between
    // chunks of rows like the client's deadline; past it the call fails with
    // DEADLINE_EXCEEDED. The health watchdog reports
    // NOT_SERVING once every compute worker has been busy for this long plus
    // kWatchdogMargin. > 0.
    double max_request_seconds = 60;
    // --shutdown-grace: seconds from the start of Shutdown() (SIGINT or
    // SIGTERM) until the process must be gone: in-flight RPCs get this
    // long, less kShutdownCancelMargin, to finish before they are cancelled;
    // running training jobs are interrupted at once (each writes a
    // checkpoint and becomes INTERRUPTED). > 0.
    double shutdown_grace_seconds = 5;
    // --predict-cache-bytes: bytes of posterior weight samples kept for
    // reuse across Predict and Acquire calls, in all; each of the
    // kPredictorCacheCapacity cached snapshots gets an equal share. 0
    // disables the sample cache. >= 0.
    int64_t predict_cache_bytes = int64_t{1} << 30;
    // --predict-precision: arithmetic of Predict, Acquire and Evaluate
    // forward passes, "float32" (about twice the GEMM throughput; predictive
    // means, variances and probabilities within 1e-5 relative of float64 on
    // trained posteriors of every family, PredictorTest.Float32Matches...)
    // or "float64". Weights are drawn in float64 either way.
    std::string predict_precision = "float32";
    // --predict-chunk-rows: most rows of one batched forward pass of
    // Predict, Acquire and Evaluate (PredictorOptions::chunk_rows; fewer
    // when num_samples is large, about 16384 rows x samples per pass). A
    // call checks its deadline, the cap above, cancellation and the fair
    // queue between passes, so larger passes use the GEMM better but
    // answer those later. In [1, 16384].
    int predict_chunk_rows = 1024;
    // --preload-models: after Start(), load the `latest` version of the
    // named models (the most recently published first, at most
    // kPredictorCacheCapacity) into the predictor cache in the background,
    // so that the first Predict after a restart does not read and decode
    // its snapshot. Loading runs at --training-nice.
    bool preload_models = true;
    // --memory-budget-bytes: bytes that admitted work may hold at once, by
    // the core's estimates of its peaks (bnn/memory.h); work that does not
    // fit is refused with RESOURCE_EXHAUSTED. 0 =
    // kDefaultMemoryBudgetFraction of the machine's memory (MemTotal, or a
    // smaller cgroup limit). >= 0.
    int64_t memory_budget_bytes = 0;
    // --max-upload-rows, --max-upload-bytes, --max-predict-rows,
    // --max-predict-samples, --max-snapshot-bytes, --max-message-bytes:
    // request limits (each >= 1; max_message_bytes <= INT_MAX,
    // max_snapshot_bytes <= 2 GiB and max_upload_bytes <= 2 GiB - 1 MiB,
    // because gRPC and protobuf sizes are ints and a dataset version is one
    // protobuf record).
    ServerLimits limits;
    // --max-models, --max-model-versions, --max-model-aliases: the named
    // models the store holds, the versions of one model and the user
    // aliases of one model (`latest` not counted); a publish or alias
    // beyond them is refused with RESOURCE_EXHAUSTED (ModelStore::Options).
    // Each >= 1.
    int max_models = 1000;
    int max_model_versions = 1000;
    int max_model_aliases = 32;
    // --max-client-streams: UploadDataset, AppendRows and ImportSnapshot
    // streams open at once; further ones are refused with
    // RESOURCE_EXHAUSTED. >= 1.
    int max_client_streams = 16;
    // --stream-idle-seconds: a client stream that sends no message for this
    // long is ended with DEADLINE_EXCEEDED and frees its slot. > 0.
    double stream_idle_seconds = 60;
    // --tls-cert, --tls-key, --tls-client-ca: TLS on the gRPC port and the
    // metrics endpoint, optionally requiring client certificates (tls.h).
    TlsOptions tls;
    // --token-file: bearer tokens, as hashes with scopes (token_file.h);
    // every bnn.v1 call must present one whose scopes allow it. Empty: no
    // tokens are asked for. Reloaded by ReloadTokens() (SIGHUP).
    std::string token_file;
    // --allow-unauthenticated: listen on a non-loopback address although
    // neither --token-file nor --tls-client-ca asks clients for a
    // credential. Without it such a server refuses to start.
    bool allow_unauthenticated = false;
    // --log-format: "text" (human-readable lines) or "json" (one object per
    // line with ts, level, msg and the event's fields). Used by
    // SetUpProcessLogging.
    std::string log_format = "text";
    // --log-level: trace, debug, info, warn, error or critical: the least
    // severe level logged. Every RPC is logged at info (health checks and
    // reflection at debug).
    std::string log_level = "info";

    // InvalidArgument naming the flag, its value and the violated bound.
    absl::Status Validate() const;
    // The Kubernetes launcher's options of --kubernetes-config and
    // --kubernetes-option (validated, not yet resolved in-cluster);
    // InvalidArgument naming the flag.
    absl::StatusOr<kubernetes::LauncherOptions> KubernetesLauncherOptions()
        const;
    // The model store's part of the options.
    ModelStore::Options ModelStoreOptions() const;
  };

  // Predictors (decoded snapshots with their sample caches) kept in memory.
  static constexpr int kPredictorCacheCapacity = 8;
  // Of the shutdown grace, the last part is kept for cancelled calls to
  // return (between two chunks of their computation): at most this, and at
  // most half of the grace.
  static constexpr absl::Duration kShutdownCancelMargin = absl::Seconds(1);
  // The health watchdog checks the compute workers this often, and reports
  // NOT_SERVING once all of them have been busy for longer than
  // --max-request-seconds plus kWatchdogMargin (a computation that does not
  // reach its next interrupt check).
  static constexpr absl::Duration kWatchdogPeriod = absl::Milliseconds(250);
  static constexpr absl::Duration kWatchdogMargin = absl::Seconds(1);
  // The REST endpoint of --http-listen: connections served at once (each
  // holds a thread while its ModelInfer computes on the compute workers), how
  // long a connection may take to send a request (a 64 MiB body over a slow
  // link) and how long an idle keep-alive connection stays open.
  static constexpr int kHttpThreads = 16;
  static constexpr int kHttpRequestTimeoutMs = 10000;
  static constexpr int kHttpKeepAliveTimeoutMs = 2000;
  // bnn_store_bytes is refreshed this often (and when Start() runs).
  static constexpr absl::Duration kStoreBytesPeriod = absl::Seconds(10);

  // Makes the process's default logger write to stderr in
  // options.log_format from options.log_level on; InvalidArgument naming
  // the flag if either is not valid. bnn-server's main calls it before
  // Create(); servers started in-process log through whatever logger the
  // process has.
  static absl::Status SetUpProcessLogging(const Options& options);

  // Validates `options`, locks the data directory (FailedPrecondition
  // naming the holder's pid if another server uses it), sizes the memory
  // budget and opens the store (MetadataDir::Open: migrating a record-file
  // data directory, deleting temporaries, verifying every blob and logging
  // each quarantined one, sweeping unreferenced blobs; jobs a previous
  // process left interrupted or running are queued to resume from their
  // checkpoints, then the queued ones). Nothing listens until Start().
  static absl::StatusOr<std::unique_ptr<Server>> Create(Options options);
  // Shutdown().
  ~Server();

  // Binds the gRPC address and then the metrics endpoint, and starts
  // serving. Unavailable if an address cannot be bound (nothing is left
  // listening then). Call at most once.
  //
  // Health (grpc.health.v1.Health) reports the server ("") and
  // "bnn.v1.BnnService": nothing listens while Create() opens the stores
  // and recovers jobs, NOT_SERVING until Start() has finished, then
  // SERVING, except while the watchdog finds every compute worker stuck
  // (kWatchdogMargin) and from the start of Shutdown() on. GET /readyz on
  // the metrics endpoint agrees (200 while SERVING, 503 naming the reason
  // otherwise); GET /healthz answers 200 for as long as the endpoint runs
  // (until the end of Shutdown()).
  absl::Status Start();

  // Stops the server within --shutdown-grace of the call: health turns
  // NOT_SERVING, new RPCs and jobs are refused, running training jobs are
  // interrupted before their next step (each writes a checkpoint and becomes
  // INTERRUPTED, to resume in the next process; queued ones stay QUEUED),
  // WatchJob streams end (UNAVAILABLE, after the job's INTERRUPTED event),
  // in-flight RPCs get the grace less
  // kShutdownCancelMargin to finish and are then cancelled (computations
  // stop at their next chunk), idle client connections are closed as soon
  // as no RPC is in flight, and the metrics endpoint stops. OK if everything
  // stopped in time; DeadlineExceeded naming what still runs otherwise (a
  // computation or training step that did not reach an interrupt check):
  // the process should then exit without destroying the Server, whose
  // destructor would wait for it. Idempotent (returns the first result).
  absl::Status Shutdown();

  // Whether health reports SERVING.
  bool serving() const;
  // What /readyz answers: serving(), or why not.
  HttpEndpoint::Health Readiness() const;

  // Reads --token-file again (bnn-server does on SIGHUP) and returns the
  // number of tokens now accepted. On error the tokens in use stay in use
  // and the error is returned.
  absl::StatusOr<int> ReloadTokens();

  // After Start(): the bound gRPC port, and "host:port" with it.
  int port() const { return port_; }
  std::string address() const;
  // After Start(): the bound "host:port" of the metrics endpoint, or empty
  // if it is disabled.
  std::string metrics_address() const;
  // After Start(): the bound "host:port" of --http-listen, or empty if it
  // is disabled.
  std::string http_address() const;

  const Options& options() const { return options_; }
  // The parts, for tests and for callers that embed the server. Owned by
  // the server; valid until it is destroyed.
  ServerMetrics& metrics() { return metrics_; }
  MetadataStore& metadata() { return *metadata_; }
  BlobStore& blobs() { return *blobs_; }
  DatasetStore& datasets() { return *datasets_; }
  JobStore& jobs() { return *jobs_; }
  SnapshotStore& snapshots() { return *snapshots_; }
  ModelStore& models() { return *models_; }
  PredictorCache& predictors() { return *predictors_; }
  MemoryBudget& memory_budget() { return *memory_budget_; }
  JobRunner& runner() { return *runner_; }

 private:
  explicit Server(Options options) : options_(std::move(options)) {}

  // Sets the health of "" and "bnn.v1.BnnService", and why it is not
  // SERVING; nothing once draining.
  void SetServing(bool serving, std::string reason)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(health_mu_);
  // Body of the watchdog thread: every kWatchdogPeriod until stopped.
  void WatchCompute();
  // Body of the preload thread (Options::preload_models); returns early once
  // stop_watchdog_ is notified.
  void PreloadModels();
  // Sets bnn_store_bytes from the files under the data directory.
  void RefreshStoreBytes();

  const Options options_;
  std::string host_;  // of options_.listen, without brackets
  int port_ = 0;
  // Declared in dependency order: each part borrows those above it, so
  // destruction (in reverse) never leaves a dangling borrow.
  ServerMetrics metrics_;
  // Held from Create() until destruction, after every store is closed.
  std::unique_ptr<DataDirLock> data_dir_lock_;
  // The lock of a --blob-dir outside the data directory that this server
  // alone uses (SQLite metadata); null otherwise.
  std::unique_ptr<DataDirLock> blob_dir_lock_;
  std::unique_ptr<MemoryBudget> memory_budget_;
  std::unique_ptr<Authenticator> auth_;
  // Of the gRPC port: TLS (files read and checked by Create) or plaintext.
  std::shared_ptr<grpc::ServerCredentials> credentials_;
  // The data directory's store (MetadataDir): what the stores below keep.
  // SqliteMetadataStore or PostgresMetadataStore (--metadata).
  std::unique_ptr<MetadataStore> metadata_;
  std::unique_ptr<BlobStore> blobs_;
  std::unique_ptr<DatasetStore> datasets_;
  std::unique_ptr<SnapshotStore> snapshots_;
  std::unique_ptr<ModelStore> models_;
  std::unique_ptr<PredictorCache> predictors_;
  std::unique_ptr<JobStore> jobs_;
  std::unique_ptr<JobRunner> runner_;
  std::unique_ptr<BnnServiceImpl> service_;
  // The Open Inference Protocol: its operations, and its gRPC form.
  std::unique_ptr<oip::InferenceApi> inference_;
  std::unique_ptr<oip::InferenceServiceImpl> inference_service_;
  // Counts in-flight RPCs for Shutdown(); outlives grpc_server_.
  CallCounter calls_;
  std::unique_ptr<grpc::Server> grpc_server_;
  std::unique_ptr<HttpEndpoint> metrics_endpoint_;
  // The Open Inference Protocol's REST form (--http-listen).
  std::unique_ptr<HttpServer> http_server_;

  mutable absl::Mutex health_mu_;
  bool serving_ ABSL_GUARDED_BY(health_mu_) = false;
  bool draining_ ABSL_GUARDED_BY(health_mu_) = false;
  // Why serving_ is false.
  std::string not_ready_reason_ ABSL_GUARDED_BY(health_mu_) =
      "starting: the gRPC server is not started yet";
  absl::Notification stop_watchdog_;
  std::thread watchdog_;
  // Refreshes bnn_store_bytes every kStoreBytesPeriod; stopped with the
  // watchdog.
  std::thread store_sizer_;
  // PreloadModels(); stopped with the watchdog.
  std::thread preloader_;

  absl::Mutex shutdown_mu_;
  bool shut_down_ ABSL_GUARDED_BY(shutdown_mu_) = false;
  absl::Status shutdown_status_ ABSL_GUARDED_BY(shutdown_mu_);
  // Runs grpc::Server::Shutdown, which Shutdown() waits for at most until
  // the grace ends; joined by the destructor.
  std::thread grpc_shutdown_;
  absl::Notification grpc_stopped_;
};

}  // namespace bnn::server

#endif  // BNN_SERVER_SERVER_H_
