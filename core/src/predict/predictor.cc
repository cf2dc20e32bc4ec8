#include "bnn/predict/predictor.h"

#include <algorithm>
#include <cmath>
#include <list>
#include <map>
#include <memory>
#include <string_view>
#include <type_traits>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"

#include "bnn/check.h"
#include "bnn/compute_threads.h"
#include "bnn/memory.h"
#include "bnn/model/likelihood.h"
#include "bnn/model/network.h"
#include "bnn/posterior/posterior.h"
#include "bnn/random.h"
#include "bnn/status.h"

namespace bnn {
namespace {

// Rows x samples per forward pass: at most kMaxRowsTimesSamples (bounds
// activation memory), aiming at kTargetRowsTimesSamples, but at least
// kMinChunkRows rows where the bound allows (MaxChunkRows).
constexpr int64_t kMaxRowsTimesSamples = int64_t{1} << 16;
constexpr int64_t kTargetRowsTimesSamples = int64_t{1} << 14;
constexpr int64_t kMinChunkRows = 64;

// Most rows per forward pass with `s_count` samples. Passes of about
// kTargetRowsTimesSamples keep the time between interrupt checks (where a
// server's call may also give its thread to another client's) short, and
// their activations small enough for the cache: on one core of the 2-core
// test machine, 1000 rows x 100 samples of the UCI net took 9.1 ms in 7
// passes, 14.0 ms in 2 passes of 50000 (docs/results/load.md). Fewer than
// kMinChunkRows rows per pass would make the per-sample GEMMs inefficient,
// so large S keep passes of up to kMaxRowsTimesSamples. At most
// `chunk_rows` (PredictorOptions).
int64_t MaxChunkRows(int64_t s_count, int64_t chunk_rows) {
  const int64_t rows =
      std::max(kTargetRowsTimesSamples / s_count,
               std::min(kMinChunkRows, kMaxRowsTimesSamples / s_count));
  return std::max<int64_t>(1, std::min(chunk_rows, rows));
}

// Rows per chunk when `num_rows` are processed in chunks of at most
// `max_chunk`, made (nearly) equal so that padding the last chunk to the
// same size wastes little. Equal-shaped passes matter: the forward-pass
// buffers are sized by the chunk, and a short last chunk reallocated them
// (S x chunk x width values) twice per request. Measured on the UCI net,
// 1000 rows x 100 samples: chunks of 655 + 345 rows took 12.4 ms, two of
// 500 rows 3.7 ms (docs/results/perf.md).
int64_t EvenChunk(int64_t num_rows, int64_t max_chunk) {
  max_chunk = std::max<int64_t>(1, max_chunk);
  const int64_t chunks =
      std::max<int64_t>(1, (num_rows + max_chunk - 1) / max_chunk);
  return (num_rows + chunks - 1) / chunks;
}

double NormalCdf(double z) { return 0.5 * std::erfc(-z / std::sqrt(2.0)); }

// Bisection halvings of MixtureQuantile's bracket. After 53 halvings the
// bracket is narrower than one unit in the last place of its initial width,
// so 64 converge to double precision whatever the scale, and the loop ends
// even when no tolerance is reachable (a tolerance relative to the bracket
// width never ended for y ~ 1e7 + x in original units: the midpoint stopped
// moving before the bracket shrank below 1e-10 of its width).
constexpr int kQuantileBisections = 64;

// The `level` quantile of (1/S) sum_s N(means[s], sigma^2), by bisection on
// the mixture CDF (monotone). Callers pass standardised units (means and
// sigma of order one), so that the bracket is well resolved in double.
double MixtureQuantile(const double* means, int count, double sigma,
                       double level) {
  double lo = *std::min_element(means, means + count) - 10 * sigma;
  double hi = *std::max_element(means, means + count) + 10 * sigma;
  for (int k = 0; k < kQuantileBisections; ++k) {
    const double mid = 0.5 * (lo + hi);
    if (mid <= lo || mid >= hi) break;  // adjacent doubles: converged
    double cdf = 0;
    for (int s = 0; s < count; ++s) cdf += NormalCdf((mid - means[s]) / sigma);
    (cdf / count < level ? lo : hi) = mid;
  }
  return 0.5 * (lo + hi);
}

// Internal unless every output of `p` is finite. NaN or Inf outputs come
// from a posterior or standardisation that overflows on these inputs (e.g.
// huge weights); they are an error, never an answer.
absl::Status CheckFiniteOutputs(const Prediction& p, absl::string_view name) {
  const int64_t n = std::max<int64_t>(1, p.num_rows);
  const std::pair<const char*, const std::vector<double>*> outputs[] = {
      {"mean", &p.mean},
      {"variance", &p.variance},
      {"epistemic_variance", &p.epistemic_variance},
      {"aleatoric_variance", &p.aleatoric_variance},
      {"quantiles", &p.quantiles},
      {"probabilities", &p.probabilities},
      {"predicted_class", &p.predicted_class},
      {"entropy", &p.entropy},
      {"expected_entropy", &p.expected_entropy},
      {"mutual_information", &p.mutual_information},
      {"variation_ratio", &p.variation_ratio},
      {"sample_outputs", &p.sample_outputs},
  };
  for (const auto& [field, values] : outputs) {
    const auto bad = std::find_if(values->begin(), values->end(),
                                  [](double v) { return !std::isfinite(v); });
    if (bad == values->end()) continue;
    // Every output is row-major over rows (sample_outputs: per sample).
    const int64_t k = bad - values->begin();
    const int64_t per_row =
        std::max<int64_t>(1, static_cast<int64_t>(values->size()) / n);
    const int64_t row = field == std::string_view("sample_outputs")
                            ? (k / std::max(1, p.num_classes)) % n
                            : k / per_row;
    return absl::InternalError(absl::StrCat(
        name.empty() ? "the snapshot" : absl::StrCat("snapshot '", name, "'"),
        " gave a non-finite prediction (", field, " = ", *bad, " for row ", row,
        "): its weights or standardisation overflow on these inputs; the "
        "snapshot cannot serve them"));
  }
  return absl::OkStatus();
}

// Reports the progress (rows done) to `interrupt`, and returns its status,
// saying how far the prediction got.
absl::Status Interrupted(const Interrupt& interrupt, int64_t done,
                         int64_t num_rows) {
  interrupt.Progress(done, num_rows);
  const absl::Status status = interrupt.Check();
  if (status.ok()) return status;
  return absl::Status(
      status.code(),
      absl::StrCat(status.message(), ": prediction stopped after ", done,
                   " of ", num_rows, " rows"));
}

double Entropy(const double* p, int n) {
  double h = 0;
  for (int c = 0; c < n; ++c) {
    if (p[c] > 0) h -= p[c] * std::log(p[c]);
  }
  return h;
}

}  // namespace

// The precision-independent interface behind Predictor.
struct Predictor::Impl {
  virtual ~Impl() = default;
  virtual absl::StatusOr<Prediction> Predict(const Snapshot& snap,
                                             absl::Span<const double> rows,
                                             int64_t num_rows,
                                             const PredictOptions& o) const = 0;
  // The D x S samples of (S, seed), from the cache or drawn (and cached when
  // `cache`).
  virtual std::shared_ptr<const WeightSamples> Draw(const Snapshot& snap,
                                                    int s_count, uint64_t seed,
                                                    bool cache) const = 0;
  virtual CacheStats Stats() const = 0;
};

// A block of weight samples (MatrixX<T> of the engine's precision) with the
// request it was drawn for.
class WeightSamples {
 public:
  WeightSamples(const Predictor::Impl* owner, int num_samples, uint64_t seed,
                std::shared_ptr<const void> block)
      : owner(owner),
        num_samples(num_samples),
        seed(seed),
        block(std::move(block)) {}
  const Predictor::Impl* owner;
  int num_samples;
  uint64_t seed;
  std::shared_ptr<const void> block;
};

namespace {

// Idle D x S buffers of finished draws, reused by later draws of the same
// shape instead of a new allocation (and its page faults) per request. Holds
// at most `limit` bytes idle. The blocks it lends give their buffer back
// when the last request using them lets go; they may outlive the pool, and
// then free it.
template <typename U>
class BufferPool : public std::enable_shared_from_this<BufferPool<U>> {
 public:
  using Matrix = MatrixX<U>;
  explicit BufferPool(int64_t limit) : limit_(limit) {}

