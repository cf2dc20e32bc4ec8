#include "server/server.h"

#include <algorithm>
#include <chrono>
#include <climits>
#include <filesystem>
#include <functional>
#include <system_error>
#include <utility>
#include <vector>

#include <absl/strings/str_cat.h>
#include <absl/strings/str_join.h>
#include <absl/strings/string_view.h>
#include <grpc/grpc.h>
#include <grpcpp/ext/proto_server_reflection_plugin.h>
#include <grpcpp/health_check_service_interface.h>
#include <spdlog/spdlog.h>

#include "bnn/io/file.h"
#include "bnn/memory.h"
#include "bnn/methods/options.h"
#include "bnn/methods/registry.h"
#include "bnn/status.h"

#include "server/api/inference_v2/http_api.h"
#include "server/common/address.h"
#include "server/common/flag_checks.h"
#include "server/common/log.h"
#include "server/common/request_log.h"
#include "server/jobs/compute_threads.h"

namespace bnn::server {
namespace {

// Bytes of the regular files under `dir` (0 if it cannot be read; files
// that vanish during the walk are skipped).
int64_t DirectoryBytes(const std::string& dir) {
  namespace fs = std::filesystem;
  std::error_code error;
  int64_t bytes = 0;
  fs::recursive_directory_iterator it(
      dir, fs::directory_options::skip_permission_denied, error);
  for (; !error && it != fs::recursive_directory_iterator();
       it.increment(error)) {
    std::error_code size_error;
    if (!it->is_regular_file(size_error) || size_error) continue;
    const uintmax_t size = it->file_size(size_error);
    if (!size_error) bytes += static_cast<int64_t>(size);
  }
  return bytes;
}

// One line for what opening the store did (a migration, temporaries of
// interrupted writes removed, unreferenced blobs swept), and one per
// quarantined blob.
void LogStoreOpened(const std::string& data_dir, const MetadataDir& dir) {
  const MigrationReport& migration = dir.migration;
  if (migration.migrated) {
    Log(spdlog::level::info,
        "data directory migrated from record files to metadata.db and blobs/; "
        "the old directories are in record-files.migrated/",
        {{"datasets", absl::StrCat(migration.datasets)},
         {"dataset_versions", absl::StrCat(migration.dataset_versions)},
         {"snapshots", absl::StrCat(migration.snapshots)},
         {"jobs", absl::StrCat(migration.jobs)},
         {"models", absl::StrCat(migration.models)},
         {"checkpoints", absl::StrCat(migration.checkpoints)},
         {"skipped", absl::StrCat(migration.skipped.size())}});
  } else if (migration.moved_aside) {
    spdlog::info("record-file directories of {} moved to {}/", data_dir,
                 std::string(kMigratedRecordFilesDirName));
  }
  for (const std::string& skipped : migration.skipped) {
    spdlog::error("migration skipped an unreadable record: {}", skipped);
  }
  for (const std::string& dropped : migration.dropped_names) {
    spdlog::warn(
        "migration: datasets sharing a name keep their ids but lose the "
        "name: {}",
        dropped);
  }
  const BlobStore::OpenReport& blobs = dir.blob_report;
  Log(spdlog::level::info, "store opened",
      {{"blobs", absl::StrCat(blobs.blobs)},
       {"blob_bytes", absl::StrCat(blobs.bytes)},
       {"temporaries_removed", absl::StrCat(blobs.temporaries_removed)},
       {"unreferenced_blobs_removed", absl::StrCat(dir.blobs_swept)}});
  for (const QuarantinedBlob& q : dir.blobs->Quarantined()) {
    Log(spdlog::level::err,
        "blob quarantined: records that use it are not served (DATA_LOSS)",
        {{"blob", q.blob}, {"path", q.path}, {"reason", q.reason}});
  }
}

}  // namespace

absl::Status Server::SetUpProcessLogging(const Options& options) {
  BNN_ASSIGN_OR_RETURN(const LogFormat format,
                       ParseLogFormat(options.log_format));
  BNN_ASSIGN_OR_RETURN(const spdlog::level::level_enum level,
                       ParseLogLevel(options.log_level));
  ConfigureLogging(format, level);
  return absl::OkStatus();
}

absl::Status Server::Options::Validate() const {
  if (data_dir.empty()) {
    return absl::InvalidArgumentError("--data-dir is required");
  }
  if (!metadata.empty()) {
    if (!PostgresMetadataStore::IsUri(metadata)) {
      return absl::InvalidArgumentError(absl::StrCat(
          "--metadata must be empty (SQLite in --data-dir) or a PostgreSQL "
          "URI postgres://USER@HOST:PORT/DATABASE, got '",
          PostgresMetadataStore::RedactUri(metadata), "'"));
    }
    if (blob_dir.empty()) {
      return absl::InvalidArgumentError(
          "--blob-dir is required with a PostgreSQL --metadata: every server "
          "sharing the metadata must use the same blob directory");
    }
  }
  std::string host;
  int port = 0;
  BNN_RETURN_IF_ERROR(SplitHostPort(listen, &host, &port));
  if (!metrics_listen.empty()) {
    if (const absl::Status status = HttpEndpoint::CheckListen(metrics_listen);
        !status.ok()) {
      return absl::InvalidArgumentError(
          absl::StrCat("--metrics-listen ", status.message()));
    }
  }
  BNN_RETURN_IF_ERROR(ParseLogFormat(log_format).status());
  BNN_RETURN_IF_ERROR(ParseLogLevel(log_level).status());
  BNN_RETURN_IF_ERROR(
      CheckAtLeast("max-upload-rows", limits.max_upload_rows, 1));
  // A dataset version is one protobuf record, below 2 GiB; its file takes
  // fewer bytes than the messages that carried its rows.
  BNN_RETURN_IF_ERROR(CheckInRange("max-upload-bytes", limits.max_upload_bytes,
                                   1, (int64_t{2} << 30) - (int64_t{1} << 20)));
  BNN_RETURN_IF_ERROR(
      CheckAtLeast("max-client-streams", max_client_streams, 1));
  BNN_RETURN_IF_ERROR(ModelStoreOptions().Validate());
  if (!(stream_idle_seconds > 0)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--stream-idle-seconds = ", stream_idle_seconds, " must be > 0"));
  }
  BNN_RETURN_IF_ERROR(
      CheckAtLeast("max-predict-rows", limits.max_predict_rows, 1));
  BNN_RETURN_IF_ERROR(
      CheckAtLeast("max-predict-samples", limits.max_predict_samples, 1));
  BNN_RETURN_IF_ERROR(
      CheckAtLeast("max-concurrent-jobs", max_concurrent_jobs, 1));
  BNN_RETURN_IF_ERROR(CheckAtLeast("max-queued-jobs", max_queued_jobs, 1));
  BNN_RETURN_IF_ERROR(
      CheckAtLeast("max-watchers-per-client", max_watchers_per_client, 1));
  BNN_RETURN_IF_ERROR(job_process.Validate());
  BNN_RETURN_IF_ERROR(
      CheckOneOf("--job-runner", job_runner, {"in-process", "kubernetes"}));
  if (job_runner == "kubernetes") {
    if (metadata.empty()) {
      return absl::InvalidArgumentError(
          "--job-runner=kubernetes requires a shared store: a PostgreSQL "
          "--metadata=postgres://... and a --blob-dir the training pods mount "
          "too (bnn-train in a pod cannot reach the SQLite file in this "
          "server's --data-dir)");
    }
    BNN_RETURN_IF_ERROR(KubernetesLauncherOptions().status());
  } else if (!kubernetes_config.empty() || !kubernetes_options.empty()) {
    return absl::InvalidArgumentError(absl::StrCat(
        !kubernetes_config.empty() ? "--kubernetes-config"
                                   : "--kubernetes-option",
        " applies only with --job-runner=kubernetes, not --job-runner=",
        job_runner));
  }
  if (role != "all" && role != "serve" && role != "train") {
    return absl::InvalidArgumentError(
        absl::StrCat("--role = '", role, "' must be one of all, serve, train"));
  }
  BNN_RETURN_IF_ERROR(CheckPositive("job-poll-seconds", job_poll_seconds));
  if (training_nice < 0 || training_nice > 19) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--training-nice = ", training_nice, " must be in [0, 19]"));
  }
  BNN_RETURN_IF_ERROR(CheckAtLeast("compute-workers", compute_workers, 1));
  BNN_RETURN_IF_ERROR(CheckAtLeast("long-call-ms", long_call_ms, 0));
  if (long_call_nice < 1 || long_call_nice > 19) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--long-call-nice = ", long_call_nice, " must be in [1, 19]"));
  }
  BNN_RETURN_IF_ERROR(
      CheckAtLeast("predict-cache-bytes", predict_cache_bytes, 0));
  BNN_RETURN_IF_ERROR(
      CheckAtLeast("memory-budget-bytes", memory_budget_bytes, 0));
  BNN_RETURN_IF_ERROR(
      CheckPositive("max-request-seconds", max_request_seconds));
  BNN_RETURN_IF_ERROR(CheckPositive("shutdown-grace", shutdown_grace_seconds));
  BNN_RETURN_IF_ERROR(CheckOneOf("--predict-precision", predict_precision,
                                 {"float64", "float32"}));
  BNN_RETURN_IF_ERROR(
      CheckInRange("predict-chunk-rows", predict_chunk_rows, 1, 16384));
  BNN_RETURN_IF_ERROR(
      CheckInRange("max-message-bytes", limits.max_message_bytes, 1, INT_MAX));
  // Snapshot payloads are parsed by protobuf, whose sizes are ints.
  BNN_RETURN_IF_ERROR(CheckInRange(
      "max-snapshot-bytes", limits.max_snapshot_bytes, 1, int64_t{2} << 30));
  BNN_RETURN_IF_ERROR(tls.Validate());
  if (!http_listen.empty()) {
    if (const absl::Status status = HttpServer::CheckListen(http_listen);
        !status.ok()) {
      return absl::InvalidArgumentError(
          absl::StrCat("--http-listen ", status.message()));
    }
  }
  if (tls.enabled() && !http_listen.empty()) {
    std::string http_host;
    int http_port = 0;
    BNN_RETURN_IF_ERROR(SplitHostPort(http_listen, &http_host, &http_port));
    if (!IsLoopbackHost(http_host)) {
      return absl::InvalidArgumentError(absl::StrCat(
          "--http-listen ", http_listen,
          " is not a loopback address, and --tls-cert is given: the REST "
          "endpoint serves plain HTTP only (Debian 12's civetweb cannot serve "
          "TLS with OpenSSL 3), so tokens and predictions would cross the "
          "network unencrypted. Put it on a loopback address behind a TLS "
          "proxy, or use the gRPC form of the protocol"));
    }
  }
  if (tls.enabled() && !metrics_listen.empty()) {
    std::string metrics_host;
    int metrics_port = 0;
    BNN_RETURN_IF_ERROR(
        SplitHostPort(metrics_listen, &metrics_host, &metrics_port));
    if (!IsLoopbackHost(metrics_host)) {
      return absl::InvalidArgumentError(absl::StrCat(
          "--metrics-listen ", metrics_listen,
          " is not a loopback address, and --tls-cert is given: the metrics "
          "endpoint serves plain HTTP only (Debian 12's civetweb cannot serve "
          "TLS with OpenSSL 3), so /metrics, /healthz and /readyz would "
          "cross the network unencrypted. Put it on a loopback address (and "
          "scrape through a TLS proxy), or disable it with "
          "--metrics-listen=''"));
    }
  }
  // Safe by default: a server reachable from other machines asks every
  // client for a credential unless told explicitly not to.
  if (!IsLoopbackHost(host) && token_file.empty() &&
      tls.client_ca_file.empty() && !allow_unauthenticated) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--listen ", listen,
        " is not a loopback address, and neither --token-file nor "
        "--tls-client-ca is given: anyone who can reach the port could read, "
        "change and delete every dataset and snapshot. Give --token-file "
        "FILE (see bnnctl token create), or pass --allow-unauthenticated to "
        "accept that"));
  }
  return absl::OkStatus();
}

