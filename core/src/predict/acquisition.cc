#include "bnn/predict/acquisition.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <queue>

#include "absl/strings/str_cat.h"

#include "bnn/memory.h"
#include "bnn/random.h"
#include "bnn/status.h"

namespace bnn {
namespace {

constexpr AcquisitionHeuristic kAll[] = {
    AcquisitionHeuristic::kMaxVariance, AcquisitionHeuristic::kEntropy,
    AcquisitionHeuristic::kBald, AcquisitionHeuristic::kMargin,
    AcquisitionHeuristic::kRandom};

// A candidate: its ranking key (score, or perturbed log-score) and row.
struct Candidate {
  double key;
  int64_t index;
  double score;
};
// Min-heap on key; among equal keys the larger index is evicted first, so
// ties keep the earliest rows (deterministic top-k).
struct WorseOnTop {
  bool operator()(const Candidate& a, const Candidate& b) const {
    if (a.key != b.key) return a.key > b.key;
    return a.index < b.index;
  }
};

bool NeedsClassification(AcquisitionHeuristic h) {
  return h == AcquisitionHeuristic::kEntropy ||
         h == AcquisitionHeuristic::kBald || h == AcquisitionHeuristic::kMargin;
}

double Score(AcquisitionHeuristic h, const Prediction& p, int64_t i) {
  switch (h) {
    case AcquisitionHeuristic::kMaxVariance:
      return p.epistemic_variance[i];
    case AcquisitionHeuristic::kEntropy:
      return p.entropy[i];
    case AcquisitionHeuristic::kBald:
      return p.mutual_information[i];
    case AcquisitionHeuristic::kMargin: {
      const double* q = p.probabilities.data() + i * p.num_classes;
      double top1 = -1, top2 = -1;
      for (int c = 0; c < p.num_classes; ++c) {
        if (q[c] > top1) {
          top2 = top1;
          top1 = q[c];
        } else if (q[c] > top2) {
          top2 = q[c];
        }
      }
      return 1.0 - (top1 - top2);
    }
    case AcquisitionHeuristic::kRandom:
      break;
  }
  return 0.0;
}

}  // namespace

absl::string_view HeuristicToString(AcquisitionHeuristic h) {
  switch (h) {
    case AcquisitionHeuristic::kMaxVariance:
      return "max_variance";
    case AcquisitionHeuristic::kEntropy:
      return "entropy";
    case AcquisitionHeuristic::kBald:
      return "bald";
    case AcquisitionHeuristic::kMargin:
      return "margin";
    case AcquisitionHeuristic::kRandom:
      return "random";
  }
  return "unknown";
}

absl::StatusOr<AcquisitionHeuristic> StringToHeuristic(absl::string_view name) {
  for (AcquisitionHeuristic h : kAll) {
    if (name == HeuristicToString(h)) return h;
  }
  return absl::InvalidArgumentError(
      absl::StrCat("unknown heuristic '", name,
                   "'; known heuristics: max_variance, entropy, bald, margin, "
                   "random"));
}

absl::Status SpanPool::Read(int64_t begin, int64_t count,
                            std::vector<double>* out) const {
  if (begin < 0 || count < 0 || begin + count > num_rows()) {
    return absl::OutOfRangeError(absl::StrCat(
        "pool rows [", begin, ", ", begin + count, ") exceed ", num_rows()));
  }
  out->assign(rows_.begin() + begin * num_features_,
              rows_.begin() + (begin + count) * num_features_);
  return absl::OkStatus();
}

absl::Status AcquireOptions::Validate() const {
  BNN_RETURN_IF_ERROR(CheckIntRange("k", k, 1, 1 << 20));
  BNN_RETURN_IF_ERROR(CheckIntRange("num_samples", num_samples, 1, 1 << 20));
  BNN_RETURN_IF_ERROR(
      CheckRange("diversity_power", diversity_power, 0, 1e6, true));
  return CheckIntRange("chunk_rows", chunk_rows, 1, 1 << 24);
}

namespace {

absl::StatusOr<Acquisition> AcquireImpl(const Predictor& predictor,
                                        const PoolSource& pool,
                                        const AcquireOptions& options) {
  BNN_RETURN_IF_ERROR(options.Validate());
  const Snapshot& snap = predictor.snapshot();
  const bool classification = IsClassification(snap.task);
  if (NeedsClassification(options.heuristic) && !classification) {
    return absl::InvalidArgumentError(absl::StrCat(
        "heuristic ", HeuristicToString(options.heuristic),
        " needs a classifier; this snapshot is a regression model (use "
        "max_variance)"));
  }
  if (options.heuristic == AcquisitionHeuristic::kMaxVariance &&
      classification) {
    return absl::InvalidArgumentError(
        "heuristic max_variance is for regression; for a classifier use "
        "entropy, bald or margin");
  }
  if (pool.num_features() != predictor.num_features()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "pool rows have ", pool.num_features(),
        " features; the snapshot expects ", predictor.num_features()));
  }
  const int64_t n = pool.num_rows();
  if (options.k > n) {
    return absl::InvalidArgumentError(
        absl::StrCat("k = ", options.k, " exceeds the pool's ", n, " rows"));
  }

