// Every metric bnn-server exports, defined in one place (docs in README.md,
// "Metrics"). Owned by the Server (server/server.h) and borrowed by the
// service and the job runner; unit tests of single parts build their own.
//
// Label values are bounded sets: RPC names, status codes, job states and
// methods come from code or the method registry, and model names (chosen by
// clients) go through ModelLabel.
#ifndef BNN_SERVER_METRICS_SERVER_METRICS_H_
#define BNN_SERVER_METRICS_SERVER_METRICS_H_

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <set>
#include <string>

#include <absl/base/thread_annotations.h>
#include <absl/status/status.h>
#include <absl/strings/string_view.h>
#include <absl/synchronization/mutex.h>
#include <absl/time/time.h>

#include "server/metrics/registry.h"

namespace bnn::server {

// Thread-safe.
class ServerMetrics {
 public:
  // Distinct model names the `model` label takes before further ones are
  // reported as kOtherModel; methods are capped the same way.
  static constexpr int kMaxModelLabels = 64;
  static constexpr int kMaxMethodLabels = 64;
  // The `model` label of calls on a model without a name.
  static constexpr char kUnnamedModel[] = "unnamed";
  static constexpr char kOtherModel[] = "other";

  ServerMetrics();

  // Every family, for the /metrics endpoint and tests.
  const MetricsRegistry& registry() const { return registry_; }

  // --- RPCs ---------------------------------------------------------------
  // One finished RPC: bnn_rpc_requests_total{rpc,code} and
  // bnn_rpc_latency_seconds{rpc}.
  void RecordRpc(absl::string_view rpc, absl::StatusCode code,
                 absl::Duration latency);

  // --- Predict and Acquire ------------------------------------------------
  // The `model` label for a model name: the name, kUnnamedModel for "", and
  // kOtherModel for names beyond the first kMaxModelLabels seen (so a
  // client cannot grow the label set without bound). Predict and Acquire
  // pass the name their model reference resolved to, "" for a snapshot id.
  std::string ModelLabel(absl::string_view model_name);
  // One successful Predict or Acquire (`rpc`) on a snapshot of `method`:
  // bnn_inference_seconds{rpc,method,model} observes `compute` (from its
  // first turn on a compute worker to its result; the wait for that turn is
  // bnn_compute_queue_wait_seconds) and bnn_inference_samples_total adds
  // `samples`, the posterior weight samples it used (0 when linearised).
  void RecordInference(absl::string_view rpc, absl::string_view method,
                       absl::string_view model_name, absl::Duration compute,
                       int64_t samples);
  // A Predict or Acquire call got its first turn on a compute worker after
  // waiting `wait`: bnn_compute_queue_wait_seconds{rpc}.
  void RecordComputeQueueWait(absl::string_view rpc, absl::Duration wait);

  Counter& predict_rows() { return predict_rows_; }
  Counter& acquire_rows_scored() { return acquire_rows_scored_; }
  // Lookups in the predictors' sample caches: one per Monte Carlo Predict,
  // one per scored chunk of an Acquire pool.
  Counter& predictor_cache_hits() { return predictor_cache_hits_; }
  Counter& predictor_cache_misses() { return predictor_cache_misses_; }

  // --- Training -----------------------------------------------------------
  // bnn_training_jobs{state}; `state` is the wire name without prefix
  // ("queued", "running", ...).
  Gauge& training_jobs(absl::string_view state);
  // bnn_training_steps_total{method}.
  Counter& training_steps(absl::string_view method);
  // bnn_kubernetes_job_launches_total{result}: launches of Kubernetes Jobs
  // (--job-runner=kubernetes) by result, "launched" (created, or found
  // already there), "retry" (the API server unavailable: the job stays
  // queued and the launch is retried) or "failed" (the job failed).
  Counter& kubernetes_job_launches(absl::string_view result);
  // A job started running: from now until JobFinished it counts in
  // bnn_training_loss and bnn_training_checkpoint_age_seconds of its method.
  void JobStarted(absl::string_view job_id, absl::string_view method);
  // The job's latest training loss: bnn_training_loss{method} reports the
  // latest one any running job of the method reported.
  void JobLoss(absl::string_view job_id, double loss);
  // The job saved its state (a checkpoint) at `when`:
  // bnn_training_checkpoint_age_seconds{method} is, per method, the longest
  // time any running job has gone without saving (since its last
  // checkpoint, or since it started if it saved none yet).
  void JobCheckpointed(absl::string_view job_id, absl::Time when);
  // The job stopped running in `state` ("succeeded", "failed", "cancelled";
  // "" if its final state could not be recorded, which observes nothing):
  // bnn_training_job_duration_seconds{method,state} observes the time since
  // JobStarted. Unknown ids are ignored.
  void JobFinished(absl::string_view job_id, absl::string_view state);