ModelStore::Options Server::Options::ModelStoreOptions() const {
  ModelStore::Options models;
  models.max_models = max_models;
  models.max_versions = max_model_versions;
  models.max_aliases = max_model_aliases;
  return models;
}

absl::StatusOr<kubernetes::LauncherOptions>
Server::Options::KubernetesLauncherOptions() const {
  kubernetes::LauncherOptions launcher;
  if (!kubernetes_config.empty()) {
    absl::StatusOr<kubernetes::LauncherOptions> loaded =
        kubernetes::LoadLauncherOptionsFile(kubernetes_config);
    if (!loaded.ok()) {
      return absl::InvalidArgumentError(
          absl::StrCat("--kubernetes-config: ", loaded.status().message()));
    }
    launcher = *std::move(loaded);
  }
  for (const std::string& option : kubernetes_options) {
    if (const absl::Status status =
            kubernetes::ApplyLauncherOption(option, &launcher);
        !status.ok()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "--kubernetes-option '", option, "': ", status.message()));
    }
  }
  if (const absl::Status status = launcher.Validate(); !status.ok()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--kubernetes-config/--kubernetes-option: ", status.message()));
  }
  return launcher;
}

absl::StatusOr<std::unique_ptr<Server>> Server::Create(Options options) {
  BNN_RETURN_IF_ERROR(options.Validate());
  std::unique_ptr<Server> server(new Server(std::move(options)));
  const Options& o = server->options_;
  BNN_ASSIGN_OR_RETURN(server->auth_, Authenticator::Create(o.token_file));
  if (server->auth_->enabled()) {
    spdlog::info("{} tokens from {}", server->auth_->num_tokens(),
                 o.token_file);
  }
  if (o.tls.enabled()) {
    BNN_ASSIGN_OR_RETURN(server->credentials_, TlsServerCredentials(o.tls));
  } else {
    server->credentials_ = grpc::InsecureServerCredentials();
  }
  BNN_ASSIGN_OR_RETURN(server->data_dir_lock_,
                       DataDirLock::Acquire(o.data_dir));
  // With PostgreSQL, the blob directory is every replica's; the data
  // directory (its lock, the server id, job checkpoints) stays this one's.
  const bool shared_store = !o.metadata.empty();
  std::string runner;
  if (shared_store) {
    BNN_ASSIGN_OR_RETURN(runner, LoadOrCreateServerId(o.data_dir));
    Log(spdlog::level::info, "shared metadata store",
        {{"metadata", PostgresMetadataStore::RedactUri(o.metadata)},
         {"blob_dir", o.blob_dir},
         {"server_id", runner}});
  } else if (!o.blob_dir.empty()) {
    BNN_ASSIGN_OR_RETURN(server->blob_dir_lock_,
                         DataDirLock::Acquire(o.blob_dir, "--blob-dir"));
  }
  int64_t budget_bytes = o.memory_budget_bytes;
  if (budget_bytes == 0) {
    absl::StatusOr<MachineMemory> machine = ReadMachineMemory();
    if (!machine.ok()) {
      return absl::FailedPreconditionError(
          absl::StrCat(machine.status().message(),
                       "; set --memory-budget-bytes explicitly"));
    }
    budget_bytes = DefaultMemoryBudgetBytes(*machine);
    spdlog::info("memory budget {} ({}% of {}{})", FormatBytes(budget_bytes),
                 static_cast<int>(kDefaultMemoryBudgetFraction * 100),
                 FormatBytes(machine->usable_bytes()),
                 machine->cgroup_limit_bytes > 0 &&
                         machine->cgroup_limit_bytes < machine->physical_bytes
                     ? ", the cgroup's memory limit"
                     : " of physical memory");
  } else {
    spdlog::info("memory budget {} (--memory-budget-bytes)",
                 FormatBytes(budget_bytes));
  }
  server->memory_budget_ = std::make_unique<MemoryBudget>(budget_bytes);
  MetadataDir::Options store_options;
  store_options.postgres_uri = o.metadata;
  store_options.blob_dir = o.blob_dir;
  BNN_ASSIGN_OR_RETURN(MetadataDir dir,
                       MetadataDir::Open(o.data_dir, store_options));
  LogStoreOpened(o.data_dir, dir);
  server->metadata_ = std::move(dir.metadata);
  server->blobs_ = std::move(dir.blobs);
  server->metrics_.quarantined_blobs().Set(
      static_cast<double>(server->blobs_->Quarantined().size()));
  server->datasets_ = std::make_unique<DatasetStore>(server->metadata_.get(),
                                                     server->blobs_.get());
  server->snapshots_ = std::make_unique<SnapshotStore>(server->metadata_.get(),
                                                       server->blobs_.get());
  BNN_ASSIGN_OR_RETURN(
      server->models_,
      ModelStore::Open(o.ModelStoreOptions(), server->snapshots_.get()));
  PredictorCache::Options cache_options;
  cache_options.capacity = kPredictorCacheCapacity;
  cache_options.predictor.max_samples = o.limits.max_predict_samples;
  // The flag bounds the memory of all sample caches together; every cached
  // predictor keeps its own, so each gets an equal share.
  cache_options.predictor.cache_bytes =
      o.predict_cache_bytes / kPredictorCacheCapacity;
  // Idle draw buffers, reused instead of allocated per request: the same
  // share again.
  cache_options.predictor.reuse_bytes = cache_options.predictor.cache_bytes;
  cache_options.predictor.precision = o.predict_precision;
  cache_options.predictor.chunk_rows = o.predict_chunk_rows;
  BNN_ASSIGN_OR_RETURN(
      server->predictors_,
      PredictorCache::Create(cache_options, server->snapshots_.get()));
  BNN_ASSIGN_OR_RETURN(
      server->jobs_,
      JobStore::Open(server->metadata_.get(), dir.checkpoint_dir, runner));
  const MethodRegistry* registry = &MethodRegistry::Builtin();

  JobRunner::Options runner_options;
  runner_options.max_concurrent_jobs = o.max_concurrent_jobs;
  runner_options.compute_threads = o.job_process.threads;
  runner_options.max_queued_jobs = o.max_queued_jobs;
  runner_options.checkpoint_interval =
      absl::Seconds(o.job_process.checkpoint_seconds);
  runner_options.training_nice = o.training_nice;
  runner_options.run_jobs = o.role != "serve";
  runner_options.claimant = ReplicaId(runner);
  runner_options.poll_interval = absl::Seconds(o.job_poll_seconds);
  runner_options.heartbeat_interval =
      absl::Seconds(o.job_process.job_heartbeat_seconds);
  runner_options.takeover_after =
      absl::Seconds(o.job_process.job_takeover_seconds);
  // StartTraining(model_name, publish = true): the snapshot becomes the
  // model's next version (and `latest`) in the transaction that makes the
  // job SUCCEEDED; a failure to publish fails the job, naming why.
  runner_options.on_succeeded = PublishOnSuccess(server->models_.get());
  if (o.job_runner == "kubernetes") {
    BNN_ASSIGN_OR_RETURN(runner_options.kubernetes,
                         o.KubernetesLauncherOptions());
  }
  BNN_ASSIGN_OR_RETURN(
      server->runner_,
      JobRunner::Create(runner_options, server->jobs_.get(),
                        server->datasets_.get(), server->snapshots_.get(),
                        server->predictors_.get(), registry, &server->metrics_,
                        server->memory_budget_.get()));

  BnnServiceImpl::Options service_options;
  service_options.limits = o.limits;
  service_options.compute_threads = o.job_process.threads;
  service_options.compute_workers = o.compute_workers;
  service_options.long_call = absl::Milliseconds(o.long_call_ms);
  service_options.long_call_nice = o.long_call_nice;
  service_options.max_request_time = absl::Seconds(o.max_request_seconds);
  service_options.data_dir = o.data_dir;
  service_options.blob_dir = o.blob_dir;
  service_options.max_client_streams = o.max_client_streams;
  service_options.stream_idle_timeout = absl::Seconds(o.stream_idle_seconds);
  service_options.max_watchers_per_client = o.max_watchers_per_client;
  server->service_ = std::make_unique<BnnServiceImpl>(
      service_options, server->datasets_.get(), server->snapshots_.get(),
      server->predictors_.get(), server->runner_.get(), registry,
      &server->metrics_, server->memory_budget_.get(), server->auth_.get(),
      server->models_.get());

  oip::InferenceApi::Options inference_options;
  inference_options.limits = o.limits;
  inference_options.data_dir = o.data_dir;
  inference_options.blob_dir = o.blob_dir;
  Server* const self = server.get();
  server->inference_ = std::make_unique<oip::InferenceApi>(
      inference_options, server->auth_.get(), server->models_.get(),
      server->snapshots_.get(), server->service_.get(), &server->metrics_,
      [self] { return self->serving(); });
  server->inference_service_ =
      std::make_unique<oip::InferenceServiceImpl>(server->inference_.get());

  // Read at each scrape; cleared by the destructor before the parts go.
  BnnServiceImpl* service = server->service_.get();
  server->metrics_.SetComputeQueueSource(
      [service] { return service->ComputeQueued(); });
  PredictorCache* predictors = server->predictors_.get();
  server->metrics_.SetPredictorCacheSource([predictors] {
    const PredictorCache::Stats stats = predictors->GetStats();
    ServerMetrics::PredictorCacheStats out;
    out.predictors = stats.predictors;
    out.sample_bytes = stats.sample_bytes;
    out.hits = stats.hits;
    out.misses = stats.misses;
    return out;
  });
  return server;
}

