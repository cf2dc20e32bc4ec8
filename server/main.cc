// bnn-server: trains Bayesian neural nets and serves predictive uncertainty
// over gRPC, with an embedded on-disk store and a Prometheus endpoint.
#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <iostream>
#include <memory>
#include <pthread.h>
#include <signal.h>
#include <string>
#include <utility>
#include <vector>

#include <absl/flags/flag.h>
#include <absl/flags/parse.h>
#include <absl/flags/usage.h>
#include <absl/flags/usage_config.h>
#include <absl/status/status.h>
#include <absl/strings/match.h>
#include <absl/strings/str_cat.h>
#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>

#include "bnn/build_info.h"
#include "bnn/status.h"
#include "bnn/version.h"

#include "server/common/flag_names.h"
#include "server/server.h"

// Defaults come from Server::Options, so the binary and in-process servers
// agree; the help text is what `bnn-server --help` prints.
namespace {
const bnn::server::Server::Options kDefaults;
}  // namespace

ABSL_FLAG(std::string, listen, kDefaults.listen,
          "gRPC address host:port; port 0 picks a free port (printed).");
ABSL_FLAG(std::string, data_dir, kDefaults.data_dir,
          "Directory of the embedded store: metadata.db, blobs/, "
          "checkpoints/ (required; created if missing; a directory of an "
          "older server is migrated on first start).");
ABSL_FLAG(std::string, metadata, kDefaults.metadata,
          "The metadata store: empty (the default) for SQLite in "
          "--data-dir, or a PostgreSQL URI "
          "postgres://USER[:PASSWORD]@HOST[:PORT]/DATABASE shared by several "
          "servers (each with its own --data-dir, all with one --blob-dir); "
          "prefer PGPASSWORD or a password file to a password in the URI.");
ABSL_FLAG(std::string, blob_dir, kDefaults.blob_dir,
          "Directory of the blobs (dataset rows, snapshot files); empty: "
          "<data-dir>/blobs. Required with a PostgreSQL --metadata, the same "
          "for every server sharing it.");
ABSL_FLAG(std::string, metrics_listen, kDefaults.metrics_listen,
          "HTTP address (IPv4 or host name, plain HTTP) of /metrics "
          "(Prometheus), /healthz and /readyz; empty disables it. Must be "
          "loopback with --tls-cert.");
ABSL_FLAG(std::string, http_listen, kDefaults.http_listen,
          "HTTP address (IPv4 or host name, plain HTTP) of the Open Inference "
          "Protocol's REST form (/v2/...); empty (the default) disables it. "
          "Must be loopback with --tls-cert.");
ABSL_FLAG(int, max_concurrent_jobs, kDefaults.max_concurrent_jobs,
          "Training jobs run at once.");
ABSL_FLAG(int, max_queued_jobs, kDefaults.max_queued_jobs,
          "Training jobs waiting to run at most; StartTraining beyond it is "
          "refused with RESOURCE_EXHAUSTED.");
ABSL_FLAG(std::string, job_runner, kDefaults.job_runner,
          "in-process: train jobs on this server's workers; kubernetes: run "
          "each job as a Kubernetes batch/v1 Job running bnn-train "
          "--job-id=ID (requires a PostgreSQL --metadata and --blob-dir).");
ABSL_FLAG(std::string, kubernetes_config, kDefaults.kubernetes_config,
          "JSON file of the Kubernetes launcher's options (API server, "
          "namespace, image, resources, node selector; docs/deploy.md). Only "
          "with --job-runner=kubernetes.");
ABSL_FLAG(std::string, kubernetes_option, "",
          "key=value overriding one Kubernetes launcher option (a key of "
          "--kubernetes-config); repeatable, applied in order. Only with "
          "--job-runner=kubernetes.");
ABSL_FLAG(std::string, role, kDefaults.role,
          "all: serve the API and train jobs; serve: serve the API and train "
          "none (StartTraining queues the job in the metadata store for the "
          "train or all replicas, or bnn-train); train: train jobs, and "
          "still serve the API");
ABSL_FLAG(double, job_poll_seconds, kDefaults.job_poll_seconds,
          "How often an idle training worker looks in the metadata store "
          "for jobs submitted to other servers or whose server stopped "
          "heartbeating; a StartTraining here wakes one at once. > 0");