  // An idle buffer of rows x cols values (contents unspecified), or an
  // empty matrix for the caller to size.
  std::unique_ptr<Matrix> Take(int64_t rows, int64_t cols) {
    absl::MutexLock lock(&mu_);
    for (auto it = idle_.begin(); it != idle_.end(); ++it) {
      if ((*it)->rows() == rows && (*it)->cols() == cols) {
        std::unique_ptr<Matrix> m = std::move(*it);
        idle_.erase(it);
        idle_bytes_ -= Bytes(*m);
        return m;
      }
    }
    return std::make_unique<Matrix>();
  }

  // Keeps `m` for reuse if it fits beside the idle buffers, else frees it.
  void Give(std::unique_ptr<Matrix> m) {
    const int64_t bytes = Bytes(*m);
    {
      absl::MutexLock lock(&mu_);
      if (idle_bytes_ + bytes <= limit_) {
        idle_bytes_ += bytes;
        idle_.push_back(std::move(m));
        return;
      }
    }
    m.reset();  // outside the lock
  }

  // A shared block owning `m` that Give()s it back when released.
  std::shared_ptr<const Matrix> Lend(std::unique_ptr<Matrix> m) {
    std::weak_ptr<BufferPool> pool = this->weak_from_this();
    return std::shared_ptr<const Matrix>(
        m.release(), [pool = std::move(pool)](const Matrix* p) {
          std::unique_ptr<Matrix> owned(const_cast<Matrix*>(p));
          if (auto live = pool.lock()) live->Give(std::move(owned));
        });
  }