Server::~Server() {
  Shutdown().IgnoreError();
  if (grpc_shutdown_.joinable()) grpc_shutdown_.join();
  metrics_.ClearSources();
}

bool Server::serving() const {
  absl::MutexLock lock(&health_mu_);
  return serving_;
}

HttpEndpoint::Health Server::Readiness() const {
  absl::MutexLock lock(&health_mu_);
  if (serving_) return {};
  return {false, absl::StrCat("not ready: ", not_ready_reason_)};
}

void Server::SetServing(bool serving, std::string reason) {
  if (draining_ || grpc_server_ == nullptr) return;
  grpc::HealthCheckServiceInterface* health =
      grpc_server_->GetHealthCheckService();
  health->SetServingStatus("", serving);
  health->SetServingStatus(v1::BnnService::service_full_name(), serving);
  health->SetServingStatus(inference::GRPCInferenceService::service_full_name(),
                           serving);
  serving_ = serving;
  not_ready_reason_ = std::move(reason);
}

void Server::RefreshStoreBytes() {
  // A PostgreSQL store's size is the database server's to report.
  if (options_.metadata.empty()) {
    int64_t metadata_bytes = 0;
    for (const char* suffix : {"", "-wal", "-shm"}) {
      std::error_code error;
      const uintmax_t size = std::filesystem::file_size(
          absl::StrCat(options_.data_dir, "/", kMetadataDbName, suffix), error);
      if (!error) metadata_bytes += static_cast<int64_t>(size);
    }
    metrics_.store_bytes("metadata").Set(static_cast<double>(metadata_bytes));
  }
  metrics_.store_bytes(kBlobDirName)
      .Set(static_cast<double>(DirectoryBytes(
          options_.blob_dir.empty()
              ? absl::StrCat(options_.data_dir, "/", kBlobDirName)
              : options_.blob_dir)));
  metrics_.store_bytes(kCheckpointDirName)
      .Set(static_cast<double>(DirectoryBytes(
          absl::StrCat(options_.data_dir, "/", kCheckpointDirName))));
  // Reads of a blob that fails its check quarantine it while serving.
  metrics_.quarantined_blobs().Set(
      static_cast<double>(blobs_->Quarantined().size()));
}

