// Every metric bnn-server exports, defined in one place. Owned by the Server
// (server/server.h) and borrowed by the service and the job runner; unit
// tests of single parts build their own.
#ifndef BNN_SERVER_METRICS_SERVER_METRICS_H_
#define BNN_SERVER_METRICS_SERVER_METRICS_H_

#include <absl/status/status.h>
#include <absl/strings/string_view.h>
#include <absl/time/time.h>

#include "server/metrics/registry.h"

namespace bnn::server {

// Thread-safe.
class ServerMetrics {
 public:
  ServerMetrics();

  const Registry& registry() const { return registry_; }

  // One finished RPC: bnn_rpc_requests_total{rpc,code} and
  // bnn_rpc_latency_seconds{rpc}.
  void RecordRpc(absl::string_view rpc, absl::StatusCode code,
                 absl::Duration latency);

  // bnn_training_jobs{state}; `state` is the wire name without prefix
  // ("queued", "running", ...).
  Gauge& training_jobs(absl::string_view state) {
    return training_jobs_.WithLabels({state});
  }
  // bnn_training_steps_total{method}.
  Counter& training_steps(absl::string_view method) {
    return training_steps_.WithLabels({method});
  }
  Counter& predict_rows() { return predict_rows_.WithLabels({}); }
  Counter& acquire_rows_scored() { return acquire_rows_scored_.WithLabels({}); }
  // Lookups in the predictors' sample caches: one per Monte Carlo Predict,
  // one per scored chunk of an Acquire pool.
  Counter& predictor_cache_hits() {
    return predictor_cache_hits_.WithLabels({});
  }
  Counter& predictor_cache_misses() {
    return predictor_cache_misses_.WithLabels({});
  }
  Counter& snapshots_imported() { return snapshots_imported_.WithLabels({}); }
  Gauge& datasets() { return datasets_.WithLabels({}); }
  Gauge& snapshots() { return snapshots_.WithLabels({}); }

 private:
  Registry registry_;
  Family<Counter>& rpc_requests_;
  Family<Histogram>& rpc_latency_;
  Family<Gauge>& training_jobs_;
  Family<Counter>& training_steps_;
  Family<Counter>& predict_rows_;
  Family<Counter>& acquire_rows_scored_;
  Family<Counter>& predictor_cache_hits_;
  Family<Counter>& predictor_cache_misses_;
  Family<Counter>& snapshots_imported_;
  Family<Gauge>& datasets_;
  Family<Gauge>& snapshots_;
};

}  // namespace bnn::server

#endif  // BNN_SERVER_METRICS_SERVER_METRICS_H_