 private:
  static int64_t Bytes(const Matrix& m) {
    return static_cast<int64_t>(m.size() * sizeof(U));
  }

  const int64_t limit_;
  absl::Mutex mu_;
  std::vector<std::unique_ptr<Matrix>> idle_ ABSL_GUARDED_BY(mu_);
  int64_t idle_bytes_ ABSL_GUARDED_BY(mu_) = 0;
};

template <typename T>
class Engine final : public Predictor::Impl {
 public:
  Engine(const Snapshot& snap, const PredictorOptions& options)
      : net_(snap.model),
        net64_(snap.model),
        options_(options),
        draws_(std::make_shared<BufferPool<double>>(options.reuse_bytes)) {
    if constexpr (std::is_same_v<T, double>) {
      blocks_ = draws_;
    } else {
      blocks_ = std::make_shared<BufferPool<T>>(options.reuse_bytes);
    }
  }

  absl::StatusOr<Prediction> Predict(const Snapshot& snap,
                                     absl::Span<const double> rows,
                                     int64_t num_rows,
                                     const PredictOptions& o) const override {
    return o.linearized ? PredictLinearized(snap, rows, num_rows, o)
                        : PredictMonteCarlo(snap, rows, num_rows, o);
  }

  std::shared_ptr<const WeightSamples> Draw(const Snapshot& snap, int s_count,
                                            uint64_t seed,
                                            bool cache) const override {
    absl::StatusOr<Block> block =
        Samples(snap, s_count, seed, cache, Interrupt());
    BNN_CHECK_OK(block.status());  // only an interrupt stops a draw
    return std::make_shared<const WeightSamples>(this, s_count, seed,
                                                 *std::move(block));
  }

  Predictor::CacheStats Stats() const override {
    absl::MutexLock lock(&mu_);
    return stats_;
  }

 private:
  using Block = std::shared_ptr<const MatrixX<T>>;
  using Key = std::pair<int, uint64_t>;  // (S, seed)

  // The D x S weight samples for (S, seed): drawn once, then shared by every
  // request with that key until evicted. With `cache` false a miss is drawn
  // for the caller alone and not inserted (one-shot requests). The family
  // draws in parallel tiles with `interrupt` checked between groups of
  // tiles (Posterior::Sample): drawing 256 samples of a 751-weight net in
  // one piece was 3.5 ms of one core, the longest uninterrupted unit of a
  // Predict before (docs/results/load.md).
  absl::StatusOr<Block> Samples(const Snapshot& snap, int s_count,
                                uint64_t seed, bool cache,
                                const Interrupt& interrupt) const {
    const Key key(s_count, seed);
    {
      absl::MutexLock lock(&mu_);
      if (auto it = index_.find(key); it != index_.end()) {
        lru_.splice(lru_.begin(), lru_, it->second);
        ++stats_.hits;
        return it->second->second;
      }
      ++stats_.misses;
    }
    // Draw outside the lock: sampling a large posterior takes a while.
    BNN_ASSIGN_OR_RETURN(
        Block block, DrawBlocked(*snap.posterior, s_count, seed, interrupt));
    const int64_t bytes = static_cast<int64_t>(block->size() * sizeof(T));
    if (!cache || bytes > options_.cache_bytes) return block;
    absl::MutexLock lock(&mu_);
    if (auto it = index_.find(key); it != index_.end()) {
      return it->second->second;  // another request drew it meanwhile
    }
    lru_.emplace_front(key, block);
    index_[key] = lru_.begin();
    stats_.bytes += bytes;
    ++stats_.entries;
    while (stats_.bytes > options_.cache_bytes) {
      const auto& victim = lru_.back();
      stats_.bytes -= static_cast<int64_t>(victim.second->size() * sizeof(T));
      --stats_.entries;
      index_.erase(victim.first);
      lru_.pop_back();
    }
    return block;
  }