  // --- Store --------------------------------------------------------------
  Counter& snapshots_imported() { return snapshots_imported_; }
  Gauge& datasets() { return datasets_; }
  Gauge& snapshots() { return snapshots_; }
  // bnn_store_bytes{store}: bytes of the data directory's stores:
  // "metadata" (the SQLite database), "blobs", "checkpoints".
  Gauge& store_bytes(absl::string_view store);
  // bnn_store_quarantined_blobs: blobs that failed their check.
  Gauge& quarantined_blobs() { return quarantined_blobs_; }

  // --- Read when scraped --------------------------------------------------
  // Values the server reads from its parts at each scrape; each source is
  // optional (unset: its metrics have no samples). Set after the parts
  // exist; ClearSources() before they are destroyed.
  struct PredictorCacheStats {
    // Decoded snapshots held, and the bytes of weight samples their sample
    // caches hold.
    int64_t predictors = 0;
    int64_t sample_bytes = 0;
    // PredictorCache::Get calls that found the predictor, and that read and
    // decoded the snapshot; since the start.
    int64_t hits = 0;
    int64_t misses = 0;
  };
  // bnn_compute_queue_length: Predict and Acquire calls waiting for their
  // first turn on a compute worker.
  void SetComputeQueueSource(std::function<int64_t()> queued);
  // bnn_predictor_cache_predictors, bnn_predictor_cache_bytes,
  // bnn_predictor_cache_lookups_total{result="hit"|"miss"}.
  void SetPredictorCacheSource(std::function<PredictorCacheStats()> stats);
  void ClearSources();

 private:
  struct RunningJob {
    std::string method;
    absl::Time started;
    // Since the start or the last JobCheckpointed.
    absl::Time saved;
    bool has_loss = false;
    double loss = 0.0;
    absl::Time loss_time;
  };

  // `value`, or "other" once `max` distinct values are in `seen`.
  static std::string Bounded(absl::string_view value, int max,
                             std::set<std::string, std::less<>>* seen);
  std::string MethodLabel(absl::string_view method)
      ABSL_LOCKS_EXCLUDED(labels_mu_);
  // The probes of the families read when scraped.
  void AddProbes();

  MetricsRegistry registry_;
  prometheus::Family<Counter>& rpc_requests_;
  prometheus::Family<Histogram>& rpc_latency_;
  prometheus::Family<Histogram>& inference_seconds_;
  prometheus::Family<Counter>& inference_samples_;
  prometheus::Family<Histogram>& compute_queue_wait_;
  prometheus::Family<Gauge>& training_jobs_;
  prometheus::Family<Counter>& training_steps_;
  prometheus::Family<Counter>& kubernetes_job_launches_;
  prometheus::Family<Histogram>& training_job_duration_;
  prometheus::Family<Gauge>& store_bytes_;
  Counter& predict_rows_;
  Counter& acquire_rows_scored_;
  Counter& predictor_cache_hits_;
  Counter& predictor_cache_misses_;
  Counter& snapshots_imported_;
  Gauge& datasets_;
  Gauge& snapshots_;
  Gauge& quarantined_blobs_;

  absl::Mutex labels_mu_;
  std::set<std::string, std::less<>> models_ ABSL_GUARDED_BY(labels_mu_);
  std::set<std::string, std::less<>> methods_ ABSL_GUARDED_BY(labels_mu_);

  mutable absl::Mutex jobs_mu_;
  // At most --max-concurrent-jobs entries.
  std::map<std::string, RunningJob, std::less<>> running_
      ABSL_GUARDED_BY(jobs_mu_);

  mutable absl::Mutex sources_mu_;
  std::function<int64_t()> compute_queue_ ABSL_GUARDED_BY(sources_mu_);
  std::function<PredictorCacheStats()> predictor_cache_
      ABSL_GUARDED_BY(sources_mu_);
};

}  // namespace bnn::server

#endif  // BNN_SERVER_METRICS_SERVER_METRICS_H_