absl::Status Server::Start() {
  BNN_RETURN_IF_ERROR(SplitHostPort(options_.listen, &host_, &port_));
  grpc::EnableDefaultHealthCheckService(true);
  grpc::reflection::InitProtoReflectionServerBuilderPlugin();
  grpc::ServerBuilder builder;
  port_ = 0;
  builder.AddListeningPort(options_.listen, credentials_, &port_);
  // Without SO_REUSEPORT a second server on the same port fails to start
  // instead of silently taking half of the connections.
  builder.AddChannelArgument(GRPC_ARG_ALLOW_REUSEPORT, 0);
  builder.SetMaxReceiveMessageSize(
      static_cast<int>(options_.limits.max_message_bytes));
  builder.RegisterService(service_.get());
  builder.RegisterService(inference_service_.get());
  std::vector<
      std::unique_ptr<grpc::experimental::ServerInterceptorFactoryInterface>>
      interceptors;
  interceptors.push_back(calls_.NewInterceptorFactory());
  interceptors.push_back(NewRequestLogInterceptorFactory());
  builder.experimental().SetInterceptorCreators(std::move(interceptors));
  {
    // gRPC reports "" SERVING from BuildAndStart on: NOT_SERVING at once,
    // until the rest has started.
    absl::MutexLock lock(&health_mu_);
    grpc_server_ = builder.BuildAndStart();
    if (grpc_server_ == nullptr || port_ == 0) {
      grpc_server_.reset();
      return absl::UnavailableError(
          absl::StrCat("cannot listen on ", options_.listen));
    }
    SetServing(false, "starting: the metrics endpoint is not started yet");
  }
  if (!options_.metrics_listen.empty()) {
    HttpEndpoint::Options endpoint;
    endpoint.listen = options_.metrics_listen;
    endpoint.ready = [this] { return Readiness(); };
    absl::StatusOr<std::unique_ptr<HttpEndpoint>> started =
        HttpEndpoint::Start(std::move(endpoint), &metrics_.registry());
    if (!started.ok()) {
      grpc_server_->Shutdown();
      grpc_server_.reset();
      return started.status();
    }
    metrics_endpoint_ = *std::move(started);
  }
  if (!options_.http_listen.empty()) {
    HttpServer::Options http;
    http.name = "HTTP (--http-listen)";
    http.listen = options_.http_listen;
    http.threads = kHttpThreads;
    http.request_timeout_ms = kHttpRequestTimeoutMs;
    http.keep_alive_timeout_ms = kHttpKeepAliveTimeoutMs;
    http.max_body_bytes = options_.limits.max_message_bytes;
    http.max_body_flag = "--max-message-bytes";
    http.routes = {oip::InferenceRoute(inference_.get())};
    http.refusal = oip::JsonRefusal;
    absl::StatusOr<std::unique_ptr<HttpServer>> started =
        HttpServer::Start(std::move(http));
    if (!started.ok()) {
      metrics_endpoint_.reset();
      grpc_server_->Shutdown();
      grpc_server_.reset();
      return started.status();
    }
    http_server_ = *std::move(started);
  }
  RefreshStoreBytes();
  {
    absl::MutexLock lock(&health_mu_);
    SetServing(true, "");
  }
  watchdog_ = std::thread([this] { WatchCompute(); });
  if (options_.preload_models) {
    preloader_ = std::thread([this] { PreloadModels(); });
  }
  store_sizer_ = std::thread([this] {
    while (!stop_watchdog_.WaitForNotificationWithTimeout(kStoreBytesPeriod)) {
      RefreshStoreBytes();
    }
  });
  return absl::OkStatus();
}

