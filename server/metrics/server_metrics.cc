#include "server/metrics/server_metrics.h"

#include "bnn/version.h"

namespace bnn::server {

ServerMetrics::ServerMetrics()
    : rpc_requests_(registry_.AddCounter(
          "bnn_rpc_requests_total", "Finished RPCs by method and status code.",
          {"rpc", "code"})),
      // 0.5 ms .. ~16 s: cheap lookups up to large uploads and predictions.
      rpc_latency_(registry_.AddHistogram(
          "bnn_rpc_latency_seconds", "RPC latency from arrival to status.",
          {"rpc"}, ExponentialBuckets(0.0005, 2.0, 16))),
      training_jobs_(registry_.AddGauge("bnn_training_jobs",
                                        "Training jobs by state.", {"state"})),
      training_steps_(registry_.AddCounter("bnn_training_steps_total",
                                           "Optimiser steps taken by method.",
                                           {"method"})),
      predict_rows_(registry_.AddCounter("bnn_predict_rows_total",
                                         "Rows answered by Predict.")),
      acquire_rows_scored_(registry_.AddCounter(
          "bnn_acquire_rows_scored_total", "Pool rows scored by Acquire.")),
      predictor_cache_hits_(registry_.AddCounter(
          "bnn_predictor_cache_hits_total",
          "Predictions that reused cached posterior weight samples.")),
      predictor_cache_misses_(registry_.AddCounter(
          "bnn_predictor_cache_misses_total",
          "Predictions that drew posterior weight samples.")),
      snapshots_imported_(
          registry_.AddCounter("bnn_snapshots_imported_total",
                               "Snapshots stored by ImportSnapshot.")),
      datasets_(registry_.AddGauge("bnn_datasets", "Stored datasets.")),
      snapshots_(registry_.AddGauge("bnn_snapshots", "Stored snapshots.")) {
  registry_
      .AddGauge("bnn_build_info", "Always 1; the labels describe the build.",
                {"version"})
      .WithLabels({kLibraryVersion})
      .Set(1.0);
}

void ServerMetrics::RecordRpc(absl::string_view rpc, absl::StatusCode code,
                              absl::Duration latency) {
  rpc_requests_.WithLabels({rpc, absl::StatusCodeToString(code)}).Increment();
  rpc_latency_.WithLabels({rpc}).Observe(absl::ToDoubleSeconds(latency));
}

}  // namespace bnn::server
