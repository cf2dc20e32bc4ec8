#include "bnn/predict/acquisition.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <queue>
#include <string>
#include <utility>

#include "absl/strings/str_cat.h"

#include "bnn/memory.h"
#include "bnn/random.h"
#include "bnn/status.h"

namespace bnn {
namespace {

constexpr AcquisitionHeuristic kAll[] = {
    AcquisitionHeuristic::kMaxVariance, AcquisitionHeuristic::kEntropy,
    AcquisitionHeuristic::kBald,        AcquisitionHeuristic::kMargin,
    AcquisitionHeuristic::kRandom,      AcquisitionHeuristic::kBatchBald};

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
         h == AcquisitionHeuristic::kBald ||
         h == AcquisitionHeuristic::kMargin ||
         h == AcquisitionHeuristic::kBatchBald;
}

// -sum_c q_c log q_c of `q` (nats); 0 log 0 = 0.
double EntropyOf(const double* q, int num_classes) {
  double h = 0;
  for (int c = 0; c < num_classes; ++c) {
    if (q[c] > 0) h -= q[c] * std::log(q[c]);
  }
  return h;
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
    case AcquisitionHeuristic::kBatchBald:
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
    case AcquisitionHeuristic::kBatchBald:
      return "batchbald";
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
                   "random, batchbald"));
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

int64_t BatchBaldJointEntries(int num_classes, int num_samples, int k) {
  int64_t entries = num_samples;
  for (int m = 1; m < k; ++m) {
    if (entries > std::numeric_limits<int64_t>::max() / num_classes) {
      return std::numeric_limits<int64_t>::max();
    }
    entries *= num_classes;
  }
  return entries;
}

namespace {

// InvalidArgument naming k, C and S when batchbald's joint table would
// exceed kMaxBatchBaldJointEntries.
absl::Status CheckBatchBaldSize(int classes, int s_count, int k) {
  const int64_t entries = BatchBaldJointEntries(classes, s_count, k);
  if (entries <= kMaxBatchBaldJointEntries) return absl::OkStatus();
  return absl::InvalidArgumentError(
      absl::StrCat("heuristic batchbald with k = ", k, " over ", classes,
                   " classes and num_samples = ", s_count,
                   " needs a joint table of C^(k-1) x S = ",
                   entries == std::numeric_limits<int64_t>::max()
                       ? std::string("more than 9e18")
                       : absl::StrCat(entries),
                   " entries; the limit is ", kMaxBatchBaldJointEntries,
                   ": ask for a smaller k or fewer samples"));
}

}  // namespace

absl::StatusOr<BatchBald> GreedyBatchBald(absl::Span<const double> probs,
                                          int64_t num_rows, int num_samples,
                                          int num_classes, int k,
                                          const Interrupt& interrupt) {
  const int64_t n = num_rows;
  const int s_count = num_samples;
  const int classes = num_classes;
  if (n < 1 || s_count < 1 || classes < 2 || k < 1 || k > n ||
      static_cast<int64_t>(probs.size()) != n * s_count * classes) {
    return absl::InvalidArgumentError(absl::StrCat(
        "batchbald needs 1 <= k <= rows, S >= 1, C >= 2 and rows x S x C "
        "probabilities; got k = ",
        k, ", ", n, " rows, S = ", s_count, ", C = ", classes, " and ",
        probs.size(), " values"));
  }
  BNN_RETURN_IF_ERROR(CheckBatchBaldSize(classes, s_count, k));
  const int64_t max_entries = BatchBaldJointEntries(classes, s_count, k);
  // E_s H[p_s(y_i)] of every row.
  std::vector<double> conditional(n, 0.0);
  for (int64_t i = 0; i < n; ++i) {
    double sum = 0;
    for (int s = 0; s < s_count; ++s) {
      sum += EntropyOf(probs.data() + (i * s_count + s) * classes, classes);
    }
    conditional[i] = sum / s_count;
  }
  // joint[r * S + s] = prod_{j in A} p_s(y_j = config r's label of j): one
  // row per configuration of the chosen rows' labels (one row, all ones,
  // before the first choice). `next` receives the table grown by a row.
  std::vector<double> joint(max_entries, 0.0);
  std::vector<double> next(max_entries, 0.0);
  std::vector<double> q(classes, 0.0);
  std::vector<char> chosen(n, 0);
  std::fill(joint.begin(), joint.begin() + s_count, 1.0);
  int64_t configs = 1;
  double chosen_conditional = 0;
  const double inv_s = 1.0 / s_count;
  BatchBald out;
  for (int m = 0; m < k; ++m) {
    BNN_RETURN_IF_ERROR(interrupt.Check());
    int64_t best = -1;
    double best_score = -std::numeric_limits<double>::infinity();
    for (int64_t i = 0; i < n; ++i) {
      if (chosen[i]) continue;
      if ((i & 255) == 255) BNN_RETURN_IF_ERROR(interrupt.Check());
      // H[y_A, y_i] = -sum_{r, c} q_rc log q_rc with
      // q_rc = (1/S) sum_s joint[r, s] p_s(c | x_i).
      const double* p_i = probs.data() + i * s_count * classes;
      double h = 0;
      for (int64_t r = 0; r < configs; ++r) {
        std::fill(q.begin(), q.end(), 0.0);
        const double* w = joint.data() + r * s_count;
        for (int s = 0; s < s_count; ++s) {
          const double ws = w[s];
          const double* row = p_i + s * classes;
          for (int c = 0; c < classes; ++c) q[c] += ws * row[c];
        }
        for (int c = 0; c < classes; ++c) {
          const double qc = q[c] * inv_s;
          if (qc > 0) h -= qc * std::log(qc);
        }
      }
      const double score = h - chosen_conditional - conditional[i];
      if (score > best_score) {
        best_score = score;
        best = i;
      }
    }
    chosen[best] = 1;
    chosen_conditional += conditional[best];
    out.indices.push_back(best);
    out.scores.push_back(best_score);
    if (m + 1 == k) break;
    // Grow the table by the chosen row: configuration (r, c) -> r * C + c.
    const double* p_best = probs.data() + best * s_count * classes;
    for (int64_t r = 0; r < configs; ++r) {
      const double* w = joint.data() + r * s_count;
      for (int c = 0; c < classes; ++c) {
        double* out_row = next.data() + (r * classes + c) * s_count;
        for (int s = 0; s < s_count; ++s) {
          out_row[s] = w[s] * p_best[s * classes + c];
        }
      }
    }
    configs *= classes;
    joint.swap(next);
  }
  return out;
}