  // The D x S samples of `seed` (Posterior::Sample with CounterRng(seed)),
  // on the calling thread's OpenMP threads, into reused buffers where the
  // pools have them.
  absl::StatusOr<Block> DrawBlocked(const Posterior& posterior, int s_count,
                                    uint64_t seed,
                                    const Interrupt& interrupt) const {
    std::unique_ptr<Eigen::MatrixXd> theta =
        draws_->Take(posterior.dim(), s_count);
    if (theta->size() > 0) {
      absl::MutexLock lock(&mu_);
      ++stats_.reused;
    }
    const absl::Status status =
        posterior.Sample(CounterRng(seed), s_count, interrupt, theta.get());
    if (!status.ok()) {
      draws_->Give(std::move(theta));
      return absl::Status(status.code(),
                          absl::StrCat(status.message(), ": stopped drawing ",
                                       s_count, " weight samples"));
    }
    if constexpr (std::is_same_v<T, double>) {
      return blocks_->Lend(std::move(theta));
    } else {
      std::unique_ptr<MatrixX<T>> block =
          blocks_->Take(posterior.dim(), s_count);
      *block = theta->template cast<T>();
      draws_->Give(std::move(theta));
      return blocks_->Lend(std::move(block));
    }
  }

  // Rows begin .. begin + m - 1 standardised into the first m rows of `x`,
  // which gets `padded_rows` >= m rows; the padding rows are zero (the
  // feature means) and their outputs are ignored. InvalidArgument for an
  // input the snapshot's standardisation maps outside the double range.
  template <typename U>
  static absl::Status StandardizeChunk(const Snapshot& snap,
                                       absl::Span<const double> rows,
                                       int64_t begin, int64_t m,
                                       int64_t padded_rows, MatrixX<U>* x) {
    const int64_t p = snap.model.input_dim;
    const Standardization& st = snap.standardization;
    x->resize(padded_rows, p);
    x->bottomRows(padded_rows - m).setZero();
    for (int64_t i = 0; i < m; ++i) {
      for (int64_t j = 0; j < p; ++j) {
        const double raw = rows[(begin + i) * p + j];
        const U z = U((raw - st.feature_mean[j]) / st.feature_std[j]);
        if (!std::isfinite(static_cast<double>(z))) {
          return absl::InvalidArgumentError(absl::StrCat(
              "row ", begin + i, ", feature ", j, " = ", raw,
              " is out of range for this snapshot: standardised by mean ",
              st.feature_mean[j], " and std ", st.feature_std[j],
              " it overflows"));
        }
        (*x)(i, j) = z;
      }
    }
    return absl::OkStatus();
  }

  static void AllocateRegression(int64_t n, size_t levels, Prediction* out) {
    out->mean.resize(n);
    out->variance.resize(n);
    out->epistemic_variance.resize(n);
    out->aleatoric_variance.resize(n);
    out->quantiles.resize(n * levels);
  }

