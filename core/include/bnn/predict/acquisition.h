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
  kBatchBald,    // classification: greedy BatchBALD (GreedyBatchBald)
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
  // of the single best point. 0 = deterministic top-k. Not with batchbald,
  // which chooses its batch jointly.
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

// Greedy BatchBALD (Kirsch, van Amersfoort & Gal 2019, Alg. 1): chooses k
// of the n pool rows one at a time, each the row i maximising the batch's
// mutual information
//   a(A + i) = H[y_A, y_i] - sum_{j in A + i} E_s H[p_s(y_j)],
// with the joint predictive over the batch estimated from the S posterior
// samples, p(y_1..y_m) = (1/S) sum_s prod_j p_s(y_j), and its entropy
// computed exactly over all C^m label configurations (no sampling of
// configurations). `probs` holds p_s(c | x_i) point-major: entry
// [(i * S + s) * C + c]. Returns the chosen rows in order with a(A) after
// each was added (so scores[0] is the first row's BALD score).
//
// Cost: step m (m = 1..k) scores every remaining row against the C^(m-1)
// configurations of the rows chosen so far: O(n * C^(m-1) * S * C) flops,
// O(n * S * C^k) in all; memory two joint tables of C^(k-1) x S doubles and
// one row of C doubles, allocated once before the first step (the loops over
// candidates allocate nothing). InvalidArgument, naming k, C and S, when
// C^(k-1) * S exceeds kMaxBatchBaldJointEntries. The interrupt is checked
// before every step and every 256 candidates.
inline constexpr int64_t kMaxBatchBaldJointEntries = int64_t{1} << 24;
struct BatchBald {
  std::vector<int64_t> indices;
  std::vector<double> scores;
};
absl::StatusOr<BatchBald> GreedyBatchBald(absl::Span<const double> probs,
                                          int64_t num_rows, int num_samples,
                                          int num_classes, int k,
                                          const Interrupt& interrupt = {});
// Entries of the joint table GreedyBatchBald needs for a batch of k
// (C^(k-1) * S), saturating at INT64_MAX.
int64_t BatchBaldJointEntries(int num_classes, int num_samples, int k);

// Errors as Predictor::Predict's (InvalidArgument for a bad request,
// ResourceExhausted if an allocation fails, the interrupt's status).
// batchbald keeps every pool row's per-sample class probabilities (n x S x
// C doubles) for the greedy selection, which follows the pool's scoring.
absl::StatusOr<Acquisition> Acquire(const Predictor& predictor,
                                    const PoolSource& pool,
                                    const AcquireOptions& options);

}  // namespace bnn

#endif  // BNN_PREDICT_ACQUISITION_H_
