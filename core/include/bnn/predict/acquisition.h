// Active-learning acquisition: score a pool with the predictive and return
// the k best rows. Scoring streams over the pool in chunks, so memory is
// O(k + chunk_rows * S) whatever the pool size.
#ifndef BNN_PREDICT_ACQUISITION_H_
#define BNN_PREDICT_ACQUISITION_H_

#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"

#include "bnn/predict/predictor.h"

namespace bnn {

enum class AcquisitionHeuristic {
  kMaxVariance,  // regression: epistemic predictive variance (NNG Table 3)
  kEntropy,      // classification: predictive entropy H[p]
  kBald,         // classification: mutual information H[p] - E_s H[p_s]
  kMargin,       // classification: 1 - (p_top1 - p_top2)
  kRandom,       // uniform scores: the baseline
};
absl::string_view HeuristicToString(AcquisitionHeuristic h);
absl::StatusOr<AcquisitionHeuristic> StringToHeuristic(absl::string_view name);

// Pool rows, read in chunks (a stored dataset, rows of a request, or rows
// generated on the fly).
class PoolSource {
 public:
  virtual ~PoolSource() = default;
  virtual int64_t num_rows() const = 0;
  virtual int64_t num_features() const = 0;
  // Row-major rows [begin, begin + count) into `out` (resized).
  virtual absl::Status Read(int64_t begin, int64_t count,
                            std::vector<double>* out) const = 0;
};

// Rows held in memory (not owned; must outlive the pool).
class SpanPool final : public PoolSource {
 public:
  SpanPool(absl::Span<const double> rows, int64_t num_features)
      : rows_(rows), num_features_(num_features) {}
  int64_t num_rows() const override {
    return num_features_ > 0 ? rows_.size() / num_features_ : 0;
  }
  int64_t num_features() const override { return num_features_; }
  absl::Status Read(int64_t begin, int64_t count,
                    std::vector<double>* out) const override;

 private:
  absl::Span<const double> rows_;
  int64_t num_features_;
};

struct AcquireOptions {
  // Rows to return, 1 <= k <= pool size.
  int k = 1;
  AcquisitionHeuristic heuristic = AcquisitionHeuristic::kMaxVariance;
  // Posterior samples per prediction and their seed; one draw serves every
  // chunk of the pool.
  int num_samples = 64;
  uint64_t seed = 0;
  // Keep that draw in the predictor's cache (PredictOptions::cache_samples:
  // false for a seed the client did not choose).
  bool cache_samples = true;
  // Batch diversity by stochastic power acquisition (Kirsch et al. 2023):
  // draw the k rows without replacement with probability proportional to
  // score^power (Gumbel-top-k), so k > 1 does not return k near-duplicates
  // of the single best point. 0 = deterministic top-k.
  double diversity_power = 0.0;
  // Pool rows scored per batched prediction.
  int chunk_rows = 4096;
  // Checked before every chunk (and within each chunk's prediction); a
  // non-OK status ends the call with that status.
  Interrupt interrupt;

  absl::Status Validate() const;
};

struct Acquisition {
  // Chosen pool rows, best first, with their heuristic scores.
  std::vector<int64_t> indices;
  std::vector<double> scores;
  int64_t pool_rows = 0;
};

// Peak heap bytes of Acquire over a pool of `pool_rows` rows, estimated
// before it allocates: the weight samples drawn once, one chunk's rows read
// from the pool and its prediction (Predictor::EstimateMemory of a chunk
// with those samples), and the k best candidates (kept_bytes: the result).
MemoryEstimate EstimateAcquireMemory(const Predictor& predictor,
                                     int64_t pool_rows,
                                     const AcquireOptions& options);

// Errors as Predictor::Predict's (InvalidArgument for a bad request,
// ResourceExhausted if an allocation fails, the interrupt's status).
absl::StatusOr<Acquisition> Acquire(const Predictor& predictor,
                                    const PoolSource& pool,
                                    const AcquireOptions& options);

}  // namespace bnn

#endif  // BNN_PREDICT_ACQUISITION_H_