void Server::WatchCompute() {
  const absl::Duration threshold =
      absl::Seconds(options_.max_request_seconds) + kWatchdogMargin;
  bool stuck = false;
  while (!stop_watchdog_.WaitForNotificationWithTimeout(kWatchdogPeriod)) {
    const absl::Duration busy = service_->ComputeBusyFor();
    if ((busy > threshold) == stuck) continue;
    stuck = !stuck;
    if (stuck) {
      spdlog::error(
          "every compute worker has been busy for {}, more than "
          "--max-request-seconds + {}: health NOT_SERVING",
          absl::FormatDuration(absl::Trunc(busy, absl::Seconds(1))),
          absl::FormatDuration(kWatchdogMargin));
    } else {
      spdlog::info("a compute worker is free again: health SERVING");
    }
    absl::MutexLock lock(&health_mu_);
    SetServing(!stuck,
               stuck ? absl::StrCat("every compute worker has been busy for "
                                    "more than --max-request-seconds + ",
                                    absl::FormatDuration(kWatchdogMargin))
                     : "");
  }
}

void Server::PreloadModels() {
  UseComputeThreads(options_.job_process.threads);
  LowerThreadPriority(options_.training_nice);
  // The snapshot of each model's latest version, newest first.
  std::vector<std::pair<int64_t, std::string>> latest;
  std::string after;
  bool more = true;
  while (more && !stop_watchdog_.HasBeenNotified()) {
    absl::StatusOr<std::vector<Model>> page = models_->List(after, 100, &more);
    if (!page.ok()) {
      spdlog::warn("preload: cannot list models: {}", page.status().ToString());
      return;
    }
    if (page->empty()) break;
    for (const Model& model : *page) {
      const int64_t version = LatestVersion(model);
      for (const store::ModelVersion& v : model.versions) {
        if (v.version() == version) {
          latest.emplace_back(v.created_unix_ms(), v.snapshot_id());
        }
      }
    }
    after = page->back().info.name();
  }
  std::sort(latest.begin(), latest.end(), std::greater<>());
  if (latest.size() > static_cast<size_t>(kPredictorCacheCapacity)) {
    latest.resize(kPredictorCacheCapacity);
  }
  const absl::Time start = absl::Now();
  int loaded = 0;
  for (const auto& [created, snapshot_id] : latest) {
    if (stop_watchdog_.HasBeenNotified()) break;
    const absl::Status status = predictors_->Get(snapshot_id).status();
    if (status.ok()) {
      ++loaded;
    } else {
      spdlog::warn("preload: snapshot {}: {}", snapshot_id, status.ToString());
    }
  }
  if (!latest.empty()) {
    Log(spdlog::level::info, "models preloaded",
        {{"snapshots", absl::StrCat(loaded)},
         {"seconds",
          absl::StrCat(absl::ToDoubleSeconds(absl::Now() - start))}});
  }
}