  absl::StatusOr<Prediction> PredictMonteCarlo(const Snapshot& snap,
                                               absl::Span<const double> rows,
                                               int64_t num_rows,
                                               const PredictOptions& o) const {
    const ModelSpec& spec = snap.model;
    const int s_count = o.num_samples;
    const bool classification = IsClassification(snap.task);
    const int k = spec.output_dim;
    const int classes = spec.likelihood == Likelihood::kCategorical ? k : 2;
    const int per_sample_width = classification ? classes : 1;
    const Standardization& st = snap.standardization;
    // Regression statistics are computed in the network's standardised
    // units and mapped back once: in original units a target offset much
    // larger than the spread (y ~ 1e9 + x) cancels catastrophically in the
    // variance and leaves the quantile bisection no representable midpoint.
    const double aleatoric_sd =
        classification ? 0.0 : 1.0 / std::sqrt(snap.noise_precision);

    Prediction out;
    out.num_rows = num_rows;
    out.num_samples = s_count;
    if (classification) {
      out.num_classes = classes;
      out.probabilities.assign(num_rows * classes, 0.0);
      for (auto* v : {&out.predicted_class, &out.entropy, &out.expected_entropy,
                      &out.mutual_information, &out.variation_ratio}) {
        v->resize(num_rows);
      }
    } else {
      AllocateRegression(num_rows, o.quantiles.size(), &out);
    }
    if (o.per_sample) {
      out.sample_outputs.resize(s_count * num_rows * per_sample_width);
    }

    Block theta;
    if (o.samples != nullptr) {
      theta = std::static_pointer_cast<const MatrixX<T>>(o.samples->block);
    } else {
      BNN_ASSIGN_OR_RETURN(
          theta, Samples(snap, s_count, o.seed, o.cache_samples, o.interrupt));
    }
    const int64_t chunk =
        EvenChunk(num_rows, MaxChunkRows(s_count, options_.chunk_rows));
    // Small chunks run on one thread (bnn/compute_threads.h).
    const ScopedComputeThreads threads(
        ComputeThreadsFor(LargestGemmFlops(spec, chunk * s_count)));
    WorkspaceLease lease(this);
    MatrixX<T>& x = lease->x;
    ForwardPass<T>& pass = lease->pass;
    Eigen::VectorXd& sample_means = lease->sample_means;
    Eigen::MatrixXd& probs = lease->probs;  // per-sample probabilities
    std::vector<int>& votes = lease->votes;
    sample_means.resize(s_count);
    probs.resize(classes, s_count);
    votes.resize(classes);
    for (int64_t begin = 0; begin < num_rows; begin += chunk) {
      BNN_RETURN_IF_ERROR(Interrupted(o.interrupt, begin, num_rows));
      const int64_t m = std::min(chunk, num_rows - begin);
      // Every pass has `chunk` rows (the last one padded), so the pass
      // buffers keep their shape across chunks and requests.
      BNN_RETURN_IF_ERROR(StandardizeChunk(snap, rows, begin, m, chunk, &x));
      net_.Forward(x, *theta, &pass);
      const MatrixX<T>& f = pass.output();
      for (int64_t i = 0; i < m; ++i) {
        const int64_t r = begin + i;
        if (!classification) {
          for (int s = 0; s < s_count; ++s) {
            sample_means[s] = static_cast<double>(f(s * chunk + i, 0));
          }
          const double mean = sample_means.mean();
          out.mean[r] = st.UnscaleMean(mean);
          out.epistemic_variance[r] =
              st.UnscaleVariance((sample_means.array() - mean).square().mean());
          out.aleatoric_variance[r] =
              st.UnscaleVariance(aleatoric_sd * aleatoric_sd);
          out.variance[r] =
              out.epistemic_variance[r] + out.aleatoric_variance[r];
          for (size_t q = 0; q < o.quantiles.size(); ++q) {
            out.quantiles[r * o.quantiles.size() + q] =
                st.UnscaleMean(MixtureQuantile(sample_means.data(), s_count,
                                               aleatoric_sd, o.quantiles[q]));
          }
          if (o.per_sample) {
            for (int s = 0; s < s_count; ++s) {
              out.sample_outputs[s * num_rows + r] =
                  st.UnscaleMean(sample_means[s]);
            }
          }
          continue;
        }
        std::fill(votes.begin(), votes.end(), 0);
        double expected_entropy = 0;
        for (int s = 0; s < s_count; ++s) {
          const auto logits = f.row(s * chunk + i);
          auto p = probs.col(s);
          if (spec.likelihood == Likelihood::kBernoulli) {
            p[1] = Sigmoid(static_cast<double>(logits[0]));
            p[0] = 1.0 - p[1];
          } else {
            const double mx = static_cast<double>(logits.maxCoeff());
            for (int c = 0; c < classes; ++c) {
              p[c] = std::exp(static_cast<double>(logits[c]) - mx);
            }
            p /= p.sum();
          }
          expected_entropy += Entropy(p.data(), classes);
          int best = 0;
          p.maxCoeff(&best);
          ++votes[best];
          if (o.per_sample) {
            std::copy_n(
                p.data(), classes,
                out.sample_outputs.data() + (s * num_rows + r) * classes);
          }
        }
        const Eigen::VectorXd mean = probs.rowwise().mean();
        int best = 0;
        mean.maxCoeff(&best);
        std::copy_n(mean.data(), classes,
                    out.probabilities.data() + r * classes);
        out.predicted_class[r] = snap.class_values[best];
        out.entropy[r] = Entropy(mean.data(), classes);
        out.expected_entropy[r] = expected_entropy / s_count;
        // Clamp rounding below zero: MI >= 0 by Jensen.
        out.mutual_information[r] =
            std::max(0.0, out.entropy[r] - out.expected_entropy[r]);
        out.variation_ratio[r] = 1.0 - static_cast<double>(*std::max_element(
                                           votes.begin(), votes.end())) /
                                           s_count;
      }
    }
    return out;
  }