ABSL_FLAG(double, job_heartbeat_seconds,
          kDefaults.job_process.job_heartbeat_seconds,
          "How often a running job records in the metadata store that its "
          "server still runs it (with its progress). > 0");
ABSL_FLAG(double, job_takeover_seconds,
          kDefaults.job_process.job_takeover_seconds,
          "A RUNNING job whose heartbeat is older than this is claimed by "
          "another server and resumed from its last checkpoint. > "
          "--job-heartbeat-seconds");
ABSL_FLAG(double, checkpoint_seconds, kDefaults.job_process.checkpoint_seconds,
          "A running job saves a checkpoint this often (seconds of training) "
          "to resume from after a shutdown or crash; 0 = only at shutdown.");
ABSL_FLAG(int, training_nice, kDefaults.training_nice,
          "Nice value (0..19) of the threads that train jobs, so that "
          "serving gets the cores first while a job trains; 0 = the "
          "server's own priority.");
ABSL_FLAG(bool, preload_models, kDefaults.preload_models,
          "After start, load the latest version of the named models (newest "
          "first, at most 8) into the predictor cache in the background, so "
          "the first Predict after a restart does not load them.");
ABSL_FLAG(int, max_watchers_per_client, kDefaults.max_watchers_per_client,
          "WatchJob streams one client may have open at once.");
ABSL_FLAG(int, max_predict_samples, kDefaults.limits.max_predict_samples,
          "Largest num_samples a Predict request may ask for.");
ABSL_FLAG(int64_t, max_predict_rows, kDefaults.limits.max_predict_rows,
          "Most rows per Predict request.");
ABSL_FLAG(int64_t, max_upload_rows, kDefaults.limits.max_upload_rows,
          "Most rows per dataset upload.");
ABSL_FLAG(int64_t, max_upload_bytes, kDefaults.limits.max_upload_bytes,
          "Most message bytes one UploadDataset or AppendRows stream may "
          "carry (at most 2 GiB - 1 MiB).");
ABSL_FLAG(int, max_models, kDefaults.max_models,
          "Named models the server holds; publishing a new name beyond it is "
          "refused.");
ABSL_FLAG(int, max_model_versions, kDefaults.max_model_versions,
          "Versions one model holds; a publish beyond it is refused.");
ABSL_FLAG(int, max_model_aliases, kDefaults.max_model_aliases,
          "Aliases of one model besides latest; more are refused.");
ABSL_FLAG(int, max_client_streams, kDefaults.max_client_streams,
          "UploadDataset, AppendRows and ImportSnapshot streams open at once; "
          "further ones are refused.");
ABSL_FLAG(double, stream_idle_seconds, kDefaults.stream_idle_seconds,
          "A client stream that sends no message for this long is ended "
          "with DEADLINE_EXCEEDED.");
ABSL_FLAG(int64_t, max_message_bytes, kDefaults.limits.max_message_bytes,
          "Largest gRPC message the server accepts.");
ABSL_FLAG(int, threads, kDefaults.job_process.threads,
          "Most compute (OpenMP/Eigen) threads per training job and per "
          "Predict, Acquire or Evaluate call; 0 = one per core. Jobs and "
          "requests too small to gain from threads run on one.");
ABSL_FLAG(int, compute_workers, kDefaults.compute_workers,
          "Predict, Acquire and Evaluate calls computed at once; later ones "
          "queue, the clients taking turns; a long call lets others' waiting "
          "calls go first between chunks of rows.");
ABSL_FLAG(int, long_call_ms, kDefaults.long_call_ms,
          "A Predict, Acquire or Evaluate call that has computed for this "
          "many milliseconds continues at --long-call-nice, so that on busy "
          "cores short calls and the server's other threads go first; 0 "
          "never lowers a call's priority.");
ABSL_FLAG(int, long_call_nice, kDefaults.long_call_nice,
          "Nice value (1-19) at which calls past --long-call-ms compute.");