absl::Status Server::Shutdown() {
  absl::MutexLock lock(&shutdown_mu_);
  if (shut_down_) return shutdown_status_;
  shut_down_ = true;
  const absl::Duration grace = absl::Seconds(options_.shutdown_grace_seconds);
  const absl::Time start = absl::Now();
  const absl::Time exit_deadline = start + grace;
  const absl::Time cancel_deadline =
      exit_deadline - std::min(kShutdownCancelMargin, grace / 2);
  {
    absl::MutexLock health_lock(&health_mu_);
    if (grpc_server_ != nullptr) {
      // NOT_SERVING for every service, and frozen there.
      grpc_server_->GetHealthCheckService()->Shutdown();
    }
    serving_ = false;
    draining_ = true;
    not_ready_reason_ = "draining: the server is shutting down";
  }
  // The REST calls, which gRPC's shutdown does not reach: refused from now
  // on, cancelled at the same time as the gRPC ones.
  if (inference_ != nullptr) inference_->BeginShutdown(cancel_deadline);
  stop_watchdog_.Notify();
  if (watchdog_.joinable()) watchdog_.join();
  if (store_sizer_.joinable()) store_sizer_.join();
  if (preloader_.joinable()) preloader_.join();
  // Training first: a job's next step would be lost work anyway.
  if (runner_ != nullptr) runner_->BeginShutdown();
  std::vector<std::string> unfinished;
  if (grpc_server_ != nullptr) {
    // Refuses new calls at once, waits for in-flight ones until
    // cancel_deadline, then cancels them and waits for their handlers.
    grpc_shutdown_ = std::thread([this, cancel_deadline] {
      grpc_server_->Shutdown(absl::ToChronoTime(cancel_deadline));
      grpc_stopped_.Notify();
    });
    // gRPC also waits for every connection to close after its GOAWAY, which
    // an idle client may not answer for seconds: once no call is in flight
    // there is nothing to wait for, so close them.
    if (calls_.AwaitIdle(cancel_deadline)) {
      grpc_server_cancel_all_calls(grpc_server_->c_server());
    }
    if (!grpc_stopped_.WaitForNotificationWithDeadline(exit_deadline)) {
      unfinished.push_back(absl::StrCat(calls_.in_flight(), " RPC(s)"));
    }
  }
  if (runner_ != nullptr && !runner_->AwaitStopped(exit_deadline)) {
    unfinished.push_back("training job(s) in a step");
  }
  http_server_.reset();
  metrics_endpoint_.reset();
  if (unfinished.empty()) {
    shutdown_status_ = absl::OkStatus();
    spdlog::info("stopped in {}",
                 absl::FormatDuration(
                     absl::Trunc(absl::Now() - start, absl::Milliseconds(1))));
  } else {
    shutdown_status_ = absl::DeadlineExceededError(
        absl::StrCat("--shutdown-grace = ", options_.shutdown_grace_seconds,
                     " s passed with ", absl::StrJoin(unfinished, " and "),
                     " still running"));
  }
  return shutdown_status_;
}

absl::StatusOr<int> Server::ReloadTokens() {
  BNN_RETURN_IF_ERROR(auth_->Reload());
  return auth_->num_tokens();
}

std::string Server::address() const { return JoinHostPort(host_, port_); }

std::string Server::http_address() const {
  return http_server_ == nullptr ? std::string() : http_server_->address();
}

std::string Server::metrics_address() const {
  return metrics_endpoint_ == nullptr ? std::string()
                                      : metrics_endpoint_->address();
}

}  // namespace bnn::server
