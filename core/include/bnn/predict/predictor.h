// Predictive distributions from a snapshot by Monte Carlo over the posterior,
// p(y | x) ~= (1/S) sum_s p(y | x, theta_s), theta_s ~ q, or by the linearised
// (GLM) predictive for regression.
#ifndef BNN_PREDICT_PREDICTOR_H_
#define BNN_PREDICT_PREDICTOR_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"

#include "bnn/interrupt.h"
#include "bnn/io/snapshot.h"
#include "bnn/memory.h"

namespace bnn {

struct PredictorOptions {
  // Upper bound on samples per request.
  int max_samples = 4096;
  // Most rows evaluated per batched forward pass; fewer when S is large
  // (about 16384 rows x samples per pass, at most 65536: MaxChunkRows in
  // predictor.cc), which bounds activation memory and the time between
  // interrupt checks.
  int chunk_rows = 1024;
  // Bytes of drawn weight samples kept across requests, keyed by (S, seed);
  // least recently used blocks are evicted. 0 disables the cache.
  int64_t cache_bytes = int64_t{1} << 30;
  // Bytes of idle weight-sample buffers (D x S arrays of finished draws that
  // were not cached, or were evicted) kept for reuse by later draws of the
  // same shape, which then neither allocate nor page-fault them (64 samples
  // of the MNIST-size net are 245 MB). Idle buffers are not part of any
  // request's EstimateMemory, which counts a draw's buffer whether it is
  // reused or new. 0 disables.
  int64_t reuse_bytes = int64_t{1} << 30;
  // Arithmetic of the forward passes: "float64" or "float32" (about twice
  // the GEMM throughput; outputs agree to ~1e-6 relative).
  std::string precision = "float64";

  absl::Status Validate() const;
};

// Weight samples drawn by a Predictor for one (num_samples, seed); opaque.
class WeightSamples;

struct PredictOptions {
  // S: posterior samples; 1 <= S <= PredictorOptions::max_samples.
  int num_samples = 64;
  // Same seed, S and inputs => bitwise-identical outputs.
  uint64_t seed = 0;
  // Regression only: mean f(x; mu) and epistemic variance J Sigma J^T through
  // the posterior's structure instead of Monte Carlo (Gaussian families).
  bool linearized = false;
  // Regression only: levels in (0, 1) of the predictive quantiles (of the
  // MC mixture of Gaussians, or of the linearised Gaussian).
  std::vector<double> quantiles;
  // Also return every sample's output (see Prediction::sample_outputs).
  bool per_sample = false;
  // Keep the drawn weight samples in the predictor's cache for later
  // requests with the same (num_samples, seed). Set it false for requests
  // whose seed the client did not choose: their draw is never asked for
  // again and would only evict reusable ones. A cached draw is used either
  // way.
  bool cache_samples = true;
  // Samples from Predictor::DrawSamples for this num_samples and seed, to
  // reuse one draw over several calls (the chunks of an acquisition pool);
  // null: drawn, or taken from the cache, by this call.
  std::shared_ptr<const WeightSamples> samples;
  // Checked before every chunk of rows; a non-OK status (cancelled,
  // deadline passed) ends the call with that status.
  Interrupt interrupt;
};

struct Prediction {
  int64_t num_rows = 0;
  int num_samples = 0;  // 0 for a linearised prediction
  // Regression (original target units): predictive mean; total variance =
  // epistemic (variance of the sampled means) + aleatoric (1/tau).
  std::vector<double> mean;
  std::vector<double> variance;
  std::vector<double> epistemic_variance;
  std::vector<double> aleatoric_variance;
  // num_rows x quantiles.size(), row-major.
  std::vector<double> quantiles;
  // Classification: MC-averaged class probabilities (row-major rows x C), the
  // predicted class value, predictive entropy H[p], expected entropy E_s
  // H[p_s], mutual information (BALD) H[p] - E_s H[p_s] and the variation ratio
  // 1 - (votes for the modal class) / S; entropies in nats.
  int num_classes = 0;
  std::vector<double> probabilities;
  std::vector<double> predicted_class;
  std::vector<double> entropy;
  std::vector<double> expected_entropy;
  std::vector<double> mutual_information;
  std::vector<double> variation_ratio;
  // With PredictOptions::per_sample: sample-major outputs, entry
  // [(s * num_rows + i) * K + k] with K = 1 (regression mean, original units)
  // or C (class probabilities).
  std::vector<double> sample_outputs;
};

// Thread-safe: Predict() may run concurrently from many threads.
class Predictor {
 public:
  // `name` identifies the snapshot in error messages (a store's snapshot
  // id); empty: "the snapshot".
  static absl::StatusOr<std::unique_ptr<Predictor>> Create(
      std::shared_ptr<const Snapshot> snapshot,
      const PredictorOptions& options = {}, std::string name = "");
  ~Predictor();

  const std::string& name() const { return name_; }
  int64_t num_features() const;
  const Snapshot& snapshot() const { return *snapshot_; }
  std::shared_ptr<const Snapshot> shared_snapshot() const { return snapshot_; }

  // `rows` is row-major num_rows x num_features() in raw (unstandardised)
  // units. InvalidArgument on a non-finite value (or one the snapshot's
  // standardisation overflows on), a bad sample count or an option the task
  // does not support. Internal, naming the snapshot, if any output is not
  // finite: a NaN is never returned as an answer. ResourceExhausted if an
  // allocation fails (the process survives).
  absl::StatusOr<Prediction> Predict(absl::Span<const double> rows,
                                     int64_t num_rows,
                                     const PredictOptions& options) const;

  // Peak heap bytes of Predict(rows, num_rows, options), estimated before it
  // allocates: the larger of drawing the D x S weight samples
  // (Posterior::SampleBytes, plus their float32 copy) and computing with
  // them: the samples, one chunk's forward pass over chunk x S rows and its
  // standardised inputs (or the linearised predictive's Jacobian factors),
  // and the Prediction's arrays (kept_bytes). No draw when options.samples
  // is given; a draw the cache holds is counted, as it may be evicted
  // meanwhile. Not the caller's rows, nor a response built from the result.
  MemoryEstimate EstimateMemory(int64_t num_rows,
                                const PredictOptions& options) const;

  // The weight samples options.num_samples and options.seed select, drawn
  // (or taken from the cache; cached per options.cache_samples) once for use
  // as PredictOptions::samples in later calls on this predictor.
  absl::StatusOr<std::shared_ptr<const WeightSamples>> DrawSamples(
      const PredictOptions& options) const;

  struct CacheStats {
    int64_t hits = 0;
    int64_t misses = 0;
    int64_t bytes = 0;
    int64_t entries = 0;
    // Draws made into an idle buffer (PredictorOptions::reuse_bytes).
    int64_t reused = 0;
  };
  CacheStats cache_stats() const;

  // Opaque: the precision-specific engine (predictor.cc).
  struct Impl;

 private:
  absl::Status CheckSamples(const WeightSamples& samples,
                            const PredictOptions& options) const;

  Predictor(std::shared_ptr<const Snapshot> snapshot,
            const PredictorOptions& options, std::string name,
            std::unique_ptr<Impl> impl);

  std::shared_ptr<const Snapshot> snapshot_;
  PredictorOptions options_;
  std::string name_;
  std::unique_ptr<Impl> impl_;
};

}  // namespace bnn

#endif  // BNN_PREDICT_PREDICTOR_H_
