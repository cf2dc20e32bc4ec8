#include "server/metrics/server_metrics.h"

#include <algorithm>
#include <optional>
#include <prometheus/counter.h>
#include <prometheus/gauge.h>
#include <prometheus/histogram.h>
#include <utility>
#include <vector>

#include <absl/time/clock.h>

#include "bnn/version.h"

#include "server/metrics/process_collector.h"

namespace bnn::server {
namespace {

using prometheus::BuildCounter;
using prometheus::BuildGauge;
using prometheus::BuildHistogram;
using prometheus::MetricType;

using Buckets = prometheus::Histogram::BucketBoundaries;

// 0.5 ms .. ~16 s: cheap lookups up to large uploads and predictions.
const Buckets& RpcBuckets() {
  static const Buckets* const buckets =
      new Buckets(ExponentialBuckets(0.0005, 2.0, 16));
  return *buckets;
}
// 1 ms .. ~65 s: one Predict or Acquire computation or its wait for a
// worker (--max-request-seconds defaults to 60).
const Buckets& ComputeBuckets() {
  static const Buckets* const buckets =
      new Buckets(ExponentialBuckets(0.001, 2.0, 17));
  return *buckets;
}
// 0.1 s .. ~7 h: training jobs.
const Buckets& JobBuckets() {
  static const Buckets* const buckets =
      new Buckets(ExponentialBuckets(0.1, 2.0, 19));
  return *buckets;
}

}  // namespace

ServerMetrics::ServerMetrics()
    : rpc_requests_(BuildCounter()
                        .Name("bnn_rpc_requests_total")
                        .Help("Finished RPCs by method and status code.")
                        .Register(registry_.families())),
      rpc_latency_(BuildHistogram()
                       .Name("bnn_rpc_latency_seconds")
                       .Help("RPC latency from arrival to status.")
                       .Register(registry_.families())),
      inference_seconds_(
          BuildHistogram()
              .Name("bnn_inference_seconds")
              .Help("Computation of successful Predict and Acquire calls, "
                    "from their first turn on a compute worker to the "
                    "result, by snapshot method and model.")
              .Register(registry_.families())),
      inference_samples_(
          BuildCounter()
              .Name("bnn_inference_samples_total")
              .Help("Posterior weight samples used by successful Predict and "
                    "Acquire calls (S per call; 0 when linearised), by "
                    "snapshot method and model.")
              .Register(registry_.families())),
      compute_queue_wait_(
          BuildHistogram()
              .Name("bnn_compute_queue_wait_seconds")
              .Help("Time Predict and Acquire calls waited for their first "
                    "turn on a compute worker.")
              .Register(registry_.families())),
      training_jobs_(BuildGauge()
                         .Name("bnn_training_jobs")
                         .Help("Training jobs by state.")
                         .Register(registry_.families())),
      training_steps_(BuildCounter()
                          .Name("bnn_training_steps_total")
                          .Help("Optimiser steps taken by method.")
                          .Register(registry_.families())),
      kubernetes_job_launches_(
          BuildCounter()
              .Name("bnn_kubernetes_job_launches_total")
              .Help("Kubernetes Jobs launched for training jobs "
                    "(--job-runner=kubernetes), by result: launched, retry, "
                    "failed.")
              .Register(registry_.families())),
      training_job_duration_(
          BuildHistogram()
              .Name("bnn_training_job_duration_seconds")
              .Help("Running time of finished training jobs, by method and "
                    "final state.")
              .Register(registry_.families())),
      store_bytes_(BuildGauge()
                       .Name("bnn_store_bytes")
                       .Help("Bytes of files in the data directory, by store; "
                             "refreshed every few seconds.")
                       .Register(registry_.families())),
      predict_rows_(BuildCounter()
                        .Name("bnn_predict_rows_total")
                        .Help("Rows answered by Predict.")
                        .Register(registry_.families())
                        .Add({})),
      acquire_rows_scored_(BuildCounter()
                               .Name("bnn_acquire_rows_scored_total")
                               .Help("Pool rows scored by Acquire.")
                               .Register(registry_.families())
                               .Add({})),
      predictor_cache_hits_(
          BuildCounter()
              .Name("bnn_predictor_cache_hits_total")
              .Help("Predictions that reused cached posterior weight samples.")
              .Register(registry_.families())
              .Add({})),
      predictor_cache_misses_(
          BuildCounter()
              .Name("bnn_predictor_cache_misses_total")
              .Help("Predictions that drew posterior weight samples.")
              .Register(registry_.families())
              .Add({})),
      snapshots_imported_(BuildCounter()
                              .Name("bnn_snapshots_imported_total")
                              .Help("Snapshots stored by ImportSnapshot.")
                              .Register(registry_.families())
                              .Add({})),
      datasets_(BuildGauge()
                    .Name("bnn_datasets")
                    .Help("Stored datasets.")
                    .Register(registry_.families())
                    .Add({})),
      snapshots_(BuildGauge()
                     .Name("bnn_snapshots")
                     .Help("Stored snapshots.")
                     .Register(registry_.families())
                     .Add({})),
      quarantined_blobs_(
          BuildGauge()
              .Name("bnn_store_quarantined_blobs")
              .Help("Blobs (dataset rows, snapshot files) in the data "
                    "directory's quarantine: they failed their SHA-256 "
                    "check and are never served.")
              .Register(registry_.families())
              .Add({})) {
  BuildGauge()
      .Name("bnn_build_info")
      .Help("Always 1; the labels describe the build.")
      .Register(registry_.families())
      .Add({{"version", kLibraryVersion}})
      .Set(1.0);
  AddProbes();
  registry_.AddCollector(std::make_shared<ProcessCollector>());
}

void ServerMetrics::AddProbes() {
  using Samples = std::vector<ProbeCollector::Sample>;
  ProbeCollector& probes = registry_.probes();
  probes.Add("bnn_compute_queue_length",
             "Predict and Acquire calls waiting for their first turn on a "
             "compute worker.",
             MetricType::Gauge, [this]() -> Samples {
               absl::MutexLock lock(&sources_mu_);
               if (!compute_queue_) return {};
               return {{{}, static_cast<double>(compute_queue_())}};
             });
  auto cache_stats = [this]() -> std::optional<PredictorCacheStats> {
    absl::MutexLock lock(&sources_mu_);
    if (!predictor_cache_) return std::nullopt;
    return predictor_cache_();
  };
  probes.Add("bnn_predictor_cache_predictors",
             "Decoded snapshots (predictors) held by the predictor cache.",
             MetricType::Gauge, [cache_stats]() -> Samples {
               const auto stats = cache_stats();
               if (!stats) return {};
               return {{{}, static_cast<double>(stats->predictors)}};
             });
  probes.Add("bnn_predictor_cache_bytes",
             "Bytes of posterior weight samples held by the sample caches of "
             "the cached predictors.",
             MetricType::Gauge, [cache_stats]() -> Samples {
               const auto stats = cache_stats();
               if (!stats) return {};
               return {{{}, static_cast<double>(stats->sample_bytes)}};
             });
  probes.Add("bnn_predictor_cache_lookups_total",
             "Predictor cache lookups: hit (the decoded snapshot was reused) "
             "or miss (it was read and decoded).",
             MetricType::Counter, [cache_stats]() -> Samples {
               const auto stats = cache_stats();
               if (!stats) return {};
               return {
                   {{{"result", "hit"}}, static_cast<double>(stats->hits)},
                   {{{"result", "miss"}}, static_cast<double>(stats->misses)}};
             });
  probes.Add("bnn_training_loss",
             "Latest training loss reported by a running job, by method.",
             MetricType::Gauge, [this]() -> Samples {
               // Per method, the job that reported last.
               std::map<std::string, const RunningJob*> latest;
               absl::MutexLock lock(&jobs_mu_);
               for (const auto& [id, job] : running_) {
                 if (!job.has_loss) continue;
                 const RunningJob*& best = latest[job.method];
                 if (best == nullptr || job.loss_time > best->loss_time) {
                   best = &job;
                 }
               }
               Samples samples;
               for (const auto& [method, job] : latest) {
                 samples.push_back({{{"method", method}}, job->loss});
               }
               return samples;
             });
  probes.Add("bnn_training_checkpoint_age_seconds",
             "Longest time a running job of the method has gone without "
             "saving its state (since its last checkpoint, or its start).",
             MetricType::Gauge, [this]() -> Samples {
               const absl::Time now = absl::Now();
               std::map<std::string, double> oldest;
               absl::MutexLock lock(&jobs_mu_);
               for (const auto& [id, job] : running_) {
                 double& age = oldest[job.method];
                 age = std::max(age, absl::ToDoubleSeconds(now - job.saved));
               }
               Samples samples;
               for (const auto& [method, age] : oldest) {
                 samples.push_back({{{"method", method}}, age});
               }
               return samples;
             });
}

void ServerMetrics::RecordRpc(absl::string_view rpc, absl::StatusCode code,
                              absl::Duration latency) {
  const std::string name(rpc);
  rpc_requests_.Add({{"rpc", name}, {"code", absl::StatusCodeToString(code)}})
      .Increment();
  rpc_latency_.Add({{"rpc", name}}, RpcBuckets())
      .Observe(absl::ToDoubleSeconds(latency));
}

std::string ServerMetrics::Bounded(absl::string_view value, int max,
                                   std::set<std::string, std::less<>>* seen) {
  if (seen->count(value) > 0) return std::string(value);
  if (static_cast<int>(seen->size()) >= max) return kOtherModel;
  seen->emplace(value);
  return std::string(value);
}

std::string ServerMetrics::ModelLabel(absl::string_view model_name) {
  if (model_name.empty()) return kUnnamedModel;
  absl::MutexLock lock(&labels_mu_);
  return Bounded(model_name, kMaxModelLabels, &models_);
}

std::string ServerMetrics::MethodLabel(absl::string_view method) {
  absl::MutexLock lock(&labels_mu_);
  return Bounded(method, kMaxMethodLabels, &methods_);
}

void ServerMetrics::RecordInference(absl::string_view rpc,
                                    absl::string_view method,
                                    absl::string_view model_name,
                                    absl::Duration compute, int64_t samples) {
  const prometheus::Labels labels = {{"rpc", std::string(rpc)},
                                     {"method", MethodLabel(method)},
                                     {"model", ModelLabel(model_name)}};
  inference_seconds_.Add(labels, ComputeBuckets())
      .Observe(absl::ToDoubleSeconds(compute));
  inference_samples_.Add(labels).Increment(static_cast<double>(samples));
}

void ServerMetrics::RecordComputeQueueWait(absl::string_view rpc,
                                           absl::Duration wait) {
  compute_queue_wait_.Add({{"rpc", std::string(rpc)}}, ComputeBuckets())
      .Observe(absl::ToDoubleSeconds(wait));
}

Gauge& ServerMetrics::training_jobs(absl::string_view state) {
  return training_jobs_.Add({{"state", std::string(state)}});
}

Counter& ServerMetrics::training_steps(absl::string_view method) {
  return training_steps_.Add({{"method", MethodLabel(method)}});
}

Counter& ServerMetrics::kubernetes_job_launches(absl::string_view result) {
  return kubernetes_job_launches_.Add({{"result", std::string(result)}});
}

void ServerMetrics::JobStarted(absl::string_view job_id,
                               absl::string_view method) {
  const absl::Time now = absl::Now();
  RunningJob job;
  job.method = MethodLabel(method);
  job.started = now;
  job.saved = now;
  absl::MutexLock lock(&jobs_mu_);
  running_.insert_or_assign(std::string(job_id), std::move(job));
}

void ServerMetrics::JobLoss(absl::string_view job_id, double loss) {
  absl::MutexLock lock(&jobs_mu_);
  const auto it = running_.find(job_id);
  if (it == running_.end()) return;
  it->second.has_loss = true;
  it->second.loss = loss;
  it->second.loss_time = absl::Now();
}

void ServerMetrics::JobCheckpointed(absl::string_view job_id, absl::Time when) {
  absl::MutexLock lock(&jobs_mu_);
  const auto it = running_.find(job_id);
  if (it != running_.end()) it->second.saved = std::max(it->second.saved, when);
}

void ServerMetrics::JobFinished(absl::string_view job_id,
                                absl::string_view state) {
  RunningJob job;
  {
    absl::MutexLock lock(&jobs_mu_);
    const auto it = running_.find(job_id);
    if (it == running_.end()) return;
    job = std::move(it->second);
    running_.erase(it);
  }
  if (state.empty()) return;
  training_job_duration_
      .Add({{"method", job.method}, {"state", std::string(state)}},
           JobBuckets())
      .Observe(absl::ToDoubleSeconds(absl::Now() - job.started));
}

Gauge& ServerMetrics::store_bytes(absl::string_view store) {
  return store_bytes_.Add({{"store", std::string(store)}});
}

void ServerMetrics::SetComputeQueueSource(std::function<int64_t()> queued) {
  absl::MutexLock lock(&sources_mu_);
  compute_queue_ = std::move(queued);
}

void ServerMetrics::SetPredictorCacheSource(
    std::function<PredictorCacheStats()> stats) {
  absl::MutexLock lock(&sources_mu_);
  predictor_cache_ = std::move(stats);
}

void ServerMetrics::ClearSources() {
  absl::MutexLock lock(&sources_mu_);
  compute_queue_ = nullptr;
  predictor_cache_ = nullptr;
}

}  // namespace bnn::server