  // Randomness (random scores, Gumbel noise) comes from one stream consumed
  // in row order, so results do not depend on the chunk size.
  Rng noise = Rng(options.seed).Fork(0x61637175697265ULL);  // "acquire"
  const bool random = options.heuristic == AcquisitionHeuristic::kRandom;
  const bool diverse = options.diversity_power > 0 && !random;
  PredictOptions predict;
  predict.num_samples = options.num_samples;
  predict.seed = options.seed;
  predict.cache_samples = options.cache_samples;
  predict.interrupt = options.interrupt;
  if (!random) {
    // One draw serves every chunk, cached or not.
    BNN_ASSIGN_OR_RETURN(predict.samples, predictor.DrawSamples(predict));
  }

  std::priority_queue<Candidate, std::vector<Candidate>, WorseOnTop> best;
  std::vector<double> rows;
  for (int64_t begin = 0; begin < n; begin += options.chunk_rows) {
    // Stopped by the interrupt (here or inside Predict): say where.
    const auto stopped = [&](const absl::Status& status) {
      return absl::Status(
          status.code(),
          absl::StrCat(status.message(), " (acquisition at pool row ", begin,
                       " of ", n, ")"));
    };
    if (absl::Status status = options.interrupt.Check(); !status.ok()) {
      return stopped(status);
    }
    const int64_t m = std::min<int64_t>(options.chunk_rows, n - begin);
    Prediction p;
    if (!random) {
      BNN_RETURN_IF_ERROR(pool.Read(begin, m, &rows));
      absl::StatusOr<Prediction> predicted =
          predictor.Predict(rows, m, predict);
      if (!predicted.ok()) {
        return absl::IsCancelled(predicted.status()) ||
                       absl::IsDeadlineExceeded(predicted.status())
                   ? stopped(predicted.status())
                   : predicted.status();
      }
      p = *std::move(predicted);
    }
    for (int64_t i = 0; i < m; ++i) {
      Candidate c{0.0, begin + i, 0.0};
      if (random) {
        c.score = c.key = noise.Uniform();
      } else {
        c.score = Score(options.heuristic, p, i);
        c.key = c.score;
        if (diverse) {
          // Gumbel-top-k: argsort of power * log(score) + Gumbel noise draws
          // without replacement with P proportional to score^power.
          const double gumbel =
              -std::log(-std::log(noise.Uniform(1e-300, 1.0)));
          c.key = c.score > 0
                      ? options.diversity_power * std::log(c.score) + gumbel
                      : -std::numeric_limits<double>::infinity();
        }
      }
      if (static_cast<int64_t>(best.size()) < options.k) {
        best.push(c);
      } else if (WorseOnTop()(c, best.top())) {  // c beats the worst kept
        best.pop();
        best.push(c);
      }
    }
  }
  Acquisition out;
  out.pool_rows = n;
  std::vector<Candidate> chosen;
  while (!best.empty()) {
    chosen.push_back(best.top());
    best.pop();
  }
  std::reverse(chosen.begin(), chosen.end());
  for (const Candidate& c : chosen) {
    out.indices.push_back(c.index);
    out.scores.push_back(c.score);
  }
  return out;
}

}  // namespace

MemoryEstimate EstimateAcquireMemory(const Predictor& predictor,
                                     int64_t pool_rows,
                                     const AcquireOptions& options) {
  const int64_t chunk = std::min<int64_t>(options.chunk_rows, pool_rows);
  MemoryEstimate e;
  e.Add("pool chunk rows",
        MulBytes({chunk, predictor.num_features(), sizeof(double)}));
  if (options.heuristic != AcquisitionHeuristic::kRandom) {
    // The samples, drawn once, and one chunk's prediction with them.
    PredictOptions predict;
    predict.num_samples = options.num_samples;
    e.Add("", predictor.EstimateMemory(chunk, predict));
  }
  const int64_t kept = MulBytes({options.k, sizeof(double) + sizeof(int64_t)});
  e.Add("best candidates", MulBytes({options.k, sizeof(Candidate)}));
  e.Add("acquired rows and scores", kept);
  e.kept_bytes = kept;
  return e;
}

absl::StatusOr<Acquisition> Acquire(const Predictor& predictor,
                                    const PoolSource& pool,
                                    const AcquireOptions& options) {
  return FailOnAllocationError(
      "acquisition", [&] { return AcquireImpl(predictor, pool, options); });
}

}  // namespace bnn