ABSL_FLAG(int64_t, predict_cache_bytes, kDefaults.predict_cache_bytes,
          "Bytes of posterior weight samples kept for reuse across Predict, "
          "Acquire and Evaluate calls, in all; each of the (up to 8) cached "
          "snapshots gets an equal share. As much again may be held in idle "
          "sample buffers that later draws of the same shape reuse. 0 "
          "disables both.");
ABSL_FLAG(std::string, predict_precision, kDefaults.predict_precision,
          "Arithmetic of Predict, Acquire and Evaluate forward passes: "
          "float64, or float32 (about twice the throughput, ~1e-6 relative "
          "error).");
ABSL_FLAG(int, predict_chunk_rows, kDefaults.predict_chunk_rows,
          "Most rows of one batched forward pass of Predict, Acquire and "
          "Evaluate (fewer when num_samples is large: about 16384 rows x "
          "samples per pass); calls check their deadline, cancellation and "
          "the fair queue between passes. 1-16384.");
ABSL_FLAG(int64_t, memory_budget_bytes, kDefaults.memory_budget_bytes,
          "Memory that admitted work may hold at once, by estimate; work "
          "beyond it is refused with RESOURCE_EXHAUSTED. 0 = half of the "
          "machine's memory (or of its cgroup limit).");
ABSL_FLAG(double, max_request_seconds, kDefaults.max_request_seconds,
          "Longest computation of one Predict, Acquire or Evaluate call (not "
          "counting turns given to other clients' calls); past it the call "
          "fails with DEADLINE_EXCEEDED.");
ABSL_FLAG(double, shutdown_grace, kDefaults.shutdown_grace_seconds,
          "Seconds from SIGINT/SIGTERM until the process exits, whatever is "
          "still running; running jobs checkpoint at once and resume after "
          "the restart.");
ABSL_FLAG(int64_t, max_snapshot_bytes, kDefaults.limits.max_snapshot_bytes,
          "Largest snapshot ImportSnapshot accepts (at most 2 GiB).");
ABSL_FLAG(std::string, tls_cert, kDefaults.tls.cert_file,
          "PEM certificate chain: serve gRPC over TLS.");
ABSL_FLAG(std::string, tls_key, kDefaults.tls.key_file,
          "PEM private key of --tls-cert.");
ABSL_FLAG(std::string, tls_client_ca, kDefaults.tls.client_ca_file,
          "PEM CA certificates: clients must present a certificate signed "
          "by one (mutual TLS).");
ABSL_FLAG(std::string, token_file, kDefaults.token_file,
          "Bearer token hashes with scopes (bnnctl token create); reloaded "
          "on SIGHUP. Empty: no tokens are asked for.");
ABSL_FLAG(bool, allow_unauthenticated, kDefaults.allow_unauthenticated,
          "Listen on a non-loopback address without --token-file or "
          "--tls-client-ca.");
ABSL_FLAG(std::string, log_format, kDefaults.log_format,
          "Log lines on stderr: text, or json (one object per line with ts, "
          "level, msg and the event's fields).");
ABSL_FLAG(std::string, log_level, kDefaults.log_level,
          "Least severe level logged: trace, debug, info, warn, error or "
          "critical. Every RPC is logged at info.");

