#include "server/server.h"

#include <chrono>
#include <climits>
#include <utility>

#include <absl/strings/str_cat.h>
#include <absl/strings/string_view.h>
#include <grpcpp/ext/proto_server_reflection_plugin.h>
#include <grpcpp/health_check_service_interface.h>
#include <spdlog/spdlog.h>

#include "bnn/memory.h"
#include "bnn/methods/options.h"
#include "bnn/methods/registry.h"
#include "bnn/status.h"

#include "server/common/address.h"

namespace bnn::server {
namespace {

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

}  // namespace

absl::Status Server::Options::Validate() const {
  if (data_dir.empty()) {
    return absl::InvalidArgumentError("--data-dir is required");
  }
  std::string host;
  int port = 0;
  BNN_RETURN_IF_ERROR(SplitHostPort(listen, &host, &port));
  BNN_RETURN_IF_ERROR(
      CheckAtLeast("max-upload-rows", limits.max_upload_rows, 1));
  BNN_RETURN_IF_ERROR(
      CheckAtLeast("max-predict-rows", limits.max_predict_rows, 1));
  BNN_RETURN_IF_ERROR(
      CheckAtLeast("max-predict-samples", limits.max_predict_samples, 1));
  BNN_RETURN_IF_ERROR(
      CheckAtLeast("max-concurrent-jobs", max_concurrent_jobs, 1));
  BNN_RETURN_IF_ERROR(CheckAtLeast("threads", threads, 0));
  BNN_RETURN_IF_ERROR(CheckAtLeast("compute-workers", compute_workers, 1));
  BNN_RETURN_IF_ERROR(
      CheckAtLeast("predict-cache-bytes", predict_cache_bytes, 0));
  BNN_RETURN_IF_ERROR(
      CheckAtLeast("memory-budget-bytes", memory_budget_bytes, 0));
  BNN_RETURN_IF_ERROR(CheckOneOf("--predict-precision", predict_precision,
                                 {"float64", "float32"}));
  BNN_RETURN_IF_ERROR(
      CheckInRange("max-message-bytes", limits.max_message_bytes, 1, INT_MAX));
  // Snapshot payloads are parsed by protobuf, whose sizes are ints.
  BNN_RETURN_IF_ERROR(CheckInRange(
      "max-snapshot-bytes", limits.max_snapshot_bytes, 1, int64_t{2} << 30));
  return absl::OkStatus();
}

absl::StatusOr<std::unique_ptr<Server>> Server::Create(Options options) {
  BNN_RETURN_IF_ERROR(options.Validate());
  std::unique_ptr<Server> server(new Server(std::move(options)));
  const Options& o = server->options_;
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
  BNN_ASSIGN_OR_RETURN(server->datasets_,
                       DatasetStore::Open(o.data_dir + "/datasets"));
  BNN_ASSIGN_OR_RETURN(server->snapshots_,
                       SnapshotStore::Open(o.data_dir + "/snapshots"));
  PredictorCache::Options cache_options;
  cache_options.capacity = kPredictorCacheCapacity;
  cache_options.predictor.max_samples = o.limits.max_predict_samples;
  // The flag bounds the memory of all sample caches together; every cached
  // predictor keeps its own, so each gets an equal share.
  cache_options.predictor.cache_bytes =
      o.predict_cache_bytes / kPredictorCacheCapacity;
  cache_options.predictor.precision = o.predict_precision;
  BNN_ASSIGN_OR_RETURN(
      server->predictors_,
      PredictorCache::Create(cache_options, server->snapshots_.get()));
  BNN_ASSIGN_OR_RETURN(server->jobs_, JobStore::Open(o.data_dir + "/jobs"));
  const MethodRegistry* registry = &MethodRegistry::Builtin();

  JobRunner::Options runner_options;
  runner_options.max_concurrent_jobs = o.max_concurrent_jobs;
  runner_options.compute_threads = o.threads;
  BNN_ASSIGN_OR_RETURN(
      server->runner_,
      JobRunner::Create(runner_options, server->jobs_.get(),
                        server->datasets_.get(), server->snapshots_.get(),
                        server->predictors_.get(), registry,
                        &server->metrics_));

  BnnServiceImpl::Options service_options;
  service_options.limits = o.limits;
  service_options.compute_threads = o.threads;
  service_options.compute_workers = o.compute_workers;
  server->service_ = std::make_unique<BnnServiceImpl>(
      service_options, server->datasets_.get(), server->snapshots_.get(),
      server->predictors_.get(), server->runner_.get(), registry,
      &server->metrics_);
  return server;
}

Server::~Server() { Shutdown(); }

absl::Status Server::Start() {
  BNN_RETURN_IF_ERROR(SplitHostPort(options_.listen, &host_, &port_));
  grpc::EnableDefaultHealthCheckService(true);
  grpc::reflection::InitProtoReflectionServerBuilderPlugin();
  grpc::ServerBuilder builder;
  port_ = 0;
  builder.AddListeningPort(options_.listen, grpc::InsecureServerCredentials(),
                           &port_);
  builder.SetMaxReceiveMessageSize(
      static_cast<int>(options_.limits.max_message_bytes));
  builder.RegisterService(service_.get());
  grpc_server_ = builder.BuildAndStart();
  if (grpc_server_ == nullptr || port_ == 0) {
    grpc_server_.reset();
    return absl::UnavailableError(
        absl::StrCat("cannot listen on ", options_.listen));
  }
  if (!options_.metrics_listen.empty()) {
    absl::StatusOr<std::unique_ptr<HttpExporter>> started =
        HttpExporter::Start(options_.metrics_listen, &metrics_.registry());
    if (!started.ok()) {
      grpc_server_->Shutdown();
      grpc_server_.reset();
      return started.status();
    }
    exporter_ = *std::move(started);
  }
  return absl::OkStatus();
}

void Server::Shutdown() {
  absl::MutexLock lock(&shutdown_mu_);
  if (shut_down_) return;
  shut_down_ = true;
  // RPCs first (so no new jobs arrive), then training, then the scrape
  // endpoint.
  if (grpc_server_ != nullptr) {
    grpc_server_->Shutdown(std::chrono::system_clock::now() +
                           absl::ToChronoSeconds(kShutdownGrace));
  }
  if (runner_ != nullptr) runner_->Shutdown();
  exporter_.reset();
}

std::string Server::address() const { return JoinHostPort(host_, port_); }

std::string Server::metrics_address() const {
  return exporter_ == nullptr ? std::string() : exporter_->address();
}

}  // namespace bnn::server