namespace {

// Scores the pool chunk by chunk with one draw, keeping every row's
// per-sample class probabilities, then chooses the batch greedily.
absl::StatusOr<Acquisition> BatchBaldAcquire(const Predictor& predictor,
                                             const PoolSource& pool,
                                             const AcquireOptions& options,
                                             PredictOptions predict) {
  const int64_t n = pool.num_rows();
  const int s_count = options.num_samples;
  const int classes =
      static_cast<int>(predictor.snapshot().class_values.size());
  // Refused before the pool is scored.
  BNN_RETURN_IF_ERROR(CheckBatchBaldSize(classes, s_count, options.k));
  predict.per_sample = true;
  std::vector<double> probs(static_cast<size_t>(n) * s_count * classes);
  std::vector<double> rows;
  for (int64_t begin = 0; begin < n; begin += options.chunk_rows) {
    const int64_t m = std::min<int64_t>(options.chunk_rows, n - begin);
    BNN_RETURN_IF_ERROR(options.interrupt.Check());
    BNN_RETURN_IF_ERROR(pool.Read(begin, m, &rows));
    BNN_ASSIGN_OR_RETURN(const Prediction p,
                         predictor.Predict(rows, m, predict));
    // Sample-major [(s * m + i) * C + c] to point-major.
    for (int s = 0; s < s_count; ++s) {
      for (int64_t i = 0; i < m; ++i) {
        const double* from = p.sample_outputs.data() + (s * m + i) * classes;
        std::copy(from, from + classes,
                  probs.data() + ((begin + i) * s_count + s) * classes);
      }
    }
  }
  BNN_ASSIGN_OR_RETURN(BatchBald batch,
                       GreedyBatchBald(probs, n, s_count, classes, options.k,
                                       options.interrupt));
  Acquisition out;
  out.pool_rows = n;
  out.indices = std::move(batch.indices);
  out.scores = std::move(batch.scores);
  return out;
}

}  // namespace

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
        " needs a classifier; this snapshot is a regression model (task "
        "regression; use max_variance)"));
  }
  if (options.heuristic == AcquisitionHeuristic::kMaxVariance &&
      classification) {
    return absl::InvalidArgumentError(
        "heuristic max_variance is for regression; for a classifier use "
        "entropy, bald, margin or batchbald");
  }
  if (options.heuristic == AcquisitionHeuristic::kBatchBald &&
      options.diversity_power > 0) {
    return absl::InvalidArgumentError(
        "diversity_power does not apply to heuristic batchbald, which "
        "chooses its batch jointly; leave it 0");
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

  if (options.heuristic == AcquisitionHeuristic::kBatchBald) {
    return BatchBaldAcquire(predictor, pool, options, predict);
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
  if (options.heuristic == AcquisitionHeuristic::kBatchBald) {
    const int64_t classes = predictor.snapshot().class_values.size();
    e.Add("per-sample probabilities of the pool (rows x S x C)",
          MulBytes({pool_rows, options.num_samples, classes, sizeof(double)}));
    e.Add("per-sample outputs of a chunk",
          MulBytes({chunk, options.num_samples, classes, sizeof(double)}));
    const int64_t entries =
        std::min(BatchBaldJointEntries(static_cast<int>(classes),
                                       options.num_samples, options.k),
                 kMaxBatchBaldJointEntries);
    e.Add("BatchBALD joint tables (2 x C^(k-1) x S)",
          MulBytes({2, entries, sizeof(double)}));
    e.Add("BatchBALD per-row entropies", MulBytes({pool_rows, 9}));
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