namespace bnn::server {
namespace {

// Takes every --kubernetes_option out of `args` (absl keeps only a flag's
// last value), in order: "--kubernetes_option=V" or "--kubernetes_option V".
std::vector<std::string> TakeKubernetesOptions(std::vector<std::string>& args) {
  constexpr absl::string_view kFlag = "--kubernetes_option";
  std::vector<std::string> values;
  std::vector<std::string> rest;
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& arg = args[i];
    if (arg == "--") {
      rest.insert(rest.end(), args.begin() + i, args.end());
      break;
    }
    if (absl::StartsWith(arg, absl::StrCat(kFlag, "="))) {
      values.push_back(arg.substr(kFlag.size() + 1));
    } else if (arg == kFlag && i + 1 < args.size()) {
      values.push_back(args[++i]);
    } else {
      rest.push_back(arg);
    }
  }
  args = std::move(rest);
  return values;
}

Server::Options OptionsFromFlags() {
  Server::Options options;
  options.job_runner = absl::GetFlag(FLAGS_job_runner);
  options.kubernetes_config = absl::GetFlag(FLAGS_kubernetes_config);
  options.listen = absl::GetFlag(FLAGS_listen);
  options.data_dir = absl::GetFlag(FLAGS_data_dir);
  options.metadata = absl::GetFlag(FLAGS_metadata);
  options.blob_dir = absl::GetFlag(FLAGS_blob_dir);
  options.metrics_listen = absl::GetFlag(FLAGS_metrics_listen);
  options.http_listen = absl::GetFlag(FLAGS_http_listen);
  options.max_concurrent_jobs = absl::GetFlag(FLAGS_max_concurrent_jobs);
  options.max_queued_jobs = absl::GetFlag(FLAGS_max_queued_jobs);
  options.job_process.checkpoint_seconds =
      absl::GetFlag(FLAGS_checkpoint_seconds);
  options.role = absl::GetFlag(FLAGS_role);
  options.job_poll_seconds = absl::GetFlag(FLAGS_job_poll_seconds);
  options.job_process.job_heartbeat_seconds =
      absl::GetFlag(FLAGS_job_heartbeat_seconds);
  options.job_process.job_takeover_seconds =
      absl::GetFlag(FLAGS_job_takeover_seconds);
  options.training_nice = absl::GetFlag(FLAGS_training_nice);
  options.preload_models = absl::GetFlag(FLAGS_preload_models);
  options.max_watchers_per_client =
      absl::GetFlag(FLAGS_max_watchers_per_client);
  options.job_process.threads = absl::GetFlag(FLAGS_threads);
  options.compute_workers = absl::GetFlag(FLAGS_compute_workers);
  options.long_call_ms = absl::GetFlag(FLAGS_long_call_ms);
  options.long_call_nice = absl::GetFlag(FLAGS_long_call_nice);
  options.predict_cache_bytes = absl::GetFlag(FLAGS_predict_cache_bytes);
  options.predict_precision = absl::GetFlag(FLAGS_predict_precision);
  options.predict_chunk_rows = absl::GetFlag(FLAGS_predict_chunk_rows);
  options.memory_budget_bytes = absl::GetFlag(FLAGS_memory_budget_bytes);
  options.max_request_seconds = absl::GetFlag(FLAGS_max_request_seconds);
  options.shutdown_grace_seconds = absl::GetFlag(FLAGS_shutdown_grace);
  options.limits.max_upload_rows = absl::GetFlag(FLAGS_max_upload_rows);
  options.limits.max_upload_bytes = absl::GetFlag(FLAGS_max_upload_bytes);
  options.max_client_streams = absl::GetFlag(FLAGS_max_client_streams);
  options.max_models = absl::GetFlag(FLAGS_max_models);
  options.max_model_versions = absl::GetFlag(FLAGS_max_model_versions);
  options.max_model_aliases = absl::GetFlag(FLAGS_max_model_aliases);
  options.stream_idle_seconds = absl::GetFlag(FLAGS_stream_idle_seconds);
  options.limits.max_predict_rows = absl::GetFlag(FLAGS_max_predict_rows);
  options.limits.max_predict_samples = absl::GetFlag(FLAGS_max_predict_samples);
  options.limits.max_snapshot_bytes = absl::GetFlag(FLAGS_max_snapshot_bytes);
  options.limits.max_message_bytes = absl::GetFlag(FLAGS_max_message_bytes);
  options.tls.cert_file = absl::GetFlag(FLAGS_tls_cert);
  options.tls.key_file = absl::GetFlag(FLAGS_tls_key);
  options.tls.client_ca_file = absl::GetFlag(FLAGS_tls_client_ca);
  options.token_file = absl::GetFlag(FLAGS_token_file);
  options.allow_unauthenticated = absl::GetFlag(FLAGS_allow_unauthenticated);
  options.log_format = absl::GetFlag(FLAGS_log_format);
  options.log_level = absl::GetFlag(FLAGS_log_level);
  return options;
}

// Serves until SIGINT or SIGTERM, reloading the token file on SIGHUP. The
// signals must be blocked in every thread (the caller blocks them before any
// thread exists).
absl::Status Serve(Server::Options options, const sigset_t& signals) {
  BNN_ASSIGN_OR_RETURN(std::unique_ptr<Server> server,
                       Server::Create(std::move(options)));
  BNN_RETURN_IF_ERROR(server->Start());
  if (const std::string metrics = server->metrics_address(); !metrics.empty()) {
    std::cout << "bnn-server metrics on http://" << metrics << "/metrics"
              << std::endl;
  }
  if (const std::string http = server->http_address(); !http.empty()) {
    std::cout << "bnn-server http on " << http << std::endl;
  }
  // Tests and scripts parse this line for the bound port.
  std::cout << "bnn-server listening on " << server->address() << std::endl;
  spdlog::info("{} serving; data in {}", VersionLine("bnn-server"),
               server->options().data_dir);

  int signal_number = 0;
  while (true) {
    if (sigwait(&signals, &signal_number) != 0) {
      return absl::InternalError("sigwait failed");
    }
    if (signal_number != SIGHUP) break;
    if (const absl::StatusOr<int> tokens = server->ReloadTokens();
        tokens.ok()) {
      spdlog::info("SIGHUP: token file reloaded, {} tokens", *tokens);
    } else {
      spdlog::error("SIGHUP: token file not reloaded, old tokens kept: {}",
                    tokens.status().ToString());
    }
  }
  spdlog::info("{}: shutting down", strsignal(signal_number));
  const absl::Status stopped = server->Shutdown();
  if (!stopped.ok()) {
    // Something is stuck where it cannot be interrupted; destroying the
    // server would wait for it. The stores are consistent (running jobs are
    // recorded INTERRUPTED, to resume from their last checkpoint), so exit
    // now.
    spdlog::warn("{}; exiting without them", std::string(stopped.message()));
    spdlog::info("bnn-server stopped");
    spdlog::shutdown();
    std::cout.flush();
    std::_Exit(0);
  }
  spdlog::info("bnn-server stopped");
  return absl::OkStatus();
}

}  // namespace
}  // namespace bnn::server