  absl::StatusOr<Prediction> PredictLinearized(const Snapshot& snap,
                                               absl::Span<const double> rows,
                                               int64_t num_rows,
                                               const PredictOptions& o) const {
    const Standardization& st = snap.standardization;
    const double aleatoric = 1.0 / snap.noise_precision;  // standardised
    Prediction out;
    out.num_rows = num_rows;
    AllocateRegression(num_rows, o.quantiles.size(), &out);
    const Eigen::VectorXd& mu = snap.posterior->mean();
    Eigen::MatrixXd x;
    ForwardPass<double> pass;
    PerExampleGrads<double> jacobian;
    const ScopedComputeThreads threads(ComputeThreadsFor(LargestGemmFlops(
        snap.model, std::min<int64_t>(options_.chunk_rows, num_rows))));
    for (int64_t begin = 0; begin < num_rows; begin += options_.chunk_rows) {
      BNN_RETURN_IF_ERROR(Interrupted(o.interrupt, begin, num_rows));
      const int64_t m =
          std::min<int64_t>(options_.chunk_rows, num_rows - begin);
      BNN_RETURN_IF_ERROR(StandardizeChunk(snap, rows, begin, m, m, &x));
      net64_.Forward(x, mu, &pass);
      net64_.OutputGradients(mu, pass, 0, &jacobian);
      BNN_ASSIGN_OR_RETURN(Eigen::VectorXd var,
                           snap.posterior->LinearizedVariance(jacobian));
      for (int64_t i = 0; i < m; ++i) {
        const int64_t r = begin + i;
        // Standardised units first, as in PredictMonteCarlo.
        const double mean = pass.output()(i, 0);
        const double epistemic = std::max(0.0, var[i]);
        const double sd = std::sqrt(epistemic + aleatoric);
        out.mean[r] = st.UnscaleMean(mean);
        out.epistemic_variance[r] = st.UnscaleVariance(epistemic);
        out.aleatoric_variance[r] = st.UnscaleVariance(aleatoric);
        out.variance[r] = out.epistemic_variance[r] + out.aleatoric_variance[r];
        for (size_t q = 0; q < o.quantiles.size(); ++q) {
          out.quantiles[r * o.quantiles.size() + q] =
              st.UnscaleMean(MixtureQuantile(&mean, 1, sd, o.quantiles[q]));
        }
      }
    }
    return out;
  }

  // Per-request buffers, recycled so that steady-state requests allocate no
  // large arrays (activations of up to kMaxRowsTimesSamples rows).
  struct Workspace {
    MatrixX<T> x;
    ForwardPass<T> pass;
    Eigen::VectorXd sample_means;
    Eigen::MatrixXd probs;
    std::vector<int> votes;
  };
  class WorkspaceLease {
   public:
    explicit WorkspaceLease(const Engine* engine) : engine_(engine) {
      absl::MutexLock lock(&engine_->mu_);
      if (!engine_->idle_.empty()) {
        ws_ = std::move(engine_->idle_.back());
        engine_->idle_.pop_back();
      }
      if (ws_ == nullptr) ws_ = std::make_unique<Workspace>();
    }
    ~WorkspaceLease() {
      absl::MutexLock lock(&engine_->mu_);
      if (engine_->idle_.size() < kMaxIdleWorkspaces) {
        engine_->idle_.push_back(std::move(ws_));
      }
    }
    Workspace* operator->() { return ws_.get(); }

   private:
    const Engine* engine_;
    std::unique_ptr<Workspace> ws_;
  };
  static constexpr size_t kMaxIdleWorkspaces = 8;

  Network<T> net_;
  Network<double> net64_;  // linearised predictive: Jacobians in double
  PredictorOptions options_;