int main(int argc, char** argv) {
  // Before any thread starts, so that every thread inherits the mask and the
  // signals reach only sigwait().
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGINT);
  sigaddset(&signals, SIGTERM);
  sigaddset(&signals, SIGHUP);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);
  // A client vanishing mid-response must not kill the server.
  signal(SIGPIPE, SIG_IGN);

  std::vector<std::string> args = bnn::server::NormalizeFlagNames(argc, argv);
  const std::vector<std::string> kubernetes_options =
      bnn::server::TakeKubernetesOptions(args);
  std::vector<char*> arg_pointers;
  for (std::string& arg : args) arg_pointers.push_back(arg.data());
  absl::SetProgramUsageMessage(
      "bnn-server --data-dir DIR [--listen HOST:PORT] [flags]; flag names "
      "take dashes or underscores");
  absl::FlagsUsageConfig usage;
  // --help and --helpshort list the flags of this file (absl would look for
  // a file named after the program), with paths that do not depend on the
  // build directory; --helpfull adds absl's own.
  usage.contains_help_flags = [](absl::string_view path) {
    return absl::EndsWith(path, "server/main.cc");
  };
  usage.contains_helpshort_flags = usage.contains_help_flags;
  usage.normalize_filename = [](absl::string_view path) {
    const size_t server = path.rfind("server/main.cc");
    return std::string(server == absl::string_view::npos ? path
                                                         : path.substr(server));
  };
  usage.version_string = [] {
    return absl::StrCat(bnn::VersionLine("bnn-server"), "\n");
  };
  absl::SetFlagsUsageConfig(usage);
  absl::ParseCommandLine(static_cast<int>(arg_pointers.size()),
                         arg_pointers.data());

  // Errors in the log flags themselves go to a plain stderr logger.
  spdlog::set_default_logger(spdlog::stderr_color_mt("bnn-server"));
  bnn::server::Server::Options options = bnn::server::OptionsFromFlags();
  options.kubernetes_options = kubernetes_options;
  absl::Status status = bnn::server::Server::SetUpProcessLogging(options);
  if (status.ok()) status = bnn::server::Serve(options, signals);
  if (!status.ok()) {
    spdlog::critical("{}", status.ToString());
    return 1;
  }
  return 0;
}