  mutable absl::Mutex mu_;
  mutable std::list<std::pair<Key, Block>> lru_ ABSL_GUARDED_BY(mu_);
  mutable std::map<Key, typename std::list<std::pair<Key, Block>>::iterator>
      index_ ABSL_GUARDED_BY(mu_);
  mutable Predictor::CacheStats stats_ ABSL_GUARDED_BY(mu_);
  mutable std::vector<std::unique_ptr<Workspace>> idle_ ABSL_GUARDED_BY(mu_);
  // Idle draw buffers (double, as the families draw) and weight-sample
  // blocks (of T; the same pool when T is double), each at most
  // options_.reuse_bytes.
  std::shared_ptr<BufferPool<double>> draws_;
  std::shared_ptr<BufferPool<T>> blocks_;
};

}  // namespace

absl::Status PredictorOptions::Validate() const {
  BNN_RETURN_IF_ERROR(CheckIntRange("max_samples", max_samples, 1, 1 << 20));
  BNN_RETURN_IF_ERROR(CheckIntRange("chunk_rows", chunk_rows, 1, 1 << 20));
  BNN_RETURN_IF_ERROR(
      CheckIntRange("cache_bytes", cache_bytes, 0, int64_t{1} << 40));
  BNN_RETURN_IF_ERROR(
      CheckIntRange("reuse_bytes", reuse_bytes, 0, int64_t{1} << 40));
  return CheckOneOf("precision", precision, {"float64", "float32"});
}

absl::StatusOr<std::unique_ptr<Predictor>> Predictor::Create(
    std::shared_ptr<const Snapshot> snapshot, const PredictorOptions& options,
    std::string name) {
  BNN_RETURN_IF_ERROR(options.Validate());
  if (snapshot == nullptr || snapshot->posterior == nullptr) {
    return absl::InvalidArgumentError("snapshot has no posterior");
  }
  BNN_RETURN_IF_ERROR(snapshot->model.Validate());
  if (snapshot->posterior->dim() != snapshot->model.NumParameters()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "posterior has ", snapshot->posterior->dim(),
        " parameters; the model has ", snapshot->model.NumParameters()));
  }
  if (IsClassification(snapshot->task) &&
      static_cast<int>(snapshot->class_values.size()) !=
          (snapshot->model.likelihood == Likelihood::kCategorical
               ? snapshot->model.output_dim
               : 2)) {
    return absl::InvalidArgumentError(
        "snapshot class_values do not match the model's outputs");
  }
  std::unique_ptr<Impl> impl;
  if (options.precision == "float32") {
    impl = std::make_unique<Engine<float>>(*snapshot, options);
  } else {
    impl = std::make_unique<Engine<double>>(*snapshot, options);
  }
  return std::unique_ptr<Predictor>(new Predictor(
      std::move(snapshot), options, std::move(name), std::move(impl)));
}

Predictor::Predictor(std::shared_ptr<const Snapshot> snapshot,
                     const PredictorOptions& options, std::string name,
                     std::unique_ptr<Impl> impl)
    : snapshot_(std::move(snapshot)),
      options_(options),
      name_(std::move(name)),
      impl_(std::move(impl)) {}

Predictor::~Predictor() = default;

int64_t Predictor::num_features() const { return snapshot_->model.input_dim; }

Predictor::CacheStats Predictor::cache_stats() const { return impl_->Stats(); }

MemoryEstimate Predictor::EstimateMemory(int64_t num_rows,
                                         const PredictOptions& options) const {
  const ModelSpec& spec = snapshot_->model;
  const Posterior& posterior = *snapshot_->posterior;
  const bool classification = IsClassification(snapshot_->task);
  const int b =
      options_.precision == "float32" ? sizeof(float) : sizeof(double);
  const int64_t s_count = std::max(1, options.num_samples);
  const int64_t classes = spec.likelihood == Likelihood::kCategorical
                              ? spec.output_dim
                              : (classification ? 2 : 0);
  MemoryEstimate e;
  MemoryEstimate draw;  // drawing the samples, before any chunk
  if (options.linearized) {
    const int64_t chunk = std::min<int64_t>(options_.chunk_rows, num_rows);
    e.Add("standardised chunk", MulBytes({chunk, spec.input_dim, 8}));
    e.Add("mean forward pass", ForwardPassBytes(spec, chunk, sizeof(double)));
    e.Add("Jacobian factors",
          PerExampleGradsBytes(spec, chunk, sizeof(double)));
    e.Add("linearised variance", posterior.LinearizedVarianceBytes(chunk));
  } else {
    const int64_t block = MulBytes({posterior.dim(), s_count, b});
    if (options.samples == nullptr) {
      draw.Add(absl::StrCat("drawing the weight samples (D x S = ",
                            posterior.dim(), " x ", s_count, ", in double)"),
               posterior.SampleBytes(static_cast<int>(s_count)));
      if (b == sizeof(float)) draw.Add("their float32 copy", block);
      e.Add(absl::StrCat("weight samples (D x S = ", posterior.dim(), " x ",
                         s_count, ")"),
            block);
      // A float32 engine keeps the double draw idle for the next draw of
      // this shape (PredictorOptions::reuse_bytes) while it computes.
      const int64_t draw_buffer = MulBytes({posterior.dim(), s_count, 8});
      if (b == sizeof(float) && draw_buffer <= options_.reuse_bytes) {
        e.Add("the double draw buffer, kept for reuse", draw_buffer);
      }
    }
    const int64_t chunk =
        EvenChunk(num_rows, MaxChunkRows(s_count, options_.chunk_rows));
    e.Add("standardised chunk", MulBytes({chunk, spec.input_dim, b}));
    e.Add(
        absl::StrCat("forward pass (", chunk, " rows x ", s_count, " samples)"),
        ForwardPassBytes(spec, MulBytes({chunk, s_count}), b));
    e.Add("per-row sample statistics",
          MulBytes({s_count, std::max<int64_t>(1, classes) + 1, 8}));
  }
  // The Prediction: regression mean, variance, epistemic, aleatoric and the
  // quantiles; classification probabilities and five per-row statistics;
  // per-sample outputs.
  const int64_t per_row =
      classification ? classes + 5
                     : 4 + static_cast<int64_t>(options.quantiles.size());
  int64_t kept = MulBytes({num_rows, per_row, sizeof(double)});
  if (options.per_sample) {
    kept = AddBytes(kept,
                    MulBytes({num_rows, s_count, std::max<int64_t>(1, classes),
                              sizeof(double)}));
  }
  e.Add("prediction arrays", kept);
  e.kept_bytes = kept;
  // The draw's temporaries are gone before the first chunk.
  draw.kept_bytes = kept;
  return draw.bytes > e.bytes ? draw : e;
}

absl::StatusOr<std::shared_ptr<const WeightSamples>> Predictor::DrawSamples(
    const PredictOptions& options) const {
  BNN_RETURN_IF_ERROR(CheckIntRange("num_samples", options.num_samples, 1,
                                    options_.max_samples));
  return FailOnAllocationError(
      "drawing weight samples",
      [&]() -> absl::StatusOr<std::shared_ptr<const WeightSamples>> {
        return impl_->Draw(*snapshot_, options.num_samples, options.seed,
                           options.cache_samples);
      });
}

absl::Status Predictor::CheckSamples(const WeightSamples& samples,
                                     const PredictOptions& options) const {
  if (samples.owner != impl_.get()) {
    return absl::InvalidArgumentError(
        "samples were drawn by another predictor");
  }
  if (options.linearized || samples.num_samples != options.num_samples ||
      samples.seed != options.seed) {
    return absl::InvalidArgumentError(absl::StrCat(
        "samples were drawn for num_samples = ", samples.num_samples,
        ", seed = ", samples.seed, "; the request asks for ",
        options.linearized ? "a linearised prediction"
                           : absl::StrCat("num_samples = ", options.num_samples,
                                          ", seed = ", options.seed)));
  }
  return absl::OkStatus();
}

absl::StatusOr<Prediction> Predictor::Predict(
    absl::Span<const double> rows, int64_t num_rows,
    const PredictOptions& options) const {
  const int64_t p = num_features();
  if (num_rows < 0 || static_cast<int64_t>(rows.size()) != num_rows * p) {
    return absl::InvalidArgumentError(
        absl::StrCat("rows has ", rows.size(), " values; expected ", num_rows,
                     " rows x ", p, " features"));
  }
  for (size_t k = 0; k < rows.size(); ++k) {
    if (!std::isfinite(rows[k])) {
      return absl::InvalidArgumentError(
          absl::StrCat("row ", k / p, ", feature ", k % p, " is not finite (",
                       rows[k], ")"));
    }
  }
  const bool classification = IsClassification(snapshot_->task);
  if (options.linearized) {
    if (classification) {
      return absl::InvalidArgumentError(absl::StrCat(
          "linearized predictive is for regression; this snapshot's task is ",
          TaskToString(snapshot_->task)));
    }
    if (options.per_sample) {
      return absl::InvalidArgumentError(
          "per_sample outputs need Monte Carlo prediction (linearized = "
          "false)");
    }
  } else {
    BNN_RETURN_IF_ERROR(CheckIntRange("num_samples", options.num_samples, 1,
                                      options_.max_samples));
  }
  if (!options.quantiles.empty() && classification) {
    return absl::InvalidArgumentError(
        "quantiles are for regression; this snapshot is a classifier");
  }
  for (size_t q = 0; q < options.quantiles.size(); ++q) {
    const double level = options.quantiles[q];
    if (!(level > 0 && level < 1)) {
      return absl::InvalidArgumentError(
          absl::StrCat("quantiles[", q, "] = ", level, " must be in (0, 1)"));
    }
  }
  if (options.samples != nullptr) {
    BNN_RETURN_IF_ERROR(CheckSamples(*options.samples, options));
  }
  BNN_ASSIGN_OR_RETURN(
      Prediction prediction,
      FailOnAllocationError(
          name_.empty()
              ? "prediction"
              : absl::StrCat("prediction with snapshot '", name_, "'"),
          [&] { return impl_->Predict(*snapshot_, rows, num_rows, options); }));
  BNN_RETURN_IF_ERROR(CheckFiniteOutputs(prediction, name_));
  return prediction;
}

}  // namespace bnn
